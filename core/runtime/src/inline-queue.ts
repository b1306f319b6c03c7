import { randomUUID } from 'node:crypto';
import { CompressoError } from '@compresso/schema';
import {
  type AddJobOptions,
  backoffDelay,
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
  type QueueCounts,
  type QueueEvent,
  type QueueWorker,
  type WorkOptions,
} from './queue.ts';

export interface InlineQueueOptions {
  /** For logs and metrics (default `compresso`). */
  name?: string;
  /** Default runs per job (3). */
  attempts?: number;
  /** Default wait between runs (exponential from 1 s). */
  backoff?: JobBackoff;
  /** Default jobs at once per worker (1). */
  concurrency?: number;
  /** Finished jobs kept for getJob, oldest forgotten first (1000 completed, 1000 failed). */
  keepCompleted?: number;
  keepFailed?: number;
  /** Default grace of worker.close() and queue.close() (30 s). */
  closeTimeoutMs?: number;
}

interface InlineJob {
  id: string;
  name: string;
  data: unknown;
  state: JobState;
  attemptsMade: number;
  attempts: number;
  backoff: JobBackoff;
  progress: JobProgress;
  result?: unknown;
  failedReason?: string;
  createdAt: number;
  processedAt?: number;
  finishedAt?: number;
  /** Changes with every run: a run that was given up on (close timeout) cannot touch the job later. */
  token: number;
  timer?: NodeJS.Timeout;
}

/** JSON in, JSON out — what crossing Redis does to data, so both backends hand handlers the same values. */
const json = <T>(value: T): T => (value === undefined ? value : JSON.parse(JSON.stringify(value)));

/**
 * The embedded queue: jobs live in this process's memory and run in it. Bounded concurrency per
 * worker, retries with backoff, ids, progress and a dead letter like the BullMQ backend — but nothing
 * survives a restart: jobs waiting, running or in the dead letter are lost when the process ends.
 * That is the price of "no servers"; set REDIS_URL when jobs must outlive the process or be shared
 * by several. (Persisting into SQLite would not buy much: a job's inputs and the worker that runs it
 * die with the process anyway.)
 */
export function inlineQueue(options: InlineQueueOptions = {}): JobQueue {
  const name = options.name ?? 'compresso';
  const defaults = {
    attempts: options.attempts ?? QUEUE_DEFAULTS.attempts,
    backoff: options.backoff ?? QUEUE_DEFAULTS.backoff,
    concurrency: options.concurrency ?? QUEUE_DEFAULTS.concurrency,
    closeTimeoutMs: options.closeTimeoutMs ?? QUEUE_DEFAULTS.closeTimeoutMs,
  };
  const keep = { completed: options.keepCompleted ?? 1000, failed: options.keepFailed ?? 1000 };
  const jobs = new Map<string, InlineJob>();
  const waiting: InlineJob[] = [];
  /** Finished ids in the order they finished, per state, for retention and the dead-letter order. */
  const finished = { completed: [] as string[], failed: [] as string[] };
  const listeners = new Set<(event: QueueEvent) => void>();
  const workers = new Set<InlineWorker>();
  let closed = false;
  let tokens = 0;

  const emit = (event: QueueEvent) => {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch {
        // A metrics listener that throws must not break job processing.
      }
    }
  };

  const ensureOpen = () => {
    if (closed) throw new CompressoError('SERVICE_UNAVAILABLE', `The job queue "${name}" is closed.`);
  };

  const finish = (job: InlineJob, state: 'completed' | 'failed') => {
    job.state = state;
    job.finishedAt = Date.now();
    const list = finished[state];
    list.push(job.id);
    while (list.length > keep[state]) jobs.delete(list.shift() as string);
  };

  const pump = () => {
    for (const worker of workers) worker.pump();
  };

  const toWaiting = (job: InlineJob) => {
    job.state = 'waiting';
    waiting.push(job);
    pump();
  };

  const addOne = (jobName: string, data: unknown, opts: AddJobOptions = {}): { id: string } => {
    if (opts.jobId !== undefined) {
      checkJobId(opts.jobId);
      if (jobs.has(opts.jobId)) return { id: opts.jobId };
    }
    const attempts = opts.attempts ?? defaults.attempts;
    if (!Number.isInteger(attempts) || attempts < 1) {
      throw new TypeError(`attempts: expected a whole number of at least 1 (received ${attempts})`);
    }
    const job: InlineJob = {
      id: opts.jobId ?? randomUUID(),
      name: jobName,
      data: json(data),
      state: 'waiting',
      attemptsMade: 0,
      attempts,
      backoff: opts.backoff ?? defaults.backoff,
      progress: 0,
      createdAt: Date.now(),
      token: 0,
    };
    if (opts.delayMs !== undefined) checkDelay(opts.delayMs);
    jobs.set(job.id, job);
    if (opts.delayMs) {
      job.state = 'delayed';
      job.timer = setTimeout(() => {
        job.timer = undefined;
        if (!closed) toWaiting(job);
      }, opts.delayMs);
    } else {
      waiting.push(job);
    }
    return { id: job.id };
  };

  class InlineWorker implements QueueWorker {
    readonly #handlers: JobHandlers;
    readonly #concurrency: number;
    readonly #inFlight = new Map<
      InlineJob,
      { promise: Promise<void>; abort: AbortController; token: number }
    >();
    #closing: Promise<void> | undefined;

    constructor(handlers: JobHandlers, concurrency: number) {
      this.#handlers = handlers;
      this.#concurrency = concurrency;
    }

    get running() {
      return this.#inFlight.size;
    }

    pump() {
      while (!this.#closing && this.#inFlight.size < this.#concurrency && waiting.length > 0) {
        this.#run(waiting.shift() as InlineJob);
      }
    }

    #run(job: InlineJob) {
      const token = ++tokens;
      const abort = new AbortController();
      job.token = token;
      job.state = 'active';
      job.processedAt = Date.now();
      const attempt = job.attemptsMade + 1;
      const started = performance.now();
      const current = () => job.token === token && jobs.get(job.id) === job;
      emit({ type: 'active', id: job.id, name: job.name, attempt });
      const handler = Object.hasOwn(this.#handlers, job.name) ? this.#handlers[job.name] : undefined;
      const flight = { promise: Promise.resolve(), abort, token };
      // Registered before the run starts: a run that fails at once must find its own entry to delete.
      this.#inFlight.set(job, flight);
      flight.promise = (async () => {
        await undefined; // the handler runs after this call returns, as a BullMQ handler does
        try {
          if (!handler) throw new Error(`No handler for jobs named "${job.name}" in this worker.`);
          const result = await handler({
            id: job.id,
            name: job.name,
            data: json(job.data),
            attempt,
            signal: abort.signal,
            updateProgress: async (progress) => {
              if (current()) job.progress = json(progress);
            },
          });
          if (!current()) return;
          job.attemptsMade = attempt;
          job.result = json(result);
          finish(job, 'completed');
          emit({
            type: 'completed',
            id: job.id,
            name: job.name,
            attempt,
            durationMs: performance.now() - started,
          });
        } catch (error) {
          if (!current()) return;
          job.attemptsMade = attempt;
          job.failedReason = error instanceof Error ? error.message : String(error);
          const willRetry = attempt < job.attempts;
          emit({
            type: 'failed',
            id: job.id,
            name: job.name,
            attempt,
            durationMs: performance.now() - started,
            error: job.failedReason,
            willRetry,
          });
          if (!willRetry) {
            finish(job, 'failed');
          } else {
            job.state = 'delayed';
            job.timer = setTimeout(
              () => {
                job.timer = undefined;
                if (current() && !closed) toWaiting(job);
              },
              backoffDelay(job.backoff, attempt),
            );
          }
        } finally {
          this.#inFlight.delete(job);
          // Next job on the next tick: a handler that fails synchronously cannot starve the event loop.
          setImmediate(pump);
        }
      })();
    }

    close(options: CloseWorkerOptions = {}): Promise<void> {
      this.#closing ??= (async () => {
        const timeoutMs = options.timeoutMs ?? defaults.closeTimeoutMs;
        const all = Promise.allSettled([...this.#inFlight.values()].map((f) => f.promise));
        let timer: NodeJS.Timeout | undefined;
        const timedOut = await Promise.race([
          all.then(() => false),
          new Promise<boolean>((resolve) => {
            timer = setTimeout(() => resolve(true), timeoutMs);
          }),
        ]);
        clearTimeout(timer);
        if (timedOut) {
          // Give the stragglers back without spending an attempt; their late outcome is ignored (token).
          for (const [job, flight] of this.#inFlight) {
            flight.abort.abort(new Error('The worker is shutting down.'));
            if (job.token === flight.token && job.state === 'active') {
              job.token = ++tokens;
              this.#inFlight.delete(job);
              toWaiting(job);
            }
          }
        }
        workers.delete(this);
        pump();
      })();
      return this.#closing;
    }
  }

  const view = (job: InlineJob): JobView => {
    const out: JobView = {
      id: job.id,
      name: job.name,
      data: json(job.data),
      state: job.state,
      attemptsMade: job.attemptsMade,
      attempts: job.attempts,
      stalls: 0,
      progress: json(job.progress),
      createdAt: job.createdAt,
    };
    if (job.result !== undefined) out.result = json(job.result);
    if (job.failedReason !== undefined) out.failedReason = job.failedReason;
    if (job.processedAt !== undefined) out.processedAt = job.processedAt;
    if (job.finishedAt !== undefined) out.finishedAt = job.finishedAt;
    return out;
  };

  return {
    kind: 'inline',
    name,

    async add(jobName, data, opts) {
      ensureOpen();
      const added = addOne(jobName, data, opts);
      pump();
      return added;
    },

    async addBulk(list) {
      ensureOpen();
      const ids = list.map((j) => addOne(j.name, j.data, j.options));
      pump();
      return ids;
    },

    async getJob<Data, Result>(id: string) {
      ensureOpen();
      const job = jobs.get(id);
      return job ? (view(job) as JobView<Data, Result>) : undefined;
    },

    async counts() {
      ensureOpen();
      const counts: QueueCounts = { waiting: 0, active: 0, delayed: 0, completed: 0, failed: 0 };
      for (const job of jobs.values()) counts[job.state]++;
      return counts;
    },

    async failed(range = {}) {
      ensureOpen();
      const start = range.start ?? QUEUE_DEFAULTS.failedRange.start;
      const end = range.end ?? QUEUE_DEFAULTS.failedRange.end;
      return [...finished.failed]
        .reverse()
        .slice(start, end + 1)
        .map((id) => view(jobs.get(id) as InlineJob));
    },

    work(handlers, opts: WorkOptions = {}) {
      ensureOpen();
      const concurrency = opts.concurrency ?? defaults.concurrency;
      if (!Number.isInteger(concurrency) || concurrency < 1) {
        throw new TypeError(`concurrency: expected a whole number of at least 1 (received ${concurrency})`);
      }
      const worker = new InlineWorker(handlers, concurrency);
      workers.add(worker);
      // Started on the next tick, like BullMQ's worker: the caller can attach listeners first.
      setImmediate(() => worker.pump());
      return worker;
    },

    on(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    async ping() {
      ensureOpen();
    },

    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([...workers].map((w) => w.close()));
      for (const job of jobs.values()) clearTimeout(job.timer);
      listeners.clear();
    },
  };
}
