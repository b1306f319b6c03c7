"""AsyncCompresso against the real server: the same operations as coroutines."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import tempfile
import unittest
from pathlib import Path

from _support import corpus, shared_key, shared_server

from compresso import (
    AsyncCompresso,
    AuthenticationError,
    BadRequestError,
    InfoResult,
    NotFoundError,
    UnsupportedImageError,
)

PHOTO = "photo-skimage-rocket.jpg"


class AsyncTests(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        # Started here, not in asyncSetUp: starting Node must not block the event loop under test.
        cls.server = shared_server()
        cls.key = shared_key()

    async def asyncSetUp(self) -> None:
        self.client = AsyncCompresso(self.key, self.server.url)
        self.tmp = Path(tempfile.mkdtemp(prefix="compresso-py-async-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)

    async def asyncTearDown(self) -> None:
        await self.client.close()

    async def test_compress_every_input_kind(self) -> None:
        src = self.tmp / "rocket.jpg"
        shutil.copyfile(corpus(PHOTO), src)
        from_path, from_bytes, from_stream = await asyncio.gather(
            self.client.compress(src, format="webp", max_dimension=128),
            self.client.compress(src.read_bytes(), format="webp", max_dimension=128),
            self.client.compress(io.BytesIO(src.read_bytes()), self.tmp / "s.webp", format="webp", max_dimension=128),
        )
        self.assertEqual(from_path.output_path, str(self.tmp / "rocket.min.webp"))
        self.assertEqual(Path(from_path.output_path).read_bytes(), from_bytes.data)
        self.assertEqual(Path(from_stream.output_path).read_bytes(), from_bytes.data)
        self.assertEqual(from_path.savings_percent, from_bytes.savings_percent)

    async def test_info_usage_keys(self) -> None:
        info = await self.client.info(corpus(PHOTO), quality=60, format="avif", max_dimension=64)
        self.assertIsInstance(info, InfoResult)
        self.assertEqual((info.output_format, info.quality), ("avif", 60))
        usage = await self.client.usage()
        self.assertEqual(usage.plan, "pro")
        created = await self.client.keys.create("async")
        self.assertIn(created.id, [k.id for k in await self.client.keys.list()])
        self.assertTrue((await self.client.keys.revoke(created.id)).revoked)
        with self.assertRaises(NotFoundError):
            await self.client.keys.revoke(created.id + "x")

    async def test_errors_are_typed(self) -> None:
        async with AsyncCompresso("cmp_live_" + "y" * 43, self.server.url) as bad:
            with self.assertRaises(AuthenticationError):
                await bad.usage()
        with self.assertRaises(BadRequestError) as caught:
            await self.client.info(corpus(PHOTO), format="tiff")
        self.assertEqual(caught.exception.fields, ["output_format"])

    async def test_batch_with_async_progress(self) -> None:
        paths = []
        for i in range(9):
            target = self.tmp / f"p{i}.jpg"
            shutil.copyfile(corpus(PHOTO), target)
            paths.append(target)
        broken = self.tmp / "broken.jpg"
        broken.write_bytes(corpus(PHOTO).read_bytes()[:3000])
        paths.insert(3, broken)
        seen = []

        async def on_progress(done: int, total: int, item) -> None:  # type: ignore[no-untyped-def]
            await asyncio.sleep(0)
            seen.append(done)

        batch = await self.client.compress_batch(
            paths, self.tmp / "out", quality=50, max_dimension=64, concurrency=3, on_progress=on_progress
        )
        self.assertEqual((len(batch.results), len(batch.errors)), (9, 1))
        self.assertEqual(batch.errors[0].index, 3)
        self.assertIsInstance(batch.errors[0].error, UnsupportedImageError)
        self.assertEqual(batch.errors[0].error.code, "CORRUPT_IMAGE")
        self.assertEqual(seen, list(range(1, 11)))
        self.assertEqual(sorted(os.listdir(self.tmp / "out")), sorted(f"p{i}.jpg" for i in range(9)))


if __name__ == "__main__":
    unittest.main()
