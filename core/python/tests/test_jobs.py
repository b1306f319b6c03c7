"""client.jobs (Compresso and AsyncCompresso) against the real server: the embedded default
(``compresso serve`` with SQLite, the in-process queue and files on disk) and PostgreSQL + Redis
(its own database and queue prefix); and the Idempotency-Key every submission carries."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import unittest
import uuid
from pathlib import Path
from typing import Dict, List, Optional

from _support import ROOT, FakeServer, RealServer, answer, corpus, json_error, node_binary, shared_key, shared_server

from compresso import (
    AsyncCompresso,
    BadRequestError,
    Compresso,
    Job,
    UnsupportedImageError,
)

ADMIN_URL = os.environ.get("COMPRESSO_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("COMPRESSO_TEST_REDIS_URL", "redis://127.0.0.1:6379")


def _admin_sql(sql: str) -> None:
    """One statement on the test PostgreSQL, through the repository's own driver (this package has none)."""
    script = (
        "import pg from 'pg';"
        f"const c = new pg.Client({{ connectionString: {ADMIN_URL!r} }});"
        f"await c.connect(); await c.query({sql!r}); await c.end();"
    )
    done = subprocess.run(
        [node_binary(), "--input-type=module", "-e", script], cwd=str(ROOT), capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise RuntimeError(f"PostgreSQL at {ADMIN_URL}: {done.stderr.strip()[-500:]}")


class _JobsCases:
    """The same cases on each backend (``server`` and ``key`` are set by the subclass)."""

    server: RealServer
    key: str

    def setUp(self) -> None:  # type: ignore[misc]
        self.client = Compresso(self.key, self.server.url)
        self.tmp = Path(tempfile.mkdtemp(prefix="compresso-py-jobs-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)  # type: ignore[attr-defined]
        self.images = []
        for name in ("photo-skimage-rocket.jpg", "icon-oxygen-folder-red.png", "graphic-skimage-text.png"):
            target = self.tmp / name
            shutil.copyfile(corpus(name), target)
            self.images.append(target)

    def usage(self) -> int:
        return self.client.usage().used - 1  # this call counts itself

    def test_create_wait_download(self) -> None:
        t = self  # type: ignore[assignment]
        corrupt = self.tmp / "cut.jpg"
        corrupt.write_bytes(corpus("photo-skimage-rocket.jpg").read_bytes()[:2000])
        before = self.usage()
        with open(self.images[2], "rb") as stream:
            job = self.client.jobs.create(
                [self.images[0], self.images[1].read_bytes(), corrupt, stream],
                format="webp",
                quality=60,
                max_dimension=96,
            )
        t.assertTrue(job.id.startswith("job_"))
        t.assertEqual(job.progress.total, 4)
        t.assertEqual(job.options["output_format"], "webp")
        seen: List[Job] = []
        done = self.client.jobs.wait(job, on_progress=seen.append, poll_interval=0.02)
        t.assertTrue(done.completed)
        t.assertEqual((done.progress.done, done.progress.failed, done.progress.percent), (3, 1, 100))
        t.assertEqual(seen[-1], done)
        finished = [j.progress.done + j.progress.failed for j in seen]
        t.assertEqual(finished, sorted(finished))
        # Submitted once: four items counted, polling not counted (usage() itself counts, subtracted).
        t.assertEqual(self.usage(), before + 4 + 1)

        out = self.tmp / "out"
        downloads = self.client.jobs.download(done.id, out)
        t.assertEqual([d.ok for d in downloads], [True, True, False, True])
        t.assertEqual(
            sorted(os.listdir(out)), ["graphic-skimage-text.webp", "image.webp", "photo-skimage-rocket.webp"]
        )
        for d in downloads:
            if d.ok:
                t.assertEqual(os.path.getsize(d.path), d.item.output_size)
                t.assertEqual(Path(d.path).read_bytes()[8:12], b"WEBP")
        t.assertIsInstance(downloads[2].error, UnsupportedImageError)
        t.assertEqual((downloads[2].error.code, downloads[2].error.status), ("CORRUPT_IMAGE", 422))

    def test_same_idempotency_key_is_one_job_counted_once(self) -> None:
        t = self  # type: ignore[assignment]
        key = f"py-{uuid.uuid4()}"
        before = self.usage()
        first = self.client.jobs.create([self.images[0], self.images[1]], idempotency_key=key)
        again = self.client.jobs.create([self.images[0], self.images[1]], idempotency_key=key)
        t.assertEqual(again.id, first.id)
        t.assertEqual(self.usage(), before + 2 + 1)
        with t.assertRaises(BadRequestError) as caught:
            self.client.jobs.create([self.images[1]], idempotency_key=key)
        t.assertEqual(caught.exception.code, "IDEMPOTENCY_KEY_REUSED")
        t.assertEqual(caught.exception.status, 422)
        # compress: the same key, the same answer, counted once.
        a = self.client.compress(self.images[0].read_bytes(), format="webp", idempotency_key=key + "-c")
        b = self.client.compress(self.images[0].read_bytes(), format="webp", idempotency_key=key + "-c")
        t.assertEqual(a.data, b.data)
        t.assertEqual(self.usage(), before + 2 + 1 + 1 + 1)
        self.client.jobs.wait(first, poll_interval=0.02)

    def test_async_client(self) -> None:
        t = self  # type: ignore[assignment]

        async def go() -> None:
            async with AsyncCompresso(self.key, self.server.url) as client:
                job = await client.jobs.create([self.images[2]], format="webp")
                progress: List[int] = []

                async def on_progress(j: Job) -> None:
                    progress.append(j.progress.done)

                done = await client.jobs.wait(job.id, on_progress=on_progress, poll_interval=0.02)
                t.assertTrue(done.completed)
                t.assertEqual(progress[-1], 1)
                downloads = await client.jobs.download(done, self.tmp / "async")
                t.assertEqual([os.path.basename(d.path) for d in downloads], ["graphic-skimage-text.webp"])
                again = await client.jobs.get(done.id)
                t.assertEqual(again.id, done.id)

        asyncio.run(go())

    def test_refusals_before_sending(self) -> None:
        t = self  # type: ignore[assignment]
        with t.assertRaises(ValueError):
            self.client.jobs.create([self.images[0]], ["https://example.com/a.jpg"])
        with t.assertRaises(ValueError):
            self.client.jobs.create([])
        with t.assertRaises(ValueError):
            self.client.compress(self.images[0], idempotency_key="has space")


class EmbeddedJobsTests(_JobsCases, unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = shared_server()
        cls.key = shared_key()


class PostgresRedisJobsTests(_JobsCases, unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        run = uuid.uuid4().hex[:8]
        cls.db_name = f"cmp_pyjobs_{run}"
        _admin_sql(f'CREATE DATABASE "{cls.db_name}"')
        base, _, _ = ADMIN_URL.rpartition("/")
        cls.server = RealServer(
            {
                "DATABASE_URL": f"{base}/{cls.db_name}",
                "REDIS_URL": REDIS_URL,
                "COMPRESSO_QUEUE_PREFIX": f"cmppy{run}",
                "COMPRESSO_WORKERS": "1",
            }
        )
        cls.key = cls.server.account("jobs-pg@example.com")
        cls.server.start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()
        _admin_sql(f'DROP DATABASE IF EXISTS "{cls.db_name}" WITH (FORCE)')


class IdempotencyKeyOnRetryTests(unittest.TestCase):
    """Every retried POST carries one Idempotency-Key, the same on each attempt."""

    def test_one_key_per_call_reused_on_its_retries(self) -> None:
        def script(handler, n: int) -> None:  # type: ignore[no-untyped-def]
            if n == 0:
                answer(handler, *json_error("SERVICE_UNAVAILABLE", 503, headers={"Retry-After": "0"}))
            elif n == 1:
                answer(handler, *json_error("IDEMPOTENCY_KEY_IN_USE", 409, headers={"Retry-After": "0"}))
            else:
                body = (
                    b'{"id":"job_x","status":"queued","created_at":"t","status_url":"/api/v1/jobs/job_x",'
                    b'"options":{},"progress":{"total":1,"done":0,"failed":0,"queued":1,"percent":0},'
                    b'"items":[{"index":0,"name":"a.jpg","status":"queued"}]}'
                )
                answer(handler, 202, body, {"Content-Type": "application/json"})

        with FakeServer(script) as fake:
            client = Compresso("cmp_live_fake", fake.url, max_retries=3)
            job = client.jobs.create([b"\xff\xd8\xff fake"])
            client.jobs.create([b"\xff\xd8\xff fake"])
        self.assertEqual(job.id, "job_x")
        keys: List[Optional[str]] = [dict((k.lower(), v) for k, v in r["headers"].items()).get("idempotency-key") for r in fake.requests]  # type: ignore[union-attr]
        self.assertEqual(len(keys), 4)
        self.assertTrue(keys[0])
        self.assertEqual(keys[0], keys[1])
        self.assertEqual(keys[1], keys[2])
        self.assertNotEqual(keys[3], keys[0])
        uuid.UUID(str(keys[0]))


if __name__ == "__main__":
    unittest.main()
