"""Run the whole unittest suite once and write one JSON outcome per test (for the vitest wrapper,
core/python/src/python.test.ts, which turns each into its own vitest test).

    python3 core/python/tests/run_json.py OUT.json

The exit status is 0 when every test passed. Human-readable progress goes to stderr.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent


class JsonResult(unittest.TextTestResult):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.outcomes: list = []
        self._started: dict = {}

    def startTest(self, test: unittest.TestCase) -> None:
        self._started[test.id()] = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome: str, detail: str = "") -> None:  # type: ignore[no-untyped-def]
        test_id = test.id() if hasattr(test, "id") else str(test)
        started = self._started.get(test_id)
        self.outcomes.append(
            {
                "id": test_id,
                "outcome": outcome,
                "detail": detail,
                "seconds": round(time.monotonic() - started, 3) if started else 0,
            }
        )

    def addSuccess(self, test):  # type: ignore[no-untyped-def]
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):  # type: ignore[no-untyped-def]
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):  # type: ignore[no-untyped-def]
        super().addError(test, err)
        # setUpClass/module failures arrive as an _ErrorHolder, not a TestCase: record them too.
        detail = self._exc_info_to_string(err, test) if isinstance(test, unittest.TestCase) else "".join(
            traceback.format_exception(*err)
        )
        self._record(test, "failed", detail)

    def addSubTest(self, test, subtest, err):  # type: ignore[no-untyped-def]
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._record(subtest, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):  # type: ignore[no-untyped-def]
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):  # type: ignore[no-untyped-def]
        super().addExpectedFailure(test, err)
        self._record(test, "failed", "expected failures are not allowed in this suite")

    def addUnexpectedSuccess(self, test):  # type: ignore[no-untyped-def]
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))
    suite = unittest.defaultTestLoader.discover(str(HERE), pattern="test_*.py", top_level_dir=str(HERE))
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=1, resultclass=JsonResult)
    result = runner.run(suite)
    Path(sys.argv[1]).write_text(
        json.dumps({"python": sys.version, "outcomes": result.outcomes}, indent=1), encoding="utf-8"
    )
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
