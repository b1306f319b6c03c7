"""Faults the real server will not produce on demand, from a loopback fake that follows its contract:
connection resets, 503 with Retry-After, stalls, 5xx, 429s of both kinds, cut answers."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import unittest
from unittest import mock

from _support import FakeServer, answer, compress_headers, json_error, recorded_sleeps, reset_connection

from compresso import (
    APIConnectionError,
    APITimeoutError,
    AsyncCompresso,
    BadRequestError,
    Compresso,
    CompressoError,
    RateLimitError,
    ServerError,
)

IMAGE = b"\xff\xd8\xff\xe0" + b"\0" * 100
OUT = b"RIFF\0\0\0\0WEBPVP8 " + b"\1" * 20


def usage_body() -> bytes:
    return json.dumps(
        {
            "plan": "pro",
            "day": "2026-11-22",
            "used": 1,
            "limit": 500,
            "remaining": 499,
            "resets_at": "2026-11-23T00:00:00.000Z",
            "resets_in_seconds": 3600,
        }
    ).encode()


class RetryTests(unittest.TestCase):
    def client(self, url: str, **kw: object) -> Compresso:
        return Compresso("cmp_live_fake", url, **kw)  # type: ignore[arg-type]

    def test_connection_reset_is_retried_then_succeeds(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            if n == 0:
                reset_connection(h)
            else:
                answer(h, 200, OUT, compress_headers(len(OUT)))

        with FakeServer(script) as fake:
            result = self.client(fake.url).compress(IMAGE, format="webp")
        self.assertEqual(len(fake.requests), 2)
        self.assertEqual(result.data, OUT)
        self.assertEqual(result.output_format, "webp")
        # The retried request is the same request.
        self.assertEqual(fake.requests[0]["body"], fake.requests[1]["body"])

    def test_503_with_retry_after_is_honoured_then_succeeds(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            if n == 0:
                answer(h, *json_error("SERVICE_UNAVAILABLE", 503, headers={"Retry-After": "1"}))
            else:
                answer(h, 200, usage_body(), {"Content-Type": "application/json"})

        with FakeServer(script) as fake, recorded_sleeps() as waits:
            usage = self.client(fake.url).usage()
        self.assertEqual(usage.remaining, 499)
        self.assertEqual(len(fake.requests), 2)
        self.assertEqual(waits, [1.0], "Retry-After: 1 must be waited, once")

    def test_retry_after_is_capped(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            if n == 0:
                answer(h, *json_error("SERVICE_UNAVAILABLE", 503, headers={"Retry-After": "3600"}))
            else:
                answer(h, 200, usage_body(), {"Content-Type": "application/json"})

        with FakeServer(script) as fake, recorded_sleeps() as waits:
            self.client(fake.url, max_retry_after=0.2).usage()
        self.assertEqual(len(fake.requests), 2)
        self.assertEqual(waits, [0.2], "Retry-After: 3600 is capped at max_retry_after")

    def test_5xx_retried_max_retries_times_then_server_error(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            answer(h, *json_error("INTERNAL_ERROR", 500, "boom"))

        with FakeServer(script) as fake:
            with self.assertRaises(ServerError) as caught:
                self.client(fake.url, max_retries=2).usage()
        self.assertEqual(len(fake.requests), 3)
        e = caught.exception
        self.assertEqual((e.status, e.code, e.request_id), (500, "INTERNAL_ERROR", "req-fake"))

    def test_non_idempotent_key_creation_not_resent_after_500_or_reset(self) -> None:
        for fault in ("500", "reset"):

            def script(h, n, fault=fault):  # type: ignore[no-untyped-def]
                if fault == "500":
                    answer(h, *json_error("INTERNAL_ERROR", 500))
                else:
                    reset_connection(h)

            with FakeServer(script) as fake:
                with self.assertRaises((ServerError, APIConnectionError)):
                    self.client(fake.url).keys.create("ci")
            self.assertEqual(len(fake.requests), 1, fault)

    def test_key_creation_is_resent_after_503(self) -> None:
        created = json.dumps(
            {"id": "key_1", "name": "ci", "prefix": "cmp_live_abcdefgh", "created_at": "2026-11-22T00:00:00Z",
             "last_used_at": None, "revoked_at": None, "key": "cmp_live_secret"}
        ).encode()

        def script(h, n):  # type: ignore[no-untyped-def]
            if n == 0:
                answer(h, *json_error("SERVICE_UNAVAILABLE", 503, headers={"Retry-After": "0"}))
            else:
                answer(h, 201, created, {"Content-Type": "application/json"})

        with FakeServer(script) as fake:
            key = self.client(fake.url).keys.create("ci")
        self.assertEqual((key.id, key.key), ("key_1", "cmp_live_secret"))
        self.assertEqual(json.loads(fake.requests[1]["body"]), {"name": "ci"})

    def test_quota_exceeded_is_never_retried(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            answer(h, *json_error("QUOTA_EXCEEDED", 429, headers={"Retry-After": "1", "RateLimit-Reset": "1"}))

        with FakeServer(script) as fake:
            with self.assertRaises(RateLimitError) as caught:
                self.client(fake.url, max_retries=5).compress(IMAGE)
        self.assertEqual(len(fake.requests), 1)
        self.assertTrue(caught.exception.is_quota_exceeded)
        self.assertEqual(caught.exception.retry_after, 1)

    def test_rate_limited_with_retry_after_is_retried_and_without_is_not(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            if n == 0:
                answer(h, *json_error("RATE_LIMITED", 429, headers={"Retry-After": "0"}))
            else:
                answer(h, 200, usage_body(), {"Content-Type": "application/json"})

        with FakeServer(script) as fake:
            self.client(fake.url).usage()
        self.assertEqual(len(fake.requests), 2)

        def refuse(h, n):  # type: ignore[no-untyped-def]
            answer(h, *json_error("RATE_LIMITED", 429, headers={"Retry-After": "0", "X-Should-Retry": "false"}))

        with FakeServer(refuse) as fake:
            with self.assertRaises(RateLimitError) as caught:
                self.client(fake.url).usage()
        self.assertEqual(len(fake.requests), 1)
        self.assertFalse(caught.exception.is_quota_exceeded)
        self.assertFalse(caught.exception.should_retry)

    def test_408_is_retried(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            if n == 0:
                # Node's own 408: no JSON body of ours.
                answer(h, 408, b"", {"Connection": "close"})
            else:
                answer(h, 200, usage_body(), {"Content-Type": "application/json"})

        with FakeServer(script) as fake:
            self.client(fake.url).usage()
        self.assertEqual(len(fake.requests), 2)

    def test_408_after_retries_is_a_timeout_error(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            answer(h, *json_error("REQUEST_TIMEOUT", 408, headers={"Connection": "close"}))

        with FakeServer(script) as fake:
            with self.assertRaises(APITimeoutError) as caught:
                self.client(fake.url, max_retries=1).compress(IMAGE)
        self.assertEqual((caught.exception.status, caught.exception.code), (408, "REQUEST_TIMEOUT"))
        self.assertEqual(len(fake.requests), 2)

    def test_400_is_not_retried(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            answer(h, *json_error("INVALID_OPTION", 400))

        with FakeServer(script) as fake:
            with self.assertRaises(BadRequestError):
                self.client(fake.url).compress(IMAGE)
        self.assertEqual(len(fake.requests), 1)

    def test_timeout(self) -> None:
        # The server answers only once the test has seen the client give up: the timeout is shown by
        # order (the error came while the answer was held back), not by a stopwatch. A client that did
        # not time out would get the answer after the 60 s guard and fail the assertRaises.
        release = threading.Event()

        def script(h, n):  # type: ignore[no-untyped-def]
            release.wait(60)
            answer(h, 200, usage_body(), {"Content-Type": "application/json"})

        with FakeServer(script) as fake:
            try:
                with self.assertRaises(APITimeoutError) as caught:
                    self.client(fake.url, timeout=0.3, max_retries=1).usage()
            finally:
                release.set()
            self.assertIn("0.3 s", str(caught.exception))
            self.assertEqual((caught.exception.code, caught.exception.status), ("TIMEOUT", None))
            self.assertIsInstance(caught.exception, APIConnectionError)
            self.assertEqual(len(fake.requests), 2)
            # A per-call timeout overrides the client's: it is the one the request is sent with.
            client = self.client(fake.url, timeout=0.3)
            with mock.patch.object(client, "_send", wraps=client._send) as send:
                self.assertEqual(client.usage(timeout=5).plan, "pro")
            self.assertEqual(send.call_args.args[4], 5)

    def test_connection_refused(self) -> None:
        # A port bound but not listening refuses connections, and stays ours for the whole test (a
        # port closed before use could be taken by another process meanwhile).
        with socket.socket() as s, recorded_sleeps() as waits:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            with self.assertRaises(APIConnectionError) as caught:
                self.client(f"http://127.0.0.1:{port}", max_retries=1).usage()
        self.assertIn("refused", str(caught.exception))
        self.assertIsNone(caught.exception.status)
        self.assertEqual(caught.exception.code, "CONNECTION_ERROR")
        # One backoff (max_retries=1), no Retry-After to honour: the first backoff is at most 0.5 s.
        self.assertEqual(len(waits), 1)

    def test_cut_answer_is_a_connection_error(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            headers = compress_headers(1000)
            h.send_response(200)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", "1000")
            h.end_headers()
            h.wfile.write(OUT)
            h.wfile.flush()
            reset_connection(h)

        with FakeServer(script) as fake:
            with self.assertRaises(APIConnectionError):
                self.client(fake.url, max_retries=0).compress(IMAGE)

    def test_body_that_is_not_ours_still_types_by_status(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            answer(h, 502, b"<html>Bad Gateway</html>", {"Content-Type": "text/html"})

        with FakeServer(script) as fake:
            with self.assertRaises(ServerError) as caught:
                self.client(fake.url, max_retries=0).usage()
        self.assertEqual((caught.exception.status, caught.exception.code), (502, None))
        self.assertIn("Bad Gateway", caught.exception.message)

    def test_request_shape(self) -> None:
        def script(h, n):  # type: ignore[no-untyped-def]
            answer(h, 200, OUT, compress_headers(len(OUT)))

        with FakeServer(script) as fake:
            self.client(fake.url).compress(IMAGE, quality="auto", max_dimension=640, format="webp", strip_exif=False)
        sent = fake.requests[0]
        headers = {k.lower(): v for k, v in sent["headers"].items()}  # type: ignore[union-attr]
        self.assertEqual(sent["path"], "/api/v1/compress")
        self.assertEqual(headers["authorization"], "Bearer cmp_live_fake")
        self.assertTrue(headers["user-agent"].startswith("compresso-python/"))
        self.assertTrue(headers["content-type"].startswith("multipart/form-data; boundary="))
        body = sent["body"]
        for field, value in (("quality", b"auto"), ("max_dimension", b"640"), ("output_format", b"webp"),
                             ("strip_exif", b"false")):
            self.assertIn(f'name="{field}"'.encode() + b"\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + value,
                          body)
        self.assertIn(b'name="file"; filename="image"\r\nContent-Type: image/jpeg\r\n\r\n' + IMAGE, body)


class AsyncFaultTests(unittest.TestCase):
    def test_async_retries_a_reset_and_times_out(self) -> None:
        release = threading.Event()  # held answers wait for the test to have seen the timeout

        def script(h, n):  # type: ignore[no-untyped-def]
            if n == 0:
                reset_connection(h)
            elif n == 1:
                answer(h, 200, usage_body(), {"Content-Type": "application/json"})
            else:
                release.wait(60)
                answer(h, 200, usage_body(), {"Content-Type": "application/json"})

        async def run(url: str) -> None:
            async with AsyncCompresso("cmp_live_fake", url, timeout=0.3, max_retries=1) as client:
                usage = await client.usage()
                self.assertEqual(usage.limit, 500)
                with self.assertRaises(APITimeoutError):
                    await client.usage()

        with FakeServer(script) as fake:
            try:
                asyncio.run(run(fake.url))
            finally:
                release.set()
        self.assertEqual(len(fake.requests), 4)

    def test_closed_async_client_refuses(self) -> None:
        async def run() -> None:
            client = AsyncCompresso("cmp_live_fake", "http://127.0.0.1:9")
            await client.close()
            with self.assertRaises(CompressoError) as caught:
                await client.usage()
            self.assertIn("closed", str(caught.exception))

        asyncio.run(run())


if __name__ == "__main__":
    unittest.main()
