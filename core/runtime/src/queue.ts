/**
 * The job queue port. Two backends: `inlineQueue()` (in this process, the embedded default) and
 * `bullmqQueue()` (BullMQ on Redis, chosen by REDIS_URL), so many worker processes share the work.
 * `test/conformance/queue.test.ts` is the battery every backend passes.
 *
 * Contract, whichever backend:
 * - Job data and results are JSON values: they cross a process boundary on Redis, so the inline
 *   backend copies them through JSON as well (a Date or a Buffer would differ between backends).
 * - A job id makes `add` idempotent: adding an id that exists returns that job and changes nothing,
 *   so a producer that retries after a timeout never enqueues the work twice.
 * - A handler may run more than once for one job (a retry, or a worker killed mid-job whose job is
 *   taken over by another): handlers must be idempotent, writing results under keys of their own.
 * - Producers fail fast: when the backend cannot be reached, `add`, `getJob`, `counts` and `failed`
 *   reject within about a second with a CompressoError `SERVICE_UNAVAILABLE`; they never hang.
 *   Workers wait: they reconnect and go on taking jobs when the backend is back.
 */

/** Where a job is. `delayed` is a job waiting out its backoff before the next attempt. */
export type JobState = 'waiting' | 'active' | 'completed' | 'failed' | 'delayed';

/** Delay before attempt n+1 (n ≥ 1 attempts made): fixed `delayMs`, or `delayMs · 2^(n-1)`. */
export interface JobBackoff {
  type: 'exponential' | 'fixed';
  delayMs: number;
}

export interface AddJobOptions {
  /** Makes add idempotent: an existing job with this id is returned unchanged. At most 200 characters, no ':'. */
  jobId?: string;
  /** Runs in all, the first included (default: the queue's, 3). */
  attempts?: number;
  /** Wait between attempts (default: the queue's, exponential from 1 s). */
  backoff?: JobBackoff;
  /**
   * Start no sooner than this many milliseconds from now (the job is `delayed` until then). For work
   * that must wait for a known time, e.g. a quota's reset. Whole number ≥ 0; 0 is "now".
   */
  delayMs?: number;
}

/** Checks `delayMs` (both backends). */
export function checkDelay(delayMs: number): void {
  if (!Number.isInteger(delayMs) || delayMs < 0) {
    throw new TypeError(`delayMs: expected a whole number of at least 0 (received ${delayMs})`);
  }
}

/** What one job looks like to a producer or an operator. Times are milliseconds since the epoch. */
export interface JobView<Data = unknown, Result = unknown> {
  id: string;
  /** The handler name it was added under. */
  name: string;
  data: Data;
  state: JobState;
  /** Attempts started and finished (succeeded or failed) so far. */
  attemptsMade: number;
  /** Attempts allowed in all. */
  attempts: number;
  /**
   * Times a worker died holding this job (its lock lapsed and the stalled-job check took it back). A
   * stall spends no attempt, but past the backend's limit the job fails for good without its handler
   * running again — the one way into the dead letter that no handler sees. Always 0 inline, where
   * the worker cannot die without the queue.
   */
  stalls: number;
  /** The last value the handler reported through updateProgress (0 before any). */
  progress: JobProgress;
  /** The handler's return value, once completed. */
  result?: Result;
  /** The last error message, once an attempt failed. */
  failedReason?: string;
  createdAt: number;
  /** When the current or last attempt started. */
  processedAt?: number;
  /** When the job completed or failed for good. */
  finishedAt?: number;
}

/** A percentage or any JSON object (e.g. `{ done: 12, total: 200 }`). */
export type JobProgress = number | Record<string, unknown>;

/** What a handler gets for one attempt of one job. */
export interface JobContext<Data = unknown> {
  id: string;
  name: string;
  data: Data;
  /** 1 for the first attempt. */
  attempt: number;
  /**
   * Aborted when the worker is closing and its grace period is over: stop soon and throw; the job is
   * not counted as failed and runs again later (on this or another worker).
   */
  signal: AbortSignal;
  updateProgress(progress: JobProgress): Promise<void>;
}

export type JobHandler<Data = unknown, Result = unknown> = (job: JobContext<Data>) => Promise<Result>;

// biome-ignore lint/suspicious/noExplicitAny: handlers of different data types live in one map
export type JobHandlers = Record<string, JobHandler<any, any>>;

export interface WorkOptions {
  /** Jobs this worker runs at once (default: the queue's, 1). */
  concurrency?: number;
}

export interface CloseWorkerOptions {
  /**
   * Longest wait for jobs in flight to finish (default 30 s). After it their signal is aborted and they
   * go back to the queue (inline: to waiting at once; BullMQ: their lock lapses and the stalled-job
   * check gives them to another worker), without spending an attempt.
   */
  timeoutMs?: number;
}

/** A running set of handlers taking jobs from the queue. */
export interface QueueWorker {
  /** Jobs running now in this worker. */
  readonly running: number;
  /** Stop taking jobs, let those in flight finish (or return them, see timeoutMs); idempotent. */
  close(options?: CloseWorkerOptions): Promise<void>;
}

export interface QueueCounts {
  waiting: number;
  active: number;
  delayed: number;
  completed: number;
  failed: number;
}

/**
 * What this process's workers did, for metrics and logs. Emitted by workers started with `work()` on
 * this queue object (queue-wide depth comes from `counts()`). `completed` and `failed` are told once
 * the job's state has that end, so a listener that then reads the job (getJob) finds it so; with
 * BullMQ, a run whose end Redis refuses (its lock lapsed and the stalled-job check gave the job out
 * again) tells neither.
 */
export type QueueEvent =
  | { type: 'active'; id: string; name: string; attempt: number }
  | { type: 'completed'; id: string; name: string; attempt: number; durationMs: number }
  | {
      type: 'failed';
      id: string;
      name: string;
      attempt: number;
      durationMs: number;
      error: string;
      /** False when this was the last attempt: the job is in the dead letter (`failed()`). */
      willRetry: boolean;
    }
  /** The backend connection failed (workers keep retrying; producers reject). */
  | { type: 'error'; error: string };

export interface JobQueue {
  readonly kind: 'inline' | 'bullmq';
  /** The queue's name (BullMQ: the Redis key part after the prefix). */
  readonly name: string;

  add<Data>(name: string, data: Data, options?: AddJobOptions): Promise<{ id: string }>;
  /** Several jobs in one round trip; ids in the order given (an existing jobId gives the existing job). */
  addBulk(
    jobs: ReadonlyArray<{ name: string; data: unknown; options?: AddJobOptions }>,
  ): Promise<{ id: string }[]>;
  getJob<Data = unknown, Result = unknown>(id: string): Promise<JobView<Data, Result> | undefined>;
  counts(): Promise<QueueCounts>;
  /**
   * The dead letter: jobs that failed for good (every attempt spent), newest first; `start`/`end` are
   * inclusive indexes into that list (default 0..99).
   */
  failed(range?: { start?: number; end?: number }): Promise<JobView[]>;
  /** Start taking jobs with these handlers (by job name); a job with no handler here fails. */
  work(handlers: JobHandlers, options?: WorkOptions): QueueWorker;
  /** Listen to this process's worker events; returns the function that stops listening. */
  on(listener: (event: QueueEvent) => void): () => void;
  /** Cheap round trip proving the backend answers (for /readyz); rejects SERVICE_UNAVAILABLE. */
  ping(): Promise<void>;
  /** Close every worker of this queue (with their default grace) and the connections; idempotent. */
  close(): Promise<void>;
}

/** Defaults shared by both backends. */
export const QUEUE_DEFAULTS = {
  attempts: 3,
  backoff: { type: 'exponential', delayMs: 1000 } as JobBackoff,
  concurrency: 1,
  closeTimeoutMs: 30_000,
  failedRange: { start: 0, end: 99 },
} as const;

/** The wait before attempt `attemptsMade + 1`. */
export function backoffDelay(backoff: JobBackoff, attemptsMade: number): number {
  if (backoff.type === 'fixed') return backoff.delayMs;
  return backoff.delayMs * 2 ** Math.max(0, attemptsMade - 1);
}

/** Job ids: BullMQ reserves ':' in keys and all-digit ids for its own counters. */
export function checkJobId(id: string): void {
  if (typeof id !== 'string' || id.length === 0 || id.length > 200 || id.includes(':') || /^\d+$/.test(id)) {
    throw new TypeError(
      `jobId: expected 1 to 200 characters, not only digits, without ':' (received ${JSON.stringify(String(id).slice(0, 100))})`,
    );
  }
}
