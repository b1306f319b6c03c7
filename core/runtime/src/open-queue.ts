import type { Config } from './config.ts';
import { inlineQueue } from './inline-queue.ts';
import type { JobQueue } from './queue.ts';

export interface OpenQueueOptions {
  /** Queue name (default `compresso`); one install may run several queues (jobs, shopify …). */
  name?: string;
  /** Default grace of worker.close() (default: the config's shutdownTimeoutMs). */
  closeTimeoutMs?: number;
}

/**
 * The queue the configuration asks for. With REDIS_URL: BullMQ, so API processes and worker
 * processes share the jobs. Without it: the in-process queue (jobs run in this process, lost when
 * it ends). BullMQ and ioredis are loaded only in the first case.
 */
export async function openQueue(
  config: Pick<
    Config,
    | 'redisUrl'
    | 'queuePrefix'
    | 'workerConcurrency'
    | 'jobAttempts'
    | 'jobBackoffMs'
    | 'jobLockMs'
    | 'shutdownTimeoutMs'
  >,
  options: OpenQueueOptions = {},
): Promise<JobQueue> {
  const common = {
    ...(options.name ? { name: options.name } : {}),
    attempts: config.jobAttempts,
    backoff: { type: 'exponential' as const, delayMs: config.jobBackoffMs },
    concurrency: config.workerConcurrency,
    closeTimeoutMs: options.closeTimeoutMs ?? config.shutdownTimeoutMs,
  };
  if (!config.redisUrl) return inlineQueue(common);
  let bullmqQueue: typeof import('./bullmq-queue.ts').bullmqQueue;
  try {
    ({ bullmqQueue } = await import('./bullmq-queue.ts'));
  } catch (error) {
    throw new Error(
      `REDIS_URL is set, so the job queue needs the bullmq and ioredis packages: npm install bullmq ioredis (${(error as Error).message})`,
      { cause: error },
    );
  }
  return bullmqQueue({
    ...common,
    url: config.redisUrl,
    prefix: config.queuePrefix,
    lockDurationMs: config.jobLockMs,
  });
}
