"""The daily quota on a real server with a small limit: 429 QUOTA_EXCEEDED arrives typed, with its
reset time, and is never retried; a key can still be revoked over quota."""

from __future__ import annotations

import unittest
from datetime import datetime, timedelta, timezone
from unittest import mock

from _support import RealServer, corpus, recorded_sleeps

from compresso import Compresso, RateLimitError

FROZEN = datetime(2026, 11, 22, 23, 59, 0, tzinfo=timezone.utc)


class FrozenDatetime(datetime):
    """The client's clock, fixed: what it computes from the server's headers is then exact."""

    @classmethod
    def now(cls, tz=None):  # type: ignore[no-untyped-def, override]
        return FROZEN

LIMIT = 3


class QuotaTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = RealServer({"COMPRESSO_PRO_DAILY_LIMIT": str(LIMIT)})
        cls.key = cls.server.account("quota@example.com")
        cls.server.start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()

    def test_quota_exceeded_is_typed_and_never_retried(self) -> None:
        client = Compresso(self.key, self.server.url, max_retries=3)
        spare = client.keys.create("spare")  # request 1
        image = corpus("icon-oxygen-konqueror.png").read_bytes()
        client.info(image, max_dimension=32)  # request 2
        usage = client.usage()  # request 3
        self.assertEqual((usage.used, usage.remaining), (LIMIT, 0))

        with recorded_sleeps() as waits, mock.patch("compresso.errors.datetime", FrozenDatetime), self.assertRaises(
            RateLimitError
        ) as caught:
            client.compress(image, max_dimension=32)
        e = caught.exception
        self.assertEqual((e.status, e.code), (429, "QUOTA_EXCEEDED"))
        self.assertTrue(e.is_quota_exceeded)
        self.assertFalse(e.should_retry)
        self.assertIn("00:00 UTC", e.message)
        self.assertEqual(e.details["limit"], LIMIT)
        self.assertGreater(e.retry_after, 0)
        self.assertLessEqual(e.retry_after, 86400)
        # The client's clock (frozen above) plus the server's RateLimit-Reset, exactly — was: within 5 s
        # of this machine's clock at the assertion.
        self.assertEqual(e.reset_at, FROZEN + timedelta(seconds=float(e.headers["ratelimit-reset"])))
        self.assertEqual(e.reset_at.utcoffset().total_seconds(), 0)
        # Not retried: no wait at all (retrying would have waited before each of 3 more attempts).
        self.assertEqual(waits, [])

        # A leaked key that burnt the quota can still be revoked.
        self.assertTrue(client.keys.revoke(spare.id).revoked)
        with self.assertRaises(RateLimitError):
            client.usage()


if __name__ == "__main__":
    unittest.main()
