#!/usr/bin/env python3
"""Compress one image with the Python client (standard library only; Python 3.8 or newer).

    COMPRESSO_API_KEY=cmp_live_… python3 compress.py photo.jpg photo.webp webp 75

Arguments: input, output, then optional output format (default webp) and quality (1-100 or auto,
default 80). COMPRESSO_BASE_URL defaults to a local `npm start` server. The client comes from
`pip install ./core/python`, or from core/python/src on PYTHONPATH.
"""

import sys

from compresso import Compresso, CompressoError


def main(argv: list) -> int:
    if len(argv) < 2:
        print("usage: python3 compress.py <input> <output> [format] [quality]", file=sys.stderr)
        return 2
    source, output = argv[0], argv[1]
    fmt = argv[2] if len(argv) > 2 else "webp"
    quality = argv[3] if len(argv) > 3 else "80"
    try:
        # Inside the try: without COMPRESSO_API_KEY the constructor raises MISSING_API_KEY, saying how to get one.
        with Compresso() as client:
            result = client.compress(
                source, output, format=fmt, quality="auto" if quality == "auto" else int(quality)
            )
    except CompressoError as error:
        # The server's stable code (INVALID_API_KEY, NOT_AN_IMAGE, QUOTA_EXCEEDED, …) and its message.
        print(f"{error.code}: {error.message}", file=sys.stderr)
        return 1
    print(
        f"{source} -> {result.output_path} ({result.input_size} -> {result.output_size} bytes, "
        f"-{result.savings_percent}%, {result.width}x{result.height})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
