"""What `pip install ./core/python` ships: metadata that agrees with the code, the typing marker, and
sources that parse on the oldest Python the metadata promises."""

from __future__ import annotations

import ast
import re
import unittest

from _support import PACKAGE

import compresso

SOURCES = sorted((PACKAGE / "src" / "compresso").glob("*.py"))


class PackagingTests(unittest.TestCase):
    def setUp(self) -> None:
        self.pyproject = (PACKAGE / "pyproject.toml").read_text(encoding="utf-8")

    def test_version_and_python_requirement(self) -> None:
        version = re.search(r'^version = "([^"]+)"', self.pyproject, re.M)
        self.assertIsNotNone(version)
        self.assertEqual(version.group(1), compresso.__version__)
        self.assertIn('requires-python = ">=3.8"', self.pyproject)
        self.assertIn("dependencies = []", self.pyproject, "standard library only")

    def test_sources_parse_as_python_3_8(self) -> None:
        self.assertGreaterEqual(len(SOURCES), 6)
        for path in SOURCES:
            with self.subTest(file=path.name):
                ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 8))

    def test_typed_marker_is_shipped(self) -> None:
        self.assertTrue((PACKAGE / "src" / "compresso" / "py.typed").is_file())
        self.assertRegex(self.pyproject, r'compresso = \["py\.typed"\]')

    def test_public_names(self) -> None:
        for name in compresso.__all__:
            with self.subTest(name=name):
                self.assertTrue(hasattr(compresso, name), name)
        self.assertTrue(issubclass(compresso.APITimeoutError, compresso.APIConnectionError))
        for cls in (compresso.AuthenticationError, compresso.RateLimitError, compresso.ServerError):
            self.assertTrue(issubclass(cls, compresso.APIError))
            self.assertTrue(issubclass(cls, compresso.CompressoError))
        self.assertFalse(issubclass(compresso.PermissionDeniedError, PermissionError))


if __name__ == "__main__":
    unittest.main()
