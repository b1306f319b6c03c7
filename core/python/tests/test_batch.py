"""compress_batch against the real server: 50 files with 3 corrupt give 47 results and 3 clear errors."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import unittest
from pathlib import Path

from _support import corpus, shared_key, shared_server

from compresso import BatchResult, Compresso, CompressoError, UnsupportedImageError

SOURCES = ["photo-skimage-rocket.jpg", "icon-oxygen-folder-red.png", "graphic-skimage-text.png"]


class BatchTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = shared_server()
        self.client = Compresso(shared_key(), self.server.url)
        self.tmp = Path(tempfile.mkdtemp(prefix="compresso-py-batch-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def make_inputs(self, good: int) -> list:
        folder = self.tmp / "in"
        folder.mkdir()
        paths = []
        for i in range(good):
            name = SOURCES[i % len(SOURCES)]
            target = folder / f"img-{i:02d}{Path(name).suffix}"
            shutil.copyfile(corpus(name), target)
            paths.append(target)
        return paths

    def test_fifty_files_three_corrupt(self) -> None:
        paths = self.make_inputs(47)
        photo = corpus("photo-mate-LadyBird.jpg").read_bytes()
        corrupt = {
            "cut.jpg": (photo[: len(photo) // 4], "CORRUPT_IMAGE"),
            "notes.jpg": (b"these are notes, not a photo\n" * 10, "NOT_AN_IMAGE"),
            "empty.png": (b"", "EMPTY_FILE"),
        }
        for offset, (name, (data, _)) in zip((5, 20, 40), corrupt.items()):
            bad = self.tmp / "in" / name
            bad.write_bytes(data)
            paths.insert(offset, bad)
        self.assertEqual(len(paths), 50)

        progress = []
        threads = set()

        def on_progress(done: int, total: int, item) -> None:  # type: ignore[no-untyped-def]
            progress.append((done, total, item.index))
            threads.add(threading.get_ident())

        out = self.tmp / "out"
        batch = self.client.compress_batch(
            paths, out, quality=70, format="webp", max_dimension=96, concurrency=4, on_progress=on_progress
        )
        self.assertIsInstance(batch, BatchResult)
        self.assertEqual(len(batch), 50)
        self.assertEqual(len(batch.results), 47)
        self.assertEqual(len(batch.errors), 3)
        self.assertFalse(batch.ok)
        self.assertEqual([item.index for item in batch], list(range(50)))
        self.assertEqual([item.input for item in batch], [str(p) for p in paths])
        for item in batch.errors:
            name = os.path.basename(item.input)
            self.assertIsInstance(item.error, UnsupportedImageError, name)
            self.assertEqual(item.error.code, corrupt[name][1])
            self.assertIn(item.error.status, (415, 422))
            self.assertTrue(item.error.request_id)
        for result in batch.results:
            self.assertEqual(result.output_format, "webp")
            self.assertEqual(os.path.dirname(result.output_path), str(out))
            self.assertEqual(os.path.getsize(result.output_path), result.output_size)
            self.assertLessEqual(max(result.dimensions), 96)
        self.assertEqual(len(os.listdir(out)), 47)
        self.assertEqual([p[0] for p in progress], list(range(1, 51)))
        self.assertTrue(all(p[1] == 50 for p in progress))
        self.assertEqual(sorted(p[2] for p in progress), list(range(50)))
        self.assertEqual(threads, {threading.get_ident()}, "progress is reported in the caller's thread")
        self.assertEqual(batch.input_size, sum(r.input_size for r in batch.results))
        self.assertGreater(batch.savings_percent, 0)

    def test_beside_inputs_conflicts_and_missing_files(self) -> None:
        a = self.tmp / "a"
        b = self.tmp / "b"
        a.mkdir()
        b.mkdir()
        shutil.copyfile(corpus(SOURCES[1]), a / "logo.png")
        shutil.copyfile(corpus(SOURCES[1]), b / "logo.png")
        beside = self.client.compress_batch([a / "logo.png", str(self.tmp / "missing.png")], max_dimension=32)
        self.assertEqual(beside[0].result.output_path, str(a / "logo.min.png"))
        self.assertIsInstance(beside[1].error, FileNotFoundError)

        # Into one folder, a name used twice gets -2 in input order (as the Node client and MCP do).
        out = self.tmp / "out"
        # An input already named logo-2 keeps its name; the second logo takes the next free one.
        shutil.copyfile(corpus(SOURCES[1]), b / "logo-2.png")
        named = self.client.compress_batch(
            [a / "logo.png", b / "logo.png", b / "logo-2.png"], out, format="jpeg", max_dimension=32
        )
        self.assertTrue(named.ok)
        self.assertEqual(
            [r.output_path for r in named.results],
            [str(out / "logo.jpg"), str(out / "logo-3.jpg"), str(out / "logo-2.jpg")],
        )
        self.assertEqual(sorted(os.listdir(out)), ["logo-2.jpg", "logo-3.jpg", "logo.jpg"])

        # Beside their inputs, two items that would still write one file: the second is refused.
        shutil.copyfile(corpus(SOURCES[1]), a / "twin.png")
        shutil.copyfile(corpus(SOURCES[0]), a / "twin.jpg")
        clash = self.client.compress_batch([a / "twin.png", a / "twin.jpg"], format="webp", max_dimension=32)
        self.assertEqual(len(clash.results), 1)
        self.assertEqual(len(clash.errors), 1)
        self.assertIsInstance(clash.errors[0].error, CompressoError)
        self.assertEqual(clash.errors[0].error.code, "CONFLICT")
        self.assertTrue((a / "twin.min.webp").exists())

        with self.assertRaises(ValueError):
            self.client.compress_batch([a / "logo.png"], concurrency=0)
        self.assertEqual(len(self.client.compress_batch([])), 0)


if __name__ == "__main__":
    unittest.main()
