import { createEngine, type Engine } from '@compresso/engine';
import {
  type BlobStore,
  type Config,
  type Database,
  type JobQueue,
  type Logger,
  type QueueWorker,
  startProcess,
} from '@compresso/runtime';
import { batchHandlers, batchItemJob } from './batch.ts';
import { type BatchSweeper, startBatchSweeper } from './sweep.ts';

export interface BatchWorkerDeps {
  queue: JobQueue;
  db: Database;
  blobs: BlobStore;
  engine: Engine;
  logger: Logger;
  config: Config;
  /** Items worked on at once. */
  concurrency: number;
}

/** Take batch items from the queue in this process. */
export function startBatchWorker(deps: BatchWorkerDeps): QueueWorker {
  const { queue, db, blobs, engine, logger, config, concurrency } = deps;
  return queue.work(
    batchHandlers({
      db,
      blobs,
      engine,
      logger,
      attempts: config.jobAttempts,
      fetchLimits: {
        allowPrivate: config.fetchAllowPrivate,
        timeoutMs: config.fetchTimeoutMs,
        maxBytes: config.maxUploadBytes,
      },
    }),
    { concurrency },
  );
}

/**
 * The in-process queue forgets its jobs when the process ends, but the database remembers which
 * items are still queued: enqueue them again at start (the job ids are deterministic, so an item
 * already in the queue is not added twice, and a finished item is skipped by the handler).
 */
export async function requeueQueuedItems(db: Database, queue: JobQueue, logger: Logger): Promise<number> {
  // One page is plenty for an embedded install; a larger backlog is picked up at the next start.
  const queued = await db.listQueuedBatchItems(10_000);
  if (!queued.length) return 0;
  await queue.addBulk(queued.map(({ batchId, index }) => batchItemJob(batchId, index)));
  logger.info({ items: queued.length }, 'batch items still queued were handed back to the in-process queue');
  return queued.length;
}

/**
 * The reconciliation sweep (see sweep.ts) of a process that runs batch workers: once now, then every
 * COMPRESSO_JOB_SWEEP_MS; batches younger than that are left alone.
 */
export function startSweeper(deps: {
  db: Database;
  queue: JobQueue;
  logger: Logger;
  config: Pick<Config, 'jobSweepMs'>;
}): BatchSweeper {
  const { db, queue, logger, config } = deps;
  return startBatchSweeper({ db, queue, logger, intervalMs: config.jobSweepMs, graceMs: config.jobSweepMs });
}

/** Log queue connection trouble once per change, not once per reconnect attempt. */
export function logQueueErrors(queue: JobQueue, logger: Logger): () => void {
  let last = '';
  let lastAt = 0;
  return queue.on((event) => {
    if (event.type !== 'error') return;
    const now = Date.now();
    if (event.error === last && now - lastAt < 10_000) return;
    last = event.error;
    lastAt = now;
    logger.warn(
      { error: event.error, queue: queue.name },
      'job queue connection problem (workers keep retrying)',
    );
  });
}

export interface RunningWorker {
  config: Config;
  queue: JobQueue;
  worker: QueueWorker;
  sweeper: BatchSweeper;
  close(): Promise<void>;
}

export interface StartWorkerOptions {
  env?: Record<string, string | undefined>;
  overrides?: Partial<Config>;
  logger?: Logger;
  /** Items at once (default: COMPRESSO_WORKER_CONCURRENCY). */
  concurrency?: number;
  handleSignals?: boolean;
}

/**
 * A worker process (`compresso worker`): batch items from the shared queue, no HTTP. Needs REDIS_URL
 * — with the in-process queue there is nobody to share jobs with — and the same database and blob
 * store as the API processes.
 */
export async function startWorker(options: StartWorkerOptions = {}): Promise<RunningWorker> {
  const running = await startProcess({
    name: 'worker',
    ...(options.env ? { env: options.env } : {}),
    ...(options.overrides ? { overrides: options.overrides } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    handleSignals: options.handleSignals !== false,
    messages: { closing: 'worker shutting down: finishing items in flight', closed: 'worker stopped' },
    checkConfig(config) {
      if (!config.redisUrl) {
        throw new Error(
          'compresso worker needs REDIS_URL: without it jobs live inside each `compresso serve` process, which runs them itself (see --workers).',
        );
      }
    },
    async start({ config, logger, db, queue, blobs, onClose }) {
      const engine = createEngine({
        limits: { maxInputBytes: config.maxUploadBytes },
        ...(config.concurrency ? { concurrency: config.concurrency } : {}),
        memoryBudget: config.memoryBudgetMiB * 1024 * 1024,
      });
      onClose('engine', () => engine.close());
      onClose('queue log', logQueueErrors(queue, logger));
      const concurrency = options.concurrency ?? config.workerConcurrency;
      const worker = startBatchWorker({ queue, db, blobs, engine, logger, config, concurrency });
      // Items still running after the grace period go back to the queue for another worker.
      onClose('batch worker', () => worker.close({ timeoutMs: config.shutdownTimeoutMs }));
      const sweeper = startSweeper({ db, queue, logger, config });
      onClose('batch sweep', () => sweeper.close());
      logger.info(
        {
          queue: queue.name,
          concurrency,
          database: db.kind,
          blobs: blobs.kind,
          // Where originals are read from: a worker must share it with the API processes, and a wrong
          // directory otherwise shows only as items failing one by one.
          blob_location: config.s3Bucket ? `s3://${config.s3Bucket}` : config.blobDir,
          engine: engine.stats(),
        },
        'compresso worker started',
      );
      return { worker, sweeper };
    },
  });
  const { config, queue, app, close } = running;
  return { config, queue, worker: app.worker, sweeper: app.sweeper, close };
}
