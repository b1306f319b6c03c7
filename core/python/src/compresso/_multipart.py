"""A small multipart/form-data encoder (RFC 7578), written here because the standard library has none
that fits: ``email.mime`` folds long lines, adds MIME-Version headers and encodes bodies for mail, not
for HTTP forms.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Sequence, Tuple

__all__ = ["encode_multipart", "encode_multipart_files", "sniff_content_type"]

# The HTML form-data rule browsers follow: percent-escape only the three characters that could end or
# break a quoted header parameter; everything else (UTF-8 included) is sent as is.
_ESCAPES = {'"': "%22", "\r": "%0D", "\n": "%0A"}
_NEEDS_ESCAPE = re.compile(r'["\r\n]')


def _quote(value: str) -> str:
    return _NEEDS_ESCAPE.sub(lambda m: _ESCAPES[m.group(0)], value)


_SIGNATURES: Sequence[Tuple[bytes, int, str]] = (
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"GIF8", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),
    (b"II*\x00", 0, "image/tiff"),
    (b"MM\x00*", 0, "image/tiff"),
)


def sniff_content_type(head: bytes) -> str:
    """The part's Content-Type from its first bytes; the server decides from the bytes anyway, this is
    only a courtesy to proxies and logs."""
    for magic, offset, mime in _SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            return mime
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"avif", b"avis"):
            return "image/avif"
        if brand in (b"heic", b"heix", b"mif1", b"msf1", b"hevc"):
            return "image/heic"
    return "application/octet-stream"


def encode_multipart(
    fields: Sequence[Tuple[str, str]],
    file_field: str,
    filename: str,
    content: bytes,
    content_type: Optional[str] = None,
) -> Tuple[bytes, str]:
    """Encode text fields and one file part. Returns (body, Content-Type header value)."""
    return encode_multipart_files(fields, file_field, [(filename, content, content_type)])


def encode_multipart_files(
    fields: Sequence[Tuple[str, str]],
    file_field: str,
    files: Sequence[Tuple[str, bytes, Optional[str]]],
) -> Tuple[bytes, str]:
    """Encode text fields and one file part per (filename, content, content type or None), all under
    ``file_field`` (a batch job's ``file`` parts). Returns (body, Content-Type header value)."""
    boundary = _boundary([content for _, content, _ in files], fields)
    dash = b"--" + boundary.encode("ascii")
    chunks: List[bytes] = []
    for name, value in fields:
        chunks += [
            dash,
            b"\r\n",
            f'Content-Disposition: form-data; name="{_quote(name)}"\r\n'.encode("utf-8"),
            b"Content-Type: text/plain; charset=utf-8\r\n\r\n",
            value.encode("utf-8"),
            b"\r\n",
        ]
    for filename, content, content_type in files:
        chunks += [
            dash,
            b"\r\n",
            f'Content-Disposition: form-data; name="{_quote(file_field)}"; filename="{_quote(filename)}"\r\n'.encode(
                "utf-8"
            ),
            f"Content-Type: {content_type or sniff_content_type(content[:16])}\r\n\r\n".encode("ascii"),
            content,
            b"\r\n",
        ]
    chunks += [dash, b"--\r\n"]
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


def _boundary(contents: Sequence[bytes], fields: Sequence[Tuple[str, str]]) -> str:
    # 32 random hex digits collide with content with odds of 2^-128 per position, but the check is cheap
    # next to the upload, and makes a collision impossible rather than unlikely.
    while True:
        boundary = "compresso-" + os.urandom(16).hex()
        marker = boundary.encode("ascii")
        if not any(marker in c for c in contents) and not any(boundary in n or boundary in v for n, v in fields):
            return boundary
