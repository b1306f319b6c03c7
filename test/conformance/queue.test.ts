import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { inlineQueue, loadConfig, openQueue } from '@compresso/runtime';
import { bullmqQueue } from '@compresso/runtime/bullmq';
import { isCompressoError } from '@compresso/schema';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeQueueBattery, gate, until } from './queue-battery.ts';

/**
 * The queue battery on both backends: in-process, and BullMQ on the real Redis (CI makes sure one
 * answers at 127.0.0.1:6379; COMPRESSO_TEST_REDIS_URL points elsewhere). Every queue of this run
 * lives under its own key prefix, deleted at the end.
 */
const REDIS_URL = process.env.COMPRESSO_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `cmp-test-${randomBytes(4).toString('hex')}`;
let queues = 0;
const nextName = () => `q${++queues}`;
const admin = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 3000 });

beforeAll(async () => {
  try {
    await admin.connect();
    await admin.ping();
  } catch (error) {
    throw new Error(
      `These tests need Redis at ${REDIS_URL} (set COMPRESSO_TEST_REDIS_URL to use another). Start it ` +
        `(apt-get install -y redis-server && redis-server --daemonize yes) — ${(error as Error).message}`,
    );
  }
});

afterAll(async () => {
  if (admin.status === 'ready') {
    let cursor = '0';
    do {
      const [next, keys] = await admin.scan(cursor, 'MATCH', `${PREFIX}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await admin.del(...keys);
    } while (cursor !== '0');
  }
  admin.disconnect();
});

describeQueueBattery('inline (in-process)', async () =>
  inlineQueue({ backoff: { type: 'fixed', delayMs: 20 }, closeTimeoutMs: 5000 }),
);

describeQueueBattery(`bullmq (Redis ${REDIS_URL})`, async () =>
  bullmqQueue({
    url: REDIS_URL,
    prefix: PREFIX,
    name: nextName(),
    backoff: { type: 'fixed', delayMs: 20 },
    closeTimeoutMs: 5000,
  }),
);

describe('openQueue', () => {
  it('picks the in-process queue without REDIS_URL and BullMQ with it', async () => {
    const inline = await openQueue(loadConfig({}));
    expect(inline.kind).toBe('inline');
    await inline.close();
    const config = loadConfig({ REDIS_URL, COMPRESSO_QUEUE_PREFIX: PREFIX });
    const bull = await openQueue(config, { name: nextName() });
    try {
      expect(bull.kind).toBe('bullmq');
      await bull.ping();
      const { id } = await bull.add('x', { ok: true });
      expect(await admin.exists(`${PREFIX}:${bull.name}:${id}`)).toBe(1);
    } finally {
      await bull.close();
    }
  });
});

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/**
 * A redis-server of the test's own, on `port`, that the test may kill and restart. Ready when this
 * child logs so (not when something answers on the port: that could be another suite's server).
 */
async function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  let output = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) resolve();
    });
    child.once('error', (error) =>
      reject(
        new Error(`redis-server (on PATH: apt-get install -y redis-server) did not start: ${error.message}`),
      ),
    );
    child.once('exit', () => reject(new Error(`redis-server did not start on ${port}:\n${output}`)));
  });
  child.stdout!.resume();
  return child;
}

/** startRedis on a free port; another port if that one was taken before redis-server could bind it. */
async function startFreshRedis(): Promise<{ port: number; redis: ChildProcess }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      return { port, redis: await startRedis(port) };
    } catch (error) {
      if (attempt >= 5 || !/Address already in use/i.test(String(error))) throw error;
    }
  }
}

const unavailable = async (work: Promise<unknown>) => {
  const error = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  return { code: isCompressoError(error) ? error.code : String(error) };
};

describe('bullmq: producers fail fast, workers wait and reconnect', () => {
  it('a producer answers SERVICE_UNAVAILABLE on the refusal itself when nothing listens at REDIS_URL', async () => {
    // Refused for the whole test: this listener holds port P on 127.0.0.1 (no wildcard bind can take
    // P meanwhile), and nothing listens on 127.0.0.2:P.
    const holder = createServer();
    holder.listen(0, '127.0.0.1');
    await once(holder, 'listening');
    const port = (holder.address() as { port: number }).port;
    // The producer's time limit is set far beyond the test's: every answer below can only come from the
    // refused connection (its error event), never from waiting out a timer. (Was: each under 1.6 s.)
    const queue = bullmqQueue({
      url: `redis://:hunter2@127.0.0.2:${port}`,
      prefix: PREFIX,
      name: nextName(),
      producerTimeoutMs: 600_000,
    });
    const errors: string[] = [];
    queue.on((e) => e.type === 'error' && errors.push(e.error));
    try {
      for (const work of [
        queue.add('x', {}),
        queue.getJob('a'),
        queue.counts(),
        queue.failed(),
        queue.ping(),
      ]) {
        const { code } = await unavailable(work);
        expect(code).toBe('SERVICE_UNAVAILABLE');
      }
      const message = await queue.add('x', {}).catch((e: Error) => e.message);
      expect(message).toContain(`127.0.0.2:${port}`);
      expect(message).not.toContain('hunter2');
      expect(errors.join('\n')).toMatch(/ECONNREFUSED/);
    } finally {
      await queue.close();
      holder.close();
    }
  });

  it('a worker keeps going across a Redis restart; producers refuse while it is down', async () => {
    const fresh = await startFreshRedis();
    const port = fresh.port;
    const url = `redis://127.0.0.1:${port}`;
    let redis: ChildProcess = fresh.redis;
    const queue = bullmqQueue({ url, prefix: PREFIX, name: nextName(), producerTimeoutMs: 1000 });
    const errors: string[] = [];
    queue.on((e) => e.type === 'error' && errors.push(e.error));
    const done: string[] = [];
    const worker = queue.work({ note: async (job) => void done.push((job.data as { n: string }).n) });
    try {
      await queue.add('note', { n: 'before' });
      await until(
        async () => done,
        (d) => d.includes('before'),
      );

      const errorsBefore = errors.length;
      redis.kill('SIGTERM');
      await once(redis, 'exit');
      const { code } = await unavailable(queue.add('note', { n: 'while down' }));
      expect(code).toBe('SERVICE_UNAVAILABLE');
      // The connections have seen Redis go (was: a fixed 500 ms pause, and the refusal within 2.5 s).
      await until(
        async () => errors.length,
        (n) => n > errorsBefore,
      );

      redis = await startRedis(port);
      // The producer reconnects by itself too: the first add after the restart may wait for it.
      await until(
        () =>
          queue.add('note', { n: 'after' }).then(
            () => true,
            () => false,
          ),
        (ok) => ok,
      );
      await until(
        async () => done,
        (d) => d.includes('after'),
        20_000,
      );
      expect(done).not.toContain('while down');
    } finally {
      await worker.close({ timeoutMs: 2000 });
      await queue.close();
      redis.kill('SIGTERM');
    }
  });

  it('a worker closes within its bounds while Redis is down, its job left to the stalled-job check', async () => {
    const { port, redis } = await startFreshRedis();
    const queue = bullmqQueue({
      url: `redis://127.0.0.1:${port}`,
      prefix: PREFIX,
      name: nextName(),
      producerTimeoutMs: 500,
    });
    const started = gate();
    let aborted = false;
    const worker = queue.work({
      long: async (job) => {
        started.open();
        await new Promise((resolve) => job.signal.addEventListener('abort', resolve));
        aborted = true;
      },
    });
    try {
      await queue.add('long', {});
      await started.promise;
      redis.kill('SIGKILL');
      await once(redis, 'exit');
      // Grace 0.5 s, hand-back 1.5 s, disconnect and last wait ≤ 1 s each: close() returns, never the
      // for-ever of a QUIT sent to a dead server (that it returns is the outcome; was: within 6 s).
      await worker.close({ timeoutMs: 500 });
      expect(aborted).toBe(true);
      expect(worker.running).toBe(0);
    } finally {
      await queue.close();
      if (redis.exitCode === null) redis.kill('SIGKILL');
    }
  });

  /** The fixture worker in its own process: it reports each job it starts and never finishes one. */
  function dyingWorker(name: string, lockMs: number) {
    const script = fileURLToPath(new URL('./fixtures/queue-worker.ts', import.meta.url));
    const child = spawn(process.execPath, [script, REDIS_URL, PREFIX, name, String(lockMs)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const seen: string[] = [];
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => seen.push(line));
    return { child, seen };
  }

  it("a SIGKILLed worker's job is taken over by another worker once its lock lapses", async () => {
    const name = nextName();
    const lockMs = 1000;
    const { child, seen } = dyingWorker(name, lockMs);
    const queue = bullmqQueue({
      url: REDIS_URL,
      prefix: PREFIX,
      name,
      lockDurationMs: lockMs,
      stalledIntervalMs: lockMs,
    });
    try {
      await until(
        async () => seen,
        (s) => s.includes('ready'),
      );
      const { id } = await queue.add('resize', { file: 'big.jpg' }, { jobId: 'takeover-1', attempts: 1 });
      await until(
        async () => seen,
        (s) => s.some((l) => l.startsWith('started takeover-1')),
      );
      expect((await queue.getJob(id))?.state).toBe('active');
      child.kill('SIGKILL');
      await once(child, 'exit');

      const worker = queue.work({
        resize: async (job) => `resized by the survivor on attempt ${job.attempt}`,
      });
      const done = await until(
        () => queue.getJob(id),
        (j) => j?.state === 'completed',
        20_000,
      );
      await worker.close();
      // One attempt allowed, yet it completed: a stall is not a failed attempt, but it is counted.
      expect(done?.result).toBe('resized by the survivor on attempt 1');
      // Taken over through the stalled-job check (counted once), not by a retry: how soon is the lock's
      // business, shown here by the outcome (was: within six lock durations of wall clock).
      expect(done?.stalls).toBe(1);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await queue.close();
    }
  });

  it('a job whose worker dies more often than maxStalledCount lands in the dead letter without its handler running again', async () => {
    const name = nextName();
    const lockMs = 1000;
    const { child, seen } = dyingWorker(name, lockMs);
    // The survivor's stalled-job check decides: with a limit of 0, the first death is one too many
    // (an input that kills its worker every time, e.g. out of memory).
    const queue = bullmqQueue({
      url: REDIS_URL,
      prefix: PREFIX,
      name,
      lockDurationMs: lockMs,
      stalledIntervalMs: lockMs,
      maxStalledCount: 0,
    });
    try {
      await until(
        async () => seen,
        (s) => s.includes('ready'),
      );
      const { id } = await queue.add('resize', { file: 'bomb.jpg' }, { jobId: 'oom-1', attempts: 3 });
      await until(
        async () => seen,
        (s) => s.some((l) => l.startsWith('started oom-1')),
      );
      child.kill('SIGKILL');
      await once(child, 'exit');
      let ran = 0;
      const worker = queue.work({
        resize: async () => {
          ran++;
        },
      });
      const dead = await until(
        () => queue.getJob(id),
        (j) => j?.state === 'failed',
        20_000,
      );
      await worker.close();
      expect(ran).toBe(0);
      expect(dead?.stalls).toBe(1);
      expect(dead?.failedReason).toMatch(/stalled/);
      expect((await queue.failed()).map((j) => j.id)).toContain(id);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await queue.close();
    }
  });
});
