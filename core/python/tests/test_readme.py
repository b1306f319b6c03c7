"""The README's Python examples, run as written against the real server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from _support import PACKAGE, corpus, shared_key, shared_server


def readme_blocks() -> list:
    text = (PACKAGE / "README.md").read_text(encoding="utf-8")
    return re.findall(r"<!-- readme-test[^>]*-->\s*```python\n(.*?)```", text, re.S)


class ReadmeTests(unittest.TestCase):
    def test_examples_run(self) -> None:
        blocks = readme_blocks()
        self.assertEqual(len(blocks), 4, "the README's tested examples were not found")
        server = shared_server()
        env = {
            **os.environ,
            "COMPRESSO_API_KEY": shared_key(),
            "COMPRESSO_BASE_URL": server.url,
            "PYTHONPATH": str(PACKAGE / "src"),
        }
        outputs = []
        for block in blocks:
            folder = Path(tempfile.mkdtemp(prefix="compresso-py-readme-"))
            self.addCleanup(shutil.rmtree, folder, True)
            shutil.copyfile(corpus("photo-skimage-rocket.jpg"), folder / "photo.jpg")
            (folder / "notes.txt").write_text("not an image\n")
            done = subprocess.run(
                [sys.executable, "-c", block], cwd=folder, env=env, capture_output=True, text=True, timeout=120
            )
            self.assertEqual(done.returncode, 0, done.stderr)
            outputs.append((folder, done.stdout))

        folder, stdout = outputs[0]
        self.assertIn("photo.min.webp:", stdout)
        self.assertTrue((folder / "photo.min.webp").is_file())
        self.assertTrue((folder / "web" / "photo.webp").is_file())
        self.assertIn("notes.txt failed: NOT_AN_IMAGE", stdout)
        self.assertRegex(stdout, r"\d+ requests left today")
        self.assertFalse((folder / "photo.min.avif").exists(), "info saves nothing")

        folder, stdout = outputs[1]
        self.assertEqual(stdout.strip().splitlines()[-3], "2/2")
        self.assertIn(f"photo.jpg -> {folder.resolve() / 'from-job' / 'photo.webp'}", stdout)
        self.assertIn("notes.txt failed: NOT_AN_IMAGE", stdout)
        self.assertTrue((folder / "from-job" / "photo.webp").is_file())

        folder, stdout = outputs[2]
        self.assertTrue((folder / "photo-bw.jpg").is_file())
        self.assertIn("300 ['resize', 'grayscale']", stdout)
        self.assertIn("alt text (offline): Rocket launch — ", stdout)
        self.assertIn("this server has no AI provider", stdout)

        folder, stdout = outputs[3]
        self.assertTrue((folder / "photo.min.webp").is_file())
        self.assertTrue((folder / "web" / "photo.avif").is_file())
        self.assertTrue(stdout.strip().endswith(" 1"), stdout)


if __name__ == "__main__":
    unittest.main()
