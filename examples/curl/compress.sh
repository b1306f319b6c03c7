#!/bin/sh
# Compress one image with curl: the whole API call is the one `curl` line below.
#
#   COMPRESSO_API_KEY=cmp_live_… ./compress.sh photo.jpg photo.webp webp 75
#
# Arguments: input, output, then optional output format (default webp) and quality (1-100 or auto,
# default 80). COMPRESSO_BASE_URL defaults to a local `npm start` server.
# --fail-with-body: on an error curl exits non-zero and prints the server's JSON
# ({"error":{"code","message",...}}) instead of writing it into the output file as if it were an image.
set -eu
: "${COMPRESSO_API_KEY:?set COMPRESSO_API_KEY to your API key (npx compresso keys create … or the account page)}"
base="${COMPRESSO_BASE_URL:-http://localhost:3000}"
tmp="$2.part"
if curl --silent --show-error --fail-with-body \
  -H "Authorization: Bearer $COMPRESSO_API_KEY" \
  -F "file=@$1" -F "output_format=${3:-webp}" -F "quality=${4:-80}" \
  -o "$tmp" "$base/api/v1/compress"; then
  mv "$tmp" "$2"
  echo "$1 -> $2 ($(wc -c <"$1") -> $(wc -c <"$2") bytes)"
else
  status=$?
  cat "$tmp" >&2 && echo >&2
  rm -f "$tmp"
  exit "$status"
fi
