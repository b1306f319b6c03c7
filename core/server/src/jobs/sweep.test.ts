import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  fileBlobStore,
  inlineQueue,
  type JobHandlers,
  type JobQueue,
  type QueueWorker,
  quotaDay,
} from '@compresso/runtime';
import { bullmqQueue } from '@compresso/runtime/bullmq';
import { CompressoError } from '@compresso/schema';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, proAccount, smallJpeg, startTestServer, type TestServer, tempDir } from '../testing.ts';
import { BATCH_ITEM_JOB, batchHandlers, itemJobId } from './batch.ts';
import { createBatchSweep, startBatchSweeper } from './sweep.ts';

/**
 * The reconciliation sweep on both queue backends — the in-process queue and BullMQ on the real
 * Redis (COMPRESSO_TEST_REDIS_URL, else 127.0.0.1:6379, under a key prefix of this run's own) — over
 * a real SQLite database, with the real batch handler doing the work.
 */
const REDIS_URL = process.env.COMPRESSO_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `cmp-sweep-${randomBytes(4).toString('hex')}`;
const admin = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 3000 });
const tmp = tempDir();
let image: Buffer;
let queues = 0;

beforeAll(async () => {
  image = await smallJpeg();
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(`These tests need Redis at ${REDIS_URL}: ${(error as Error).message}`);
  }
});

/** Every key of one queue (or of the whole run): what a Redis that restarted empty has forgotten. */
async function forget(pattern: string) {
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await admin.del(...keys);
  } while (cursor !== '0');
}

afterAll(async () => {
  await forget(`${PREFIX}:*`);
  admin.disconnect();
  tmp.cleanup();
});

interface Backend {
  kind: 'inline' | 'bullmq';
  open(options?: { attempts?: number; lockMs?: number; maxStalledCount?: number }): JobQueue;
  /** The queue's jobs vanish (BullMQ: its keys deleted; inline: a new queue, as after a restart). */
  lose(queue: JobQueue): Promise<JobQueue>;
}

const backends: Backend[] = [
  {
    kind: 'inline',
    open: (o = {}) =>
      inlineQueue({
        attempts: o.attempts ?? 2,
        backoff: { type: 'fixed', delayMs: 20 },
        closeTimeoutMs: 1000,
      }),
    async lose(queue) {
      await queue.close();
      return inlineQueue({ attempts: 2, backoff: { type: 'fixed', delayMs: 20 }, closeTimeoutMs: 1000 });
    },
  },
  {
    kind: 'bullmq',
    open: (o = {}) =>
      bullmqQueue({
        url: REDIS_URL,
        prefix: PREFIX,
        name: `s${++queues}`,
        attempts: o.attempts ?? 2,
        backoff: { type: 'fixed', delayMs: 20 },
        closeTimeoutMs: 1000,
        ...(o.lockMs ? { lockDurationMs: o.lockMs, stalledIntervalMs: o.lockMs } : {}),
        ...(o.maxStalledCount !== undefined ? { maxStalledCount: o.maxStalledCount } : {}),
      }),
    async lose(queue) {
      await forget(`${PREFIX}:${queue.name}:*`);
      return queue;
    },
  },
];

let counter = 0;
async function setup(queue: JobQueue) {
  const blobs = fileBlobStore({ root: join(tmp.dir, `blobs-${++counter}`) });
  const srv = await startTestServer({
    dbPath: join(tmp.dir, `sweep-${counter}.sqlite`),
    overrides: { jobAttempts: 2 },
    queue,
    blobs,
  });
  const account = await proAccount(srv.db, `sweep-${counter}@example.com`);
  const submit = async (n: number): Promise<string> => {
    const body = new FormData();
    for (let i = 0; i < n; i++) body.append('file', new Blob([new Uint8Array(image)]), `i${i}.jpg`);
    const res = await fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(account.key), body });
    expect(res.status).toBe(202);
    return ((await res.json()) as { id: string }).id;
  };
  const handlers = (): JobHandlers =>
    batchHandlers({
      db: srv.db,
      blobs,
      engine: srv.engine,
      logger: srv.logger,
      attempts: 2,
      fetchLimits: { allowPrivate: false, timeoutMs: 1000, maxBytes: 1 << 20 },
    });
  const usage = () => srv.db.usageOn(account.accountId, quotaDay());
  // The queue is passed in: tests replace it (backend.lose) and must close the one they ended with.
  const close = async (current: JobQueue) => {
    await current.close();
    await srv.close();
    await blobs.close();
  };
  return { srv, blobs, account, submit, handlers, usage, close };
}

async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out; last value: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const doneLines = (srv: TestServer, batchId: string) =>
  srv.logLines.filter((l) => l.msg === 'batch item done' && l.batch_id === batchId && l.recorded === true);

describe.each(backends)('batch sweep on the $kind queue', (backend) => {
  it('a lost job is added again under its id and its item completes exactly once', async () => {
    let queue = backend.open();
    const h = await setup(queue);
    let worker: QueueWorker | undefined;
    try {
      const id = await h.submit(3);
      expect((await queue.getJob(itemJobId(id, 0)))?.state).toBe('waiting');
      queue = await backend.lose(queue);
      expect(await queue.getJob(itemJobId(id, 0))).toBeUndefined();

      // Two processes sweeping at once: both may add, the ids make it one job per item.
      const sweeps = [0, 1].map(() =>
        createBatchSweep({ db: h.srv.db, queue, logger: h.srv.logger, graceMs: 0 }),
      );
      const results = await Promise.all(sweeps.map((s) => s.sweep()));
      expect(results.map((r) => r.checked)).toEqual([3, 3]);
      expect(results.every((r) => r.failed === 0)).toBe(true);
      expect(results[0]!.requeued + results[1]!.requeued).toBeGreaterThanOrEqual(3);
      expect(await queue.counts()).toMatchObject({ waiting: 3, active: 0, failed: 0 });
      // Waiting jobs are left alone.
      expect(await sweeps[0]!.sweep()).toEqual({ checked: 3, requeued: 0, failed: 0 });

      worker = queue.work(h.handlers(), { concurrency: 2 });
      await until(
        () => h.srv.db.listBatchItems(id),
        (items) => items.every((i) => i.status === 'done'),
      );
      expect(
        doneLines(h.srv, id)
          .map((l) => l.index)
          .sort(),
      ).toEqual([0, 1, 2]);
      expect(await h.usage()).toBe(3); // nothing given back: every item was done, once
      expect(await sweeps[1]!.sweep()).toEqual({ checked: 0, requeued: 0, failed: 0 });
    } finally {
      await worker?.close({ timeoutMs: 1000 });
      await h.close(queue);
    }
  });

  it('a job dead-lettered without its handler recording it: the item fails with INTERNAL_ERROR and its quota is given back, once', async () => {
    const queue = backend.open({ attempts: 1 });
    const h = await setup(queue);
    const real = h.handlers()[BATCH_ITEM_JOB]!;
    // Item 0's runs end before the handler records anything, as a worker that dies mid-item does
    // (inline cannot die apart from its queue; the BullMQ test below kills a real worker process).
    const worker = queue.work(
      {
        [BATCH_ITEM_JOB]: async (job) => {
          if ((job.data as { index: number }).index === 0) throw new Error('worker lost mid-item');
          return real(job);
        },
      },
      { concurrency: 2 },
    );
    try {
      const id = await h.submit(2);
      await until(
        () => Promise.all([queue.getJob(itemJobId(id, 0)), h.srv.db.findBatchItem(id, 1)]),
        ([job, item]) => job?.state === 'failed' && item?.status === 'done',
      );
      // The gap this closes: dead letter, and the database still says queued.
      expect((await h.srv.db.findBatchItem(id, 0))?.status).toBe('queued');
      expect(await h.usage()).toBe(2);

      const sweeps = [0, 1].map(() =>
        createBatchSweep({ db: h.srv.db, queue, logger: h.srv.logger, graceMs: 0 }),
      );
      const results = await Promise.all(sweeps.map((s) => s.sweep()));
      expect(results.map((r) => r.failed).sort()).toEqual([0, 1]);
      const item = await h.srv.db.findBatchItem(id, 0);
      expect(item).toMatchObject({ status: 'failed', errorCode: 'INTERNAL_ERROR' });
      expect(item?.errorMessage).toMatch(/fault on our side; it was not counted/);
      expect(await h.usage()).toBe(1); // given back exactly once
      // One error line for the one item, from the sweep that recorded it, not one per sweeper.
      const errors = h.srv.logLines.filter((l) => l.level === 50 && l.batch_id === id);
      expect(errors.map((l) => [l.index, l.recorded])).toEqual([[0, true]]);
      expect(await sweeps[0]!.sweep()).toEqual({ checked: 0, requeued: 0, failed: 0 });
      expect(await h.usage()).toBe(1);
      const view = (await (
        await fetch(`${h.srv.url}/api/v1/jobs/${id}`, { headers: bearer(h.account.key) })
      ).json()) as { status: string; progress: { done: number; failed: number } };
      expect(view).toMatchObject({ status: 'completed', progress: { done: 1, failed: 1 } });
    } finally {
      await worker.close({ timeoutMs: 1000 });
      await h.close(queue);
    }
  });

  it('leaves items of batches younger than the grace period alone, then picks them up', async () => {
    let queue = backend.open();
    const h = await setup(queue);
    try {
      const id = await h.submit(1);
      queue = await backend.lose(queue);
      const sweep = createBatchSweep({ db: h.srv.db, queue, logger: h.srv.logger, graceMs: 60_000 });
      expect(await sweep.sweep()).toEqual({ checked: 0, requeued: 0, failed: 0 });
      expect(await queue.getJob(itemJobId(id, 0))).toBeUndefined();
      expect((await h.srv.db.findBatchItem(id, 0))?.status).toBe('queued');
      // A minute later the same item is old enough.
      expect(await sweep.sweep(Date.now() + 61_000)).toEqual({ checked: 1, requeued: 1, failed: 0 });
      expect((await queue.getJob(itemJobId(id, 0)))?.state).toBe('waiting');
    } finally {
      await h.close(queue);
    }
  });

  it('pages through a backlog larger than a page in one sweep', async () => {
    let queue = backend.open();
    const h = await setup(queue);
    try {
      const id = await h.submit(5);
      queue = await backend.lose(queue);
      const sweep = createBatchSweep({ db: h.srv.db, queue, logger: h.srv.logger, graceMs: 0, pageSize: 2 });
      // Three pages (2, 2, 1): every lost item is back after one sweep, not one page per interval.
      expect(await sweep.sweep()).toEqual({ checked: 5, requeued: 5, failed: 0 });
      for (let i = 0; i < 5; i++) expect((await queue.getJob(itemJobId(id, i)))?.state).toBe('waiting');
      expect(await sweep.sweep()).toEqual({ checked: 5, requeued: 0, failed: 0 });
    } finally {
      await h.close(queue);
    }
  });

  it('stops at its cap and the next sweep goes on from there, then from the start', async () => {
    let queue = backend.open();
    const h = await setup(queue);
    try {
      const id = await h.submit(5);
      queue = await backend.lose(queue);
      const sweep = createBatchSweep({
        db: h.srv.db,
        queue,
        logger: h.srv.logger,
        graceMs: 0,
        pageSize: 2,
        maxItems: 3,
      });
      const seen = [];
      for (let i = 0; i < 3; i++) seen.push(await sweep.sweep());
      expect(seen.map((r) => [r.checked, r.requeued])).toEqual([
        [3, 3], // a page of 2, then one of the 1 left under the cap
        [2, 2], // on from there to the end
        [3, 0], // from the start again: those are waiting now
      ]);
      for (let i = 0; i < 5; i++) expect((await queue.getJob(itemJobId(id, i)))?.state).toBe('waiting');
    } finally {
      await h.close(queue);
    }
  });

  it('a sweep that fails partway leaves its page to the next sweep', async () => {
    let queue = backend.open();
    const h = await setup(queue);
    try {
      const id = await h.submit(5);
      queue = await backend.lose(queue);
      // The queue with one blip: the lookup of item 3 (second page) fails once, as Redis gone for a moment.
      let blipped = false;
      const real = queue;
      const flaky: JobQueue = Object.assign(Object.create(real) as JobQueue, {
        getJob: async (jobId: string) => {
          if (jobId === itemJobId(id, 3) && !blipped) {
            blipped = true;
            throw new CompressoError('SERVICE_UNAVAILABLE', 'The job queue is unavailable.');
          }
          return real.getJob(jobId);
        },
      });
      const sweep = createBatchSweep({
        db: h.srv.db,
        queue: flaky,
        logger: h.srv.logger,
        graceMs: 0,
        pageSize: 2,
      });
      const outcomes: string[] = [];
      for (let i = 0; i < 4 && !blipped; i++) {
        outcomes.push(
          await sweep.sweep().then(
            (r) => `checked ${r.checked}`,
            (e: unknown) => (e as CompressoError).code,
          ),
        );
      }
      expect(outcomes.at(-1)).toBe('SERVICE_UNAVAILABLE');
      // The next sweep starts at the page that failed (items 2 and 3), not after it.
      await sweep.sweep();
      const states = [];
      for (let i = 0; i < 5; i++) states.push((await queue.getJob(itemJobId(id, i)))?.state);
      expect(states).toEqual(['waiting', 'waiting', 'waiting', 'waiting', 'waiting']);
    } finally {
      await h.close(queue);
    }
  });

  it('the sweeper sweeps at start and again every interval until closed', async () => {
    let queue = backend.open();
    const h = await setup(queue);
    const sweeper = { current: undefined as undefined | { close(): Promise<void> } };
    try {
      const id = await h.submit(1);
      queue = await backend.lose(queue);
      sweeper.current = startBatchSweeper({
        db: h.srv.db,
        queue,
        logger: h.srv.logger,
        graceMs: 0,
        intervalMs: 100,
      });
      await until(
        () => queue.getJob(itemJobId(id, 0)),
        (j) => j?.state === 'waiting',
      );
      // Lost again (a second Redis restart): a later tick finds it.
      queue = await backend.lose(queue);
      if (backend.kind === 'inline') {
        // The inline "restart" is a new queue object: a new process, with its own sweeper.
        await sweeper.current.close();
        sweeper.current = startBatchSweeper({
          db: h.srv.db,
          queue,
          logger: h.srv.logger,
          graceMs: 0,
          intervalMs: 100,
        });
      }
      await until(
        () => queue.getJob(itemJobId(id, 0)),
        (j) => j?.state === 'waiting',
      );
      await sweeper.current.close();
      const lines = h.srv.logLines.filter((l) => l.msg === 'batch sweep' && (l.requeued as number) > 0);
      expect(lines.length).toBeGreaterThanOrEqual(backend.kind === 'inline' ? 1 : 2);
    } finally {
      await sweeper.current?.close();
      await h.close(queue);
    }
  });
});

describe('batch sweep on BullMQ: an item that kills its worker', () => {
  it('a worker SIGKILLed mid-item past the stalled limit: the dead letter, then the sweep fails the item and gives its quota back', async () => {
    const lockMs = 1000;
    // The surviving worker's stalled-job check decides; with a limit of 0 the first death is too many.
    const queue = backend(1).open({ attempts: 3, lockMs, maxStalledCount: 0 });
    const h = await setup(queue);
    const script = fileURLToPath(new URL('./fixtures/dying-worker.ts', import.meta.url));
    const child = spawn(process.execPath, [script, REDIS_URL, PREFIX, queue.name, String(lockMs)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const seen: string[] = [];
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (l) => seen.push(l));
    let survivor: QueueWorker | undefined;
    try {
      await until(
        async () => seen,
        (s) => s.includes('ready'),
      );
      const id = await h.submit(1);
      await until(
        async () => seen,
        (s) => s.includes(`started ${itemJobId(id, 0)}`),
      );
      child.kill('SIGKILL');
      await once(child, 'exit');
      survivor = queue.work(h.handlers());
      const dead = await until(
        () => queue.getJob(itemJobId(id, 0)),
        (j) => j?.state === 'failed',
      );
      expect(dead?.stalls).toBe(1);
      // BullMQ failed it without a handler: the database still says queued, the quota still counted.
      expect((await h.srv.db.findBatchItem(id, 0))?.status).toBe('queued');
      expect(await h.usage()).toBe(1);

      const sweep = createBatchSweep({ db: h.srv.db, queue, logger: h.srv.logger, graceMs: 0 });
      expect(await sweep.sweep()).toEqual({ checked: 1, requeued: 0, failed: 1 });
      const item = await h.srv.db.findBatchItem(id, 0);
      expect(item).toMatchObject({ status: 'failed', errorCode: 'INTERNAL_ERROR' });
      expect(item?.errorMessage).toMatch(/stopped its worker once before finishing/);
      expect(await h.usage()).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await survivor?.close({ timeoutMs: 1000 });
      await h.close(queue);
    }
  });
});

function backend(i: number): Backend {
  return backends[i]!;
}
