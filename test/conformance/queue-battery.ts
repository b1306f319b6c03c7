import type { JobContext, JobQueue, JobView, QueueEvent } from '@compresso/runtime';
import { describe, expect, it } from 'vitest';

/**
 * The behaviour every JobQueue backend must have. `open` returns a fresh, empty queue (its own name
 * or prefix) whose default backoff is short; the battery closes it.
 */
export function describeQueueBattery(backend: string, open: () => Promise<JobQueue>): void {
  describe(`JobQueue battery: ${backend}`, () => {
    const withQueue = (test: (queue: JobQueue) => Promise<void>) => async () => {
      const queue = await open();
      try {
        await test(queue);
      } finally {
        await queue.close();
      }
    };

    it(
      'adding a job id twice gives the same job, unchanged; data is JSON',
      withQueue(async (queue) => {
        const first = await queue.add('resize', { n: 1, at: new Date(0) }, { jobId: 'batch-7-item-1' });
        const again = await queue.add('resize', { n: 2 }, { jobId: 'batch-7-item-1' });
        const [bulkAgain, bulkNew] = await queue.addBulk([
          { name: 'resize', data: { n: 3 }, options: { jobId: 'batch-7-item-1' } },
          { name: 'resize', data: { n: 4 }, options: { jobId: 'batch-7-item-2' } },
        ]);
        const plain = await queue.add('resize', { n: 5 });
        expect(first.id).toBe('batch-7-item-1');
        expect(again.id).toBe(first.id);
        expect(bulkAgain?.id).toBe(first.id);
        expect(bulkNew?.id).toBe('batch-7-item-2');
        expect(plain.id).not.toBe(first.id);
        const job = await queue.getJob(first.id);
        expect(job).toMatchObject({
          id: first.id,
          name: 'resize',
          state: 'waiting',
          attemptsMade: 0,
          stalls: 0,
        });
        expect(job?.data).toEqual({ n: 1, at: '1970-01-01T00:00:00.000Z' });
        expect(await queue.counts()).toMatchObject({ waiting: 3, active: 0, failed: 0 });
        expect(await queue.getJob('no-such-job')).toBeUndefined();
        await expect(queue.add('resize', {}, { jobId: 'a:b' })).rejects.toThrow(/jobId/);
        await expect(queue.add('resize', {}, { jobId: '42' })).rejects.toThrow(/jobId/);
      }),
    );

    it(
      'runs a job: progress is visible while it runs, the result once done',
      withQueue(async (queue) => {
        const events: QueueEvent[] = [];
        queue.on((e) => events.push(e));
        const release = gate();
        const worker = queue.work({
          resize: async (job: JobContext<{ file: string }>) => {
            await job.updateProgress({ done: 1, total: 2 });
            await release.promise;
            await job.updateProgress(100);
            return { file: job.data.file, bytes: 1234, attempt: job.attempt };
          },
        });
        const { id } = await queue.add('resize', { file: 'a.jpg' });
        const running = await until(
          () => queue.getJob(id),
          (j) => j?.state === 'active' && isObject(j.progress),
        );
        expect(running?.progress).toEqual({ done: 1, total: 2 });
        expect(running?.processedAt).toBeGreaterThanOrEqual(running?.createdAt ?? Infinity);
        release.open();
        const done = await until(
          () => queue.getJob(id),
          (j) => j?.state === 'completed',
        );
        expect(done).toMatchObject({
          progress: 100,
          attemptsMade: 1,
          result: { file: 'a.jpg', bytes: 1234, attempt: 1 },
        });
        expect(done?.finishedAt).toBeGreaterThanOrEqual(done?.processedAt ?? Infinity);
        await worker.close();
        expect(events.map((e) => e.type)).toEqual(['active', 'completed']);
      }),
    );

    it(
      'a delayed job is `delayed` until its time, then runs once',
      withQueue(async (queue) => {
        const worker = queue.work({ later: async (job: JobContext<{ n: number }>) => job.data.n * 2 });
        const { id } = await queue.add('later', { n: 21 }, { jobId: 'later-1', delayMs: 300 });
        expect((await queue.getJob(id))?.state).toBe('delayed');
        expect(await queue.counts()).toMatchObject({ delayed: 1, waiting: 0 });
        const done = await until(
          () => queue.getJob(id),
          (j) => j?.state === 'completed',
        );
        expect(done).toMatchObject({ result: 42, attemptsMade: 1 });
        // Timers may fire a few ms early against the wall clock; a job that ignored the delay runs within ms.
        expect((done?.processedAt ?? 0) - (done?.createdAt ?? Infinity)).toBeGreaterThanOrEqual(290);
        await expect(queue.add('later', {}, { delayMs: -1 })).rejects.toThrow(/delayMs/);
        await expect(queue.add('later', {}, { delayMs: 1.5 })).rejects.toThrow(/delayMs/);
        await worker.close();
      }),
    );

    it(
      'retries a failing job with exponential backoff until it succeeds',
      withQueue(async (queue) => {
        const events: QueueEvent[] = [];
        queue.on((e) => events.push(e));
        const attempts: number[] = [];
        const worker = queue.work({
          flaky: async (job) => {
            attempts.push(job.attempt);
            if (job.attempt < 3) throw new Error(`upstream busy (attempt ${job.attempt})`);
            return 'ok';
          },
          // The same failure with a backoff of ten minutes: after its first attempt the job waits,
          // delayed, instead of running again. Shown by its state, not by timing the gap (a stopwatch
          // between attempts measured the machine's load as much as the backoff).
          patient: async (job) => {
            throw new Error(`upstream busy (attempt ${job.attempt})`);
          },
        });
        const patient = await queue.add(
          'patient',
          {},
          { attempts: 2, backoff: { type: 'exponential', delayMs: 600_000 } },
        );
        const { id } = await queue.add(
          'flaky',
          {},
          { attempts: 4, backoff: { type: 'exponential', delayMs: 150 } },
        );
        const done = await until(
          () => queue.getJob(id),
          (j) => j?.state === 'completed',
        );
        await worker.close();
        expect(done).toMatchObject({ attemptsMade: 3, result: 'ok' });
        expect(attempts).toEqual([1, 2, 3]);
        // The patient job failed once and now waits out its backoff: delayed, not run again.
        const waiting = await until(
          () => queue.getJob(patient.id),
          (j) => j?.state === 'delayed',
        );
        expect(waiting).toMatchObject({ attemptsMade: 1 });
        expect(events.filter((e) => e.type === 'active' && e.id === patient.id)).toHaveLength(1);
        const failures = events.filter((e) => e.type === 'failed' && e.id === id);
        expect(failures.map((e) => e.type === 'failed' && [e.attempt, e.willRetry])).toEqual([
          [1, true],
          [2, true],
        ]);
        expect((await queue.failed()).map((j) => j.id)).not.toContain(id);
      }),
    );

    it(
      'a job that fails every attempt lands in the dead letter with its last error',
      withQueue(async (queue) => {
        const events: QueueEvent[] = [];
        queue.on((e) => events.push(e));
        let runs = 0;
        const worker = queue.work({
          broken: async (job: JobContext<{ n: number }>) => {
            runs++;
            throw new Error(`cannot decode item ${job.data.n} (attempt ${job.attempt})`);
          },
          fine: async () => 'fine',
        });
        const bad1 = await queue.add(
          'broken',
          { n: 1 },
          { attempts: 2, backoff: { type: 'fixed', delayMs: 50 } },
        );
        const good = await queue.add('fine', {});
        const bad2 = await queue.add('broken', { n: 2 }, { attempts: 1 });
        const orphan = await queue.add('nobody-handles-this', {}, { attempts: 1 });
        for (const { id } of [bad1, bad2, orphan])
          await until(
            () => queue.getJob(id),
            (j) => j?.state === 'failed',
          );
        await until(
          () => queue.getJob(good.id),
          (j) => j?.state === 'completed',
        );
        await worker.close();
        expect(runs).toBe(3);
        const dead = await queue.failed();
        expect(dead.map((j) => j.id).sort()).toEqual([bad1.id, bad2.id, orphan.id].sort());
        const one = dead.find((j) => j.id === bad1.id) as JobView;
        expect(one).toMatchObject({ state: 'failed', attemptsMade: 2, attempts: 2, data: { n: 1 } });
        expect(one.failedReason).toBe('cannot decode item 1 (attempt 2)');
        expect(dead.find((j) => j.id === orphan.id)?.failedReason).toMatch(
          /no handler.*nobody-handles-this/i,
        );
        expect(await queue.failed({ start: 0, end: 0 })).toHaveLength(1);
        expect(await queue.counts()).toMatchObject({
          failed: 3,
          completed: 1,
          waiting: 0,
          active: 0,
          delayed: 0,
        });
        const last = events.filter((e) => e.type === 'failed' && e.id === bad1.id);
        expect(last.map((e) => e.type === 'failed' && e.willRetry)).toEqual([true, false]);
      }),
    );

    it(
      'never runs more jobs at once than the worker concurrency (two workers: the sum)',
      withQueue(async (queue) => {
        let now = 0;
        let peak = 0;
        // Jobs hold until the worker(s) have `target` running (2 s at most), then work 60 ms: a worker
        // fetching its next job slower than one job's 60 ms (a loaded machine) cannot keep the peak short.
        let target = 3;
        let full = gate();
        const handlers = {
          slow: async () => {
            now++;
            peak = Math.max(peak, now);
            if (now >= target) full.open();
            let timer: NodeJS.Timeout | undefined;
            await Promise.race([full.promise, new Promise((r) => (timer = setTimeout(r, 2000)))]);
            clearTimeout(timer);
            await sleep(60);
            now--;
          },
        };
        const one = queue.work(handlers, { concurrency: 3 });
        const added = await queue.addBulk(
          Array.from({ length: 12 }, (_, i) => ({ name: 'slow', data: { i } })),
        );
        await until(
          () => queue.counts(),
          (c) => c.completed === 12,
        );
        expect(peak).toBe(3);
        await one.close();

        peak = 0;
        target = 4;
        full = gate();
        const two = [queue.work(handlers, { concurrency: 2 }), queue.work(handlers, { concurrency: 2 })];
        await queue.addBulk(Array.from({ length: 12 }, (_, i) => ({ name: 'slow', data: { i } })));
        await until(
          () => queue.counts(),
          (c) => c.completed === 24,
        );
        expect(peak).toBe(4);
        await Promise.all(two.map((w) => w.close()));
        expect(added).toHaveLength(12);
      }),
    );

    it(
      'getJob tells what a reconciliation needs: unknown (lost), dead letter (failed for good), waiting; an id in the dead letter cannot be added again',
      withQueue(async (queue) => {
        const worker = queue.work({
          doomed: async () => {
            throw new Error('out of luck');
          },
        });
        await queue.add('doomed', { n: 1 }, { jobId: 'sweep-dead', attempts: 2 });
        const dead = await until(
          () => queue.getJob('sweep-dead'),
          (j) => j?.state === 'failed',
        );
        expect(dead).toMatchObject({ attemptsMade: 2, attempts: 2, stalls: 0, failedReason: 'out of luck' });
        await worker.close();
        // Re-adding by id (what a sweep does for a job it thinks lost) must not revive a dead one.
        expect(await queue.add('doomed', { n: 2 }, { jobId: 'sweep-dead' })).toEqual({ id: 'sweep-dead' });
        expect(await queue.getJob('sweep-dead')).toMatchObject({ state: 'failed', data: { n: 1 } });
        expect(await queue.getJob('sweep-never-added')).toBeUndefined();
        await queue.add('doomed', {}, { jobId: 'sweep-waiting' });
        expect((await queue.getJob('sweep-waiting'))?.state).toBe('waiting');
        expect((await queue.failed()).map((j) => j.id)).toEqual(['sweep-dead']);
      }),
    );

    it(
      'close() lets jobs in flight finish and takes no new ones',
      withQueue(async (queue) => {
        const started = gate();
        const release = gate();
        let finished = false;
        const worker = queue.work({
          slow: async () => {
            started.open();
            // Held until the test has called close(): the job is certainly in flight then.
            await release.promise;
            finished = true;
            return 'finished';
          },
        });
        const first = await queue.add('slow', {});
        await started.promise;
        expect(worker.running).toBe(1);
        let closed = false;
        const closing = worker.close({ timeoutMs: 60_000 }).then(() => {
          closed = true;
        });
        // A round trip to the backend: time for a close() that did not wait to have returned.
        await queue.counts();
        expect(closed).toBe(false);
        release.open();
        await closing;
        // close() returned only once the job in flight had finished (an order, not a 300 ms stopwatch).
        expect(finished).toBe(true);
        expect(worker.running).toBe(0);
        expect(await queue.getJob(first.id)).toMatchObject({ state: 'completed', result: 'finished' });
        // A job added after close() is left for others: the next worker gets it, the closed one never
        // runs it (was: still waiting after a fixed 300 ms).
        const later = await queue.add('slow', {});
        expect((await queue.getJob(later.id))?.state).toBe('waiting');
        const next = queue.work({ slow: async () => 'the next worker' });
        const taken = await until(
          () => queue.getJob(later.id),
          (j) => j?.state === 'completed',
        );
        await next.close();
        expect(taken?.result).toBe('the next worker');
      }),
    );

    it(
      'close() past its grace period aborts the job and returns it to the queue without spending an attempt',
      withQueue(async (queue) => {
        const started = gate();
        let sawAbort = false;
        const stubborn = queue.work({
          long: async (job) => {
            started.open();
            await new Promise<void>((resolve) => job.signal.addEventListener('abort', () => resolve()));
            sawAbort = true;
            throw new Error('interrupted');
          },
        });
        const { id } = await queue.add('long', { x: 1 }, { attempts: 1 });
        await started.promise;
        await stubborn.close({ timeoutMs: 200 });
        expect(sawAbort).toBe(true);
        const back = await queue.getJob(id);
        // Given back, not stalled: no attempt spent and no stall counted against the job.
        expect(back).toMatchObject({ state: 'waiting', attemptsMade: 0, stalls: 0 });
        // Another worker (another process, in production) finishes it on its one attempt.
        const next = queue.work({ long: async (job) => `done on attempt ${job.attempt}` });
        const done = await until(
          () => queue.getJob(id),
          (j) => j?.state === 'completed',
        );
        expect(done?.result).toBe('done on attempt 1');
        await next.close();
      }),
    );
  });
}

export function gate() {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const isObject = (v: unknown) => typeof v === 'object' && v !== null;

/** Poll until `ok` holds (jobs run asynchronously, and on BullMQ in another connection). */
export async function until<T>(
  read: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`Timed out after ${timeoutMs} ms; last value: ${JSON.stringify(value)}`);
    await sleep(25);
  }
}
