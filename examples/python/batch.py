#!/usr/bin/env python3
"""Compress many images with the Python client (standard library only; Python 3.8 or newer).

    COMPRESSO_API_KEY=cmp_live_… python3 batch.py optimized/ photos/*.jpg

Writes <name>.webp for each image into the output folder, two at a time, with progress on stderr.
One bad file does not stop the others: it is reported with its error code, and the exit code is 1.
"""

import sys

from compresso import Compresso


def main(argv: list) -> int:
    if len(argv) < 2:
        print("usage: python3 batch.py <output dir> <image>...", file=sys.stderr)
        return 2
    output_dir, inputs = argv[0], argv[1:]
    with Compresso() as client:
        batch = client.compress_batch(
            inputs,
            output_dir,
            format="webp",
            concurrency=2,
            on_progress=lambda done, total, _item: print(f"{done}/{total}", file=sys.stderr),
        )
    for item in batch:
        if item.result is not None:
            print(f"{item.input} -> {item.result.output_path} (-{item.result.savings_percent}%)")
        else:
            # An API error carries the server's code; a local one (a missing file) is Python's own.
            code = getattr(item.error, "code", None) or type(item.error).__name__
            message = getattr(item.error, "message", None) or str(item.error)
            print(f"{item.input} FAILED {code}: {message}")
    return 0 if batch.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
