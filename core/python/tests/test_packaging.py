"""What `pip install ./core/python` ships: metadata that agrees with the code, the typing marker, and
sources that parse on the oldest Python the metadata promises and import only the standard library."""

from __future__ import annotations

import ast
import importlib
import re
import sysconfig
import unittest
from pathlib import Path

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

    def test_sources_import_only_the_standard_library(self) -> None:
        # `dependencies = []` promises nothing is installed with the client; this checks the code keeps
        # the promise: a third-party import would pass here whenever the machine happens to have it.
        stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
        seen = set()
        for path in SOURCES:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue  # relative: the package's own modules
                for name in names:
                    # email.mime builds mail, not HTTP forms; _multipart.py is the encoder.
                    self.assertFalse(name.startswith("email.mime"), f"{path.name} imports {name}")
                    top = name.split(".")[0]
                    seen.add(top)
                    origin = getattr(importlib.import_module(top), "__file__", None)
                    if origin is None:
                        continue  # compiled into the interpreter (sys, time, …)
                    where = Path(origin).resolve()
                    self.assertTrue(
                        stdlib in where.parents and "site-packages" not in where.parts,
                        f"{path.name} imports {name}, found at {where}, outside the standard library {stdlib}",
                    )
        self.assertLessEqual({"urllib", "http", "json", "concurrent"}, seen)

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
