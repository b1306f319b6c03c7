import { CompressoError } from '@compresso/schema';
import { type Job, type JobsOptions, Queue, WaitingError, Worker } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import {
  type AddJobOptions,
  type CloseWorkerOptions,
  checkDelay,
  checkJobId,
  type JobBackoff,
  type JobHandlers,
  type JobProgress,
  type JobQueue,
  type JobState,
  type JobView,
  QUEUE_DEFAULTS,
  type QueueEvent,
  type QueueWorker,
  type WorkOptions,
} from './queue.ts';

export interface BullmqQueueOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://…` (REDIS_URL). */
  url: string;
  /** Extra ioredis options for every connection (TLS files, a connection name …). */
  redisOptions?: Partial<RedisOptions>;
  /** Queue name, the Redis key part after the prefix (default `compresso`). */
  name?: string;
  /** Start of every key (default `compresso`): several installs or test runs can share one Redis. */
  prefix?: string;
  /** Default runs per job (3). */
  attempts?: number;
  /** Default wait between runs (exponential from 1 s). */
  backoff?: JobBackoff;
  /** Default jobs at once per worker (1). */
  concurrency?: number;
  /** Default grace of worker.close() and queue.close() (30 s). */
  closeTimeoutMs?: number;
  /**
   * How long a worker's claim on a job lasts without renewal (default 30 s, BullMQ's). A live worker
   * renews it every half of this; a killed one's jobs are found by the stalled-job check (every
   * `stalledIntervalMs`, default the same) and given to another worker, so takeover needs up to
   * about lock + interval. Tests use 1–2 s.
   */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  /**
   * Times a job may be found stalled (its worker died) before it fails for good (default 2). A
   * limit is needed: an input that kills its worker every time (out of memory) must end in the dead
   * letter, not crash workers forever.
   */
  maxStalledCount?: number;
  /** Longest a producer call waits for Redis before SERVICE_UNAVAILABLE (default 1500 ms). */
  producerTimeoutMs?: number;
  /** Finished jobs kept for getJob: completed for a day (at most 10 000), failed for 7 days. */
  keepCompleted?: { ageSeconds: number; count: number };
  keepFailedSeconds?: number;
}

const STATE: Record<string, JobState | undefined> = {
  waiting: 'waiting',
  prioritized: 'waiting',
  'waiting-children': 'waiting',
  active: 'active',
  delayed: 'delayed',
  completed: 'completed',
  failed: 'failed',
};

/**
 * True when `work` settled within `ms` (its rejection counts as settled and is swallowed: callers use
 * this only where the outcome no longer matters, during shutdown).
 */
async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = work.then(
    () => true,
    () => true,
  );
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(resolve, ms, false);
  });
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A password in a Redis URL must not reach an error message or a log. */
const safeUrl = (url: string) => url.replace(/(\/\/[^/@:\s]*):[^/@\s]*@/g, '$1:***@');

/**
 * BullMQ on Redis: jobs outlive processes and many worker processes share them. Producers (the API
 * processes) use their own connection that fails fast — no offline queue, one try per command, a
 * bounded wait — so an API request gets a quick 503 while Redis is down instead of hanging. Workers
 * use BullMQ's blocking connections, which retry for ever (`maxRetriesPerRequest: null`) and pick
 * up again when Redis is back.
 */
export function bullmqQueue(options: BullmqQueueOptions): JobQueue {
  const name = options.name ?? 'compresso';
  const prefix = options.prefix ?? 'compresso';
  const producerTimeoutMs = options.producerTimeoutMs ?? 1500;
  const defaults = {
    attempts: options.attempts ?? QUEUE_DEFAULTS.attempts,
    backoff: options.backoff ?? QUEUE_DEFAULTS.backoff,
    concurrency: options.concurrency ?? QUEUE_DEFAULTS.concurrency,
    closeTimeoutMs: options.closeTimeoutMs ?? QUEUE_DEFAULTS.closeTimeoutMs,
  };
  const lockDuration = options.lockDurationMs ?? 30_000;
  const keepCompleted = options.keepCompleted ?? { ageSeconds: 24 * 3600, count: 10_000 };
  const keepFailedSeconds = options.keepFailedSeconds ?? 7 * 24 * 3600;
  // Reconnect quickly after a Redis restart (ioredis' default waits up to 20 s between tries here).
  const retryStrategy = (times: number) => Math.min(100 * times, 2000);

  const listeners = new Set<(event: QueueEvent) => void>();
  const emit = (event: QueueEvent) => {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch {
        // A metrics listener that throws must not break job processing.
      }
    }
  };
  let lastError = '';
  const onError = (error: Error) => {
    // ioredis repeats the same refusal on every reconnect try; report each cause once.
    if (error.message === lastError) return;
    lastError = error.message;
    emit({ type: 'error', error: error.message });
  };

  const producer = new Redis(options.url, {
    ...options.redisOptions,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: producerTimeoutMs,
    commandTimeout: producerTimeoutMs,
    retryStrategy,
  });
  producer.on('error', onError);
  producer.on('ready', () => {
    lastError = '';
  });
  const queue = new Queue(name, {
    connection: producer,
    prefix,
    defaultJobOptions: {
      attempts: defaults.attempts,
      backoff: { type: defaults.backoff.type, delay: defaults.backoff.delayMs },
      removeOnComplete: { age: keepCompleted.ageSeconds, count: keepCompleted.count },
      removeOnFail: { age: keepFailedSeconds },
    },
  });
  queue.on('error', onError);

  let closed = false;
  const workers = new Set<BullWorker>();

  const unavailable = (why: string, cause?: unknown) =>
    new CompressoError(
      'SERVICE_UNAVAILABLE',
      `The job queue is unavailable (Redis at ${safeUrl(options.url)}): ${why}`,
      {
        cause,
      },
    );

  /**
   * Connected, or about to be: a first connection still being made gets up to producerTimeoutMs.
   * Once a try has failed (Redis down or restarting) the answer is immediate.
   */
  const waitReady = () =>
    new Promise<void>((resolve, reject) => {
      if (producer.status === 'ready') return resolve();
      let timer: NodeJS.Timeout | undefined;
      function cleanup() {
        clearTimeout(timer);
        producer.off('ready', ready);
        producer.off('error', down);
      }
      function down() {
        cleanup();
        reject(unavailable(`not connected (${lastError || producer.status}); try again later`));
      }
      function ready() {
        cleanup();
        resolve();
      }
      if (producer.status === 'reconnecting' || producer.status === 'end' || producer.status === 'close')
        return down();
      timer = setTimeout(down, producerTimeoutMs);
      producer.once('ready', ready);
      producer.once('error', down);
    });

  /** Every producer call: connected within the bound, answered within the bound, or SERVICE_UNAVAILABLE. */
  async function call<T>(work: () => Promise<T>): Promise<T> {
    if (closed) throw unavailable('the queue is closed');
    await waitReady();
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        work(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(unavailable('no answer in time')), producerTimeoutMs);
        }),
      ]);
    } catch (error) {
      if (error instanceof CompressoError) throw error;
      throw unavailable((error as Error).message, error);
    } finally {
      clearTimeout(timer);
    }
  }

  const jobOptions = (opts: AddJobOptions = {}): JobsOptions => {
    const out: JobsOptions = {};
    if (opts.jobId !== undefined) {
      checkJobId(opts.jobId);
      out.jobId = opts.jobId;
    }
    if (opts.attempts !== undefined) {
      if (!Number.isInteger(opts.attempts) || opts.attempts < 1) {
        throw new TypeError(`attempts: expected a whole number of at least 1 (received ${opts.attempts})`);
      }
      out.attempts = opts.attempts;
    }
    if (opts.backoff) out.backoff = { type: opts.backoff.type, delay: opts.backoff.delayMs };
    if (opts.delayMs !== undefined) {
      checkDelay(opts.delayMs);
      if (opts.delayMs > 0) out.delay = opts.delayMs;
    }
    return out;
  };

  /**
   * A job's view. The state is read before the job's hash: a job finishing in between then shows its
   * result with a state one step behind, never "completed" without its result.
   */
  const view = async (id: string, known?: Job): Promise<JobView | undefined> => {
    const state = STATE[await queue.getJobState(id)];
    const job = known ?? ((await queue.getJob(id)) as Job | undefined);
    if (!state || !job || job.id === undefined) return undefined;
    const out: JobView = {
      id: job.id,
      name: job.name,
      data: job.data,
      state,
      attemptsMade: job.attemptsMade,
      attempts: job.opts.attempts ?? 1,
      stalls: job.stalledCounter ?? 0,
      progress: job.progress as JobProgress,
      createdAt: job.timestamp,
    };
    if (state === 'completed') out.result = job.returnvalue;
    if (job.failedReason) out.failedReason = job.failedReason;
    if (job.processedOn) out.processedAt = job.processedOn;
    if (job.finishedOn) out.finishedAt = job.finishedOn;
    return out;
  };

  class BullWorker implements QueueWorker {
    readonly #worker: Worker;
    readonly #inFlight = new Map<string, AbortController>();
    /**
     * A run's `completed`/`failed` event, told once BullMQ has recorded that end in Redis (its own
     * event), so a listener that then reads the job (getJob) sees it ended. A run whose end BullMQ
     * refuses (its lock lapsed: the stalled-job check gave the job out again) tells nothing.
     */
    readonly #ended = new Map<string, QueueEvent>();
    #closing: Promise<void> | undefined;

    constructor(handlers: JobHandlers, concurrency: number) {
      this.#worker = new Worker(
        name,
        async (job: Job, token?: string, signal?: AbortSignal) => {
          const id = job.id as string;
          const attempt = job.attemptsMade + 1;
          const attempts = job.opts.attempts ?? 1;
          const giveBack = new AbortController();
          this.#inFlight.set(id, giveBack);
          this.#ended.delete(id);
          const started = performance.now();
          emit({ type: 'active', id, name: job.name, attempt });
          try {
            const handler = Object.hasOwn(handlers, job.name) ? handlers[job.name] : undefined;
            const given = new Promise<'given back'>((resolve) =>
              giveBack.signal.addEventListener('abort', () => resolve('given back'), { once: true }),
            );
            const run = (async () => {
              if (!handler) throw new Error(`No handler for jobs named "${job.name}" in this worker.`);
              return handler({
                id,
                name: job.name,
                data: job.data,
                attempt,
                signal: signal ? AbortSignal.any([giveBack.signal, signal]) : giveBack.signal,
                updateProgress: (progress) => job.updateProgress(progress),
              });
            })();
            let outcome: { ok: true; value: unknown } | { ok: false; error: unknown } | 'given back';
            try {
              outcome = await Promise.race([run.then((value) => ({ ok: true as const, value })), given]);
            } catch (error) {
              outcome = { ok: false, error };
            }
            if (outcome === 'given back' || giveBack.signal.aborted) {
              run.catch(() => {}); // its late outcome no longer matters
              // Back to waiting without spending an attempt; if Redis is gone too, the lock lapses
              // and the stalled-job check does the same a little later.
              await within(job.moveToWait(token), producerTimeoutMs);
              throw new WaitingError();
            }
            const durationMs = performance.now() - started;
            if (outcome.ok) {
              this.#ended.set(id, { type: 'completed', id, name: job.name, attempt, durationMs });
              return outcome.value;
            }
            const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
            this.#ended.set(id, {
              type: 'failed',
              id,
              name: job.name,
              attempt,
              durationMs,
              error: message,
              willRetry: attempt < attempts,
            });
            throw outcome.error instanceof Error ? outcome.error : new Error(message);
          } finally {
            this.#inFlight.delete(id);
          }
        },
        {
          connection: {
            ...options.redisOptions,
            url: options.url,
            maxRetriesPerRequest: null,
            retryStrategy,
          },
          prefix,
          concurrency,
          lockDuration,
          stalledInterval: options.stalledIntervalMs ?? lockDuration,
          maxStalledCount: options.maxStalledCount ?? 2,
          removeOnComplete: { age: keepCompleted.ageSeconds, count: keepCompleted.count },
          removeOnFail: { age: keepFailedSeconds },
        },
      );
      this.#worker.on('error', onError);
      const told = (job: Job | undefined) => {
        const id = job?.id;
        const event = id === undefined ? undefined : this.#ended.get(id);
        if (id === undefined || !event) return;
        this.#ended.delete(id);
        emit(event);
      };
      this.#worker.on('completed', told);
      this.#worker.on('failed', told);
    }

    get running() {
      return this.#inFlight.size;
    }

    close(opts: CloseWorkerOptions = {}): Promise<void> {
      this.#closing ??= (async () => {
        const timeoutMs = opts.timeoutMs ?? defaults.closeTimeoutMs;
        // Stops fetching, waits for the jobs in flight, then QUITs its connections — which, while
        // Redis is down, waits for ever (worker connections retry without end), hence the bounds.
        const closing = this.#worker.close().catch((error: Error) => onError(error));
        if (!(await within(closing, timeoutMs))) {
          for (const controller of this.#inFlight.values()) {
            controller.abort(new Error('The worker is shutting down.'));
          }
          // Giving back is one round trip per job (bounded too).
          if (!(await within(closing, producerTimeoutMs + 1000))) {
            // Redis is unreachable: drop the connections. Jobs not handed back keep their lock until
            // it lapses, then the stalled-job check gives them to another worker.
            await within(this.#worker.disconnect(), 1000);
            await within(closing, 1000);
          }
        }
        workers.delete(this);
      })();
      return this.#closing;
    }
  }

  return {
    kind: 'bullmq',
    name,

    async add(jobName, data, opts) {
      const jobOpts = jobOptions(opts);
      const job = await call(() => queue.add(jobName, data, jobOpts));
      return { id: job.id as string };
    },

    async addBulk(list) {
      const prepared = list.map((j) => ({ name: j.name, data: j.data, opts: jobOptions(j.options) }));
      const jobs = await call(() => queue.addBulk(prepared));
      return jobs.map((job) => ({ id: job.id as string }));
    },

    async getJob<Data, Result>(id: string) {
      return call(async () => {
        return (await view(id)) as JobView<Data, Result> | undefined;
      });
    },

    async counts() {
      const c = await call(() =>
        queue.getJobCounts(
          'waiting',
          'prioritized',
          'waiting-children',
          'active',
          'delayed',
          'completed',
          'failed',
        ),
      );
      const n = (k: string) => c[k] ?? 0;
      return {
        waiting: n('waiting') + n('prioritized') + n('waiting-children'),
        active: n('active'),
        delayed: n('delayed'),
        completed: n('completed'),
        failed: n('failed'),
      };
    },

    async failed(range = {}) {
      const start = range.start ?? QUEUE_DEFAULTS.failedRange.start;
      const end = range.end ?? QUEUE_DEFAULTS.failedRange.end;
      return call(async () => {
        const jobs = await queue.getFailed(start, end);
        const views = await Promise.all(jobs.map((job) => view(job.id as string, job as Job)));
        return views.filter((v): v is JobView => v !== undefined);
      });
    },

    work(handlers, opts: WorkOptions = {}) {
      if (closed) throw unavailable('the queue is closed');
      const concurrency = opts.concurrency ?? defaults.concurrency;
      if (!Number.isInteger(concurrency) || concurrency < 1) {
        throw new TypeError(`concurrency: expected a whole number of at least 1 (received ${concurrency})`);
      }
      const worker = new BullWorker(handlers, concurrency);
      workers.add(worker);
      return worker;
    },

    on(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    async ping() {
      await call(() => producer.ping());
    },

    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([...workers].map((w) => w.close()));
      // Bounded: closing waits for Redis, which may be the reason for the shutdown.
      await within(
        queue.close().catch(() => {}),
        producerTimeoutMs,
      );
      producer.disconnect();
      listeners.clear();
    },
  };
}
