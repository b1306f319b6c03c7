"""Run the whole unittest suite once and write one JSON outcome per test (for the vitest wrapper,
core/python/src/python.test.ts, which turns each into its own vitest test).

    python3 core/python/tests/run_json.py OUT.json [TESTS_DIR]

TESTS_DIR (default: this folder) is for the wrapper's own test of the timeouts.

The exit status is 0 when every test passed. Human-readable progress goes to stderr.

Timeouts, so a hung test fails in minutes rather than at CI's limit: each test may run for
COMPRESSO_PYTHON_TEST_TIMEOUT seconds (default 120; the slowest test takes a few seconds here), after
which every thread's stack goes to stderr and the test fails with TimeoutError; the whole run may take
COMPRESSO_PYTHON_SUITE_TIMEOUT seconds (default 900), after which faulthandler dumps the stacks and ends
the process (a hang outside any test: a class set-up, or a test that swallowed its TimeoutError).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
import traceback
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEST_TIMEOUT = float(os.environ.get("COMPRESSO_PYTHON_TEST_TIMEOUT", "120"))
SUITE_TIMEOUT = float(os.environ.get("COMPRESSO_PYTHON_SUITE_TIMEOUT", "900"))
# setitimer is POSIX only; elsewhere only the suite-wide faulthandler limit applies.
HAS_TIMER = hasattr(signal, "setitimer")


def _timed_out(signum, frame):  # type: ignore[no-untyped-def]
    # SIGALRM is delivered to the main thread, which runs the test: raising here interrupts a blocking
    # socket read, a join or a lock wait there (PEP 475 retries a syscall only when the handler returns).
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    raise TimeoutError(f"test still running after {TEST_TIMEOUT:g} s (COMPRESSO_PYTHON_TEST_TIMEOUT)")


class JsonResult(unittest.TextTestResult):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.outcomes: list = []
        self._started: dict = {}

    def startTest(self, test: unittest.TestCase) -> None:
        self._started[test.id()] = time.monotonic()
        super().startTest(test)
        if HAS_TIMER:
            signal.signal(signal.SIGALRM, _timed_out)
            signal.setitimer(signal.ITIMER_REAL, TEST_TIMEOUT)

    def stopTest(self, test: unittest.TestCase) -> None:
        if HAS_TIMER:
            signal.setitimer(signal.ITIMER_REAL, 0)
        super().stopTest(test)

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
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    start = Path(sys.argv[2]).resolve() if len(sys.argv) == 3 else HERE
    sys.path.insert(0, str(HERE))
    faulthandler.dump_traceback_later(SUITE_TIMEOUT, exit=True, file=sys.stderr)
    suite = unittest.defaultTestLoader.discover(str(start), pattern="test_*.py", top_level_dir=str(start))
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=1, resultclass=JsonResult)
    result = runner.run(suite)
    faulthandler.cancel_dump_traceback_later()
    Path(sys.argv[1]).write_text(
        json.dumps({"python": sys.version, "outcomes": result.outcomes}, indent=1), encoding="utf-8"
    )
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
