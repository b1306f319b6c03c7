#!/bin/sh
# What would compressing this image save? Prints the server's JSON; nothing is stored.
#
#   COMPRESSO_API_KEY=cmp_live_… ./info.sh photo.jpg avif auto
set -eu
: "${COMPRESSO_API_KEY:?set COMPRESSO_API_KEY to your API key}"
base="${COMPRESSO_BASE_URL:-http://localhost:3000}"
curl --silent --show-error --fail-with-body \
  -H "Authorization: Bearer $COMPRESSO_API_KEY" \
  -F "file=@$1" -F "output_format=${2:-webp}" -F "quality=${3:-80}" \
  "$base/api/v1/info"
echo
