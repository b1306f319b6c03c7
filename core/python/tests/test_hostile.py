"""A hostile (or compromised) server cannot steer a write outside the folder the caller chose: a
loopback fake answering hostile Content-Disposition names and an X-Output-Format that carries a path."""

from __future__ import annotations

import os
import shutil
import tempfile
import unittest
from typing import List

from _support import FakeServer, answer, compress_headers

from compresso import APIError, AsyncCompresso, Compresso

IMAGE = b"\xff\xd8\xff\xe0" + b"\0" * 100
OUT = b"RIFF\0\0\0\0WEBPVP8 " + b"\1" * 20

# As the Node client's test: separators, .., absolute, a drive, control characters, RFC 8187.
HOSTILE_DISPOSITIONS = [
    'attachment; filename="../escaped.webp"',
    'attachment; filename="../../escaped.webp"',
    'attachment; filename="/etc/x.webp"',
    'attachment; filename="..\\\\x.webp"',
    'attachment; filename="a/b.webp"',
    'attachment; filename=".."',
    'attachment; filename="C:x.webp"',
    'attachment; filename="a\tb.webp"',
    "attachment; filename*=UTF-8''..%2F..%2Fx.webp",
    "attachment; filename*=UTF-8''%2Fetc%2Fx.webp",
    "attachment; filename*=UTF-8''..%5Cx.webp",
    "attachment; filename*=UTF-8''x%0A.webp",
    "attachment; filename*=UTF-8''x%00.webp",
]
HOSTILE_FORMATS = ["../../escaped", "/../../../escaped", "webp/../../../escaped", "..", "WEBP\\..\\x"]


def files_under(root: str) -> List[str]:
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            found.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return sorted(found)


class HostileServerTests(unittest.TestCase):
    def setUp(self) -> None:
        self.work = tempfile.mkdtemp(prefix="compresso-py-hostile-")
        # The chosen folder sits three levels down, so ../../.. stays inside the test's own folder.
        self.root = os.path.join(self.work, "root")
        self.out = os.path.join(self.root, "a", "b", "out")
        os.makedirs(self.out)
        self.photo = os.path.join(self.root, "a", "b", "photo.jpg")
        with open(self.photo, "wb") as f:
            f.write(IMAGE)

    def tearDown(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    def test_hostile_content_disposition_names_nothing(self) -> None:
        def script(handler, n):  # type: ignore[no-untyped-def]
            headers = compress_headers(len(OUT))
            headers["Content-Disposition"] = HOSTILE_DISPOSITIONS[n % len(HOSTILE_DISPOSITIONS)]
            answer(handler, 200, OUT, headers)

        with FakeServer(script) as fake:
            client = Compresso("cmp_live_fake", fake.url, max_retries=0)
            for disposition in HOSTILE_DISPOSITIONS:
                result = client.compress(IMAGE, self.out + os.sep, overwrite=True)
                self.assertEqual(result.output_path, os.path.join(os.path.abspath(self.out), "image.webp"), disposition)
            batch = client.compress_batch([self.photo, self.photo], os.path.join(self.out, "batch"))
            self.assertTrue(batch.ok)
            self.assertEqual(len(fake.requests), len(HOSTILE_DISPOSITIONS) + 2)
        self.assertEqual(
            files_under(self.root),
            ["a/b/out/batch/photo-2.webp", "a/b/out/batch/photo.webp", "a/b/out/image.webp", "a/b/photo.jpg"],
        )

    def test_output_format_carrying_a_path_is_refused_and_nothing_written(self) -> None:
        def script(handler, n):  # type: ignore[no-untyped-def]
            fmt = HOSTILE_FORMATS[(n // 4) % len(HOSTILE_FORMATS)]
            headers = compress_headers(len(OUT))
            headers["X-Output-Format"] = fmt
            answer(handler, 200, OUT, headers)

        with FakeServer(script) as fake:
            client = Compresso("cmp_live_fake", fake.url, max_retries=0)
            for fmt in HOSTILE_FORMATS:
                # Into a folder, beside the input (the default), bytes into a folder, and a batch item.
                for call in (
                    lambda: client.compress(self.photo, self.out),
                    lambda: client.compress(self.photo),
                    lambda: client.compress(IMAGE, self.out + os.sep),
                ):
                    with self.assertRaises(APIError) as caught:
                        call()
                    self.assertIn("X-Output-Format", str(caught.exception), fmt)
                batch = client.compress_batch([self.photo], self.out)
                self.assertEqual(len(batch.errors), 1, fmt)
                self.assertIsInstance(batch.items[0].error, APIError)
            self.assertEqual(len(fake.requests), 4 * len(HOSTILE_FORMATS))

            async def run_async() -> None:
                async with AsyncCompresso("cmp_live_fake", fake.url, max_retries=0) as aclient:
                    with self.assertRaises(APIError):
                        await aclient.compress(self.photo, self.out)

            import asyncio

            asyncio.run(run_async())
        self.assertEqual(files_under(self.root), ["a/b/photo.jpg"])
        self.assertEqual([f for f in files_under(self.work) if "escaped" in f], [])


if __name__ == "__main__":
    unittest.main()
