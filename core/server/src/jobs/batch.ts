import { randomBytes } from 'node:crypto';
import type { Engine } from '@compresso/engine';
import type {
  BatchItemRecord,
  BatchRecord,
  BlobStore,
  Database,
  JobContext,
  JobHandlers,
  Logger,
} from '@compresso/runtime';
import {
  CompressoError,
  type InfoResult,
  isCompressoError,
  isErrorCode,
  MIME_TYPES,
  statusOf,
} from '@compresso/schema';
import { outputName } from '../compress-response.ts';
import { type FetchLimits, fetchUrl } from './url-fetch.ts';

/** The queue job of one batch item. The same queue carries other work under other names. */
export const BATCH_ITEM_JOB = 'batch-item';

export interface BatchItemJob {
  batchId: string;
  index: number;
}

export function newBatchId(): string {
  return `job_${randomBytes(9).toString('base64url')}`;
}

/** Deterministic, so enqueueing an item again (a retried request, a restart) never makes a second job. */
export function itemJobId(batchId: string, index: number): string {
  return `${batchId}-${index}`;
}

/** An item's queue job, as the submission, the restart hand-back and the sweep all add it. */
export function batchItemJob(batchId: string, index: number) {
  return {
    name: BATCH_ITEM_JOB,
    data: { batchId, index } satisfies BatchItemJob,
    options: { jobId: itemJobId(batchId, index) },
  };
}

export const inputKey = (batchId: string, index: number) => `jobs/${batchId}/in/${index}`;
export const outputKey = (batchId: string, index: number) => `jobs/${batchId}/out/${index}`;

export interface BatchWorkerDeps {
  db: Database;
  blobs: BlobStore;
  engine: Engine;
  logger: Logger;
  fetchLimits: FetchLimits;
  /** Runs a job gets in all (the queue's attempts): the last one records an internal failure. */
  attempts: number;
  /** Longest one attempt waits out SERVICE_UNAVAILABLE, ms (default `OUTAGE_LIMIT_MS`; tests shrink it). */
  outageLimitMs?: number;
}

/**
 * The worker side of a batch item. Idempotent by construction, because a job can run more than once
 * (a retry; a worker killed mid-item whose job another worker takes over):
 * - an item no longer `queued` is skipped;
 * - the result blob's key is fixed per item, so a second run rewrites the same bytes;
 * - the item's end is one conditional UPDATE (`… WHERE status = 'queued'`), so of two runs finishing
 *   the same item exactly one records it, and only that one could give quota back.
 * An image the engine refuses (a 4xx: corrupt, too large) fails the item at once — running it again
 * cannot help. An outage of the database or the blob store (SERVICE_UNAVAILABLE: a restart, a
 * failover) is waited out without spending attempts, for at most `OUTAGE_LIMIT_MS` per attempt (see
 * there). Anything else (a bug, a fetch that failed on our side), and an outage past that limit, is
 * thrown for the queue to retry with backoff; the last attempt records the item as failed and gives
 * its request back to the quota.
 */
export function batchHandlers(deps: BatchWorkerDeps): JobHandlers {
  const { db, blobs, engine, logger, fetchLimits, attempts } = deps;
  const outageLimitMs = deps.outageLimitMs ?? OUTAGE_LIMIT_MS;
  const runItem = async (job: JobContext<BatchItemJob>) => {
    const { batchId, index } = job.data;
    const [batch, item] = await Promise.all([db.findBatch(batchId), db.findBatchItem(batchId, index)]);
    if (!batch || !item) throw new Error(`batch item ${batchId}/${index} is not in the database`);
    if (item.status !== 'queued') return { skipped: item.status };
    logger.debug({ batch_id: batchId, index, attempt: job.attempt }, 'batch item started');
    let inputSize: number | null = null;
    try {
      let input: Uint8Array;
      const stored = await blobs.get(inputKey(batchId, index));
      if (stored) input = stored.bytes;
      else if (item.sourceUrl) {
        input = (await fetchUrl(item.sourceUrl, fetchLimits, `urls[${index}]`)).bytes;
        // Kept, so a retry after a later failure does not fetch again.
        await blobs.put(inputKey(batchId, index), input);
      } else throw new Error(`the original of batch item ${batchId}/${index} is missing from the blob store`);
      inputSize = input.length;
      const output = await engine.optimize(input, JSON.parse(batch.options));
      await blobs.put(outputKey(batchId, index), output.data, {
        contentType: MIME_TYPES[output.info.output_format],
      });
      const recorded = await db.finishBatchItem(
        batchId,
        index,
        {
          status: 'done',
          inputSize: output.info.input_size,
          outputSize: output.info.output_size,
          result: JSON.stringify(output.info),
        },
        new Date().toISOString(),
      );
      // One line per item, like one per request; `recorded: false` is a second run that lost the race.
      logger.info(
        { batch_id: batchId, index, attempt: job.attempt, recorded, output_size: output.info.output_size },
        'batch item done',
      );
      return { done: recorded };
    } catch (error) {
      if (isCompressoError(error) && error.status < 500) {
        const recorded = await db.finishBatchItem(
          batchId,
          index,
          { status: 'failed', errorCode: error.code, errorMessage: error.message, inputSize },
          new Date().toISOString(),
        );
        logger.info(
          { batch_id: batchId, index, attempt: job.attempt, recorded, code: error.code },
          'batch item failed',
        );
        return { failed: error.code };
      }
      if (job.attempt >= attempts && !job.signal.aborted && !isOutage(error)) {
        logger.error({ err: error, batch_id: batchId, index }, 'batch item failed for good');
        await failItemForGood(db, batch, index, FAULT_MESSAGE, inputSize);
      }
      throw error;
    }
  };
  return {
    [BATCH_ITEM_JOB]: async (job: JobContext<BatchItemJob>) => {
      // The queue's attempts (3, with backoff from 1 s) are spent within seconds when every run fails
      // at once on a database that is restarting; the job would land in the dead letter with its item
      // still `queued` in the database, where nothing would ever finish it. So an outage is waited out
      // here, holding the job, until the database or blob store answers again or the worker closes
      // (then the job goes back to the queue, as any job does at shutdown) — but only so long: past
      // `outageLimitMs` the outage counts as this attempt's failure, see OUTAGE_LIMIT_MS. Running the
      // item again from the top is safe: every step is idempotent (see above).
      const giveUpAt = Date.now() + outageLimitMs;
      for (let wait = OUTAGE_WAIT_MS.first; ; wait = Math.min(wait * 2, OUTAGE_WAIT_MS.max)) {
        try {
          return await runItem(job);
        } catch (error) {
          if (!isOutage(error) || job.signal.aborted) throw error;
          const { batchId, index } = job.data;
          const left = giveUpAt - Date.now();
          if (left <= 0) {
            logger.warn(
              { batch_id: batchId, index, attempt: job.attempt, error: (error as Error).message },
              'batch item gave up waiting for the database or blob store: the attempt failed',
            );
            if (job.attempt >= attempts) await lastAttemptFailed(batchId, index, error);
            throw error;
          }
          logger.warn(
            { batch_id: batchId, index, error: (error as Error).message, retry_in_ms: Math.min(wait, left) },
            'batch item waiting for the database or blob store',
          );
          await abortableSleep(Math.min(wait, left), job.signal);
          if (job.signal.aborted) throw error;
        }
      }
    },
  };

  /**
   * The last attempt's end after an outage that outlasted the limit: recorded as any last attempt's
   * failure is. If the database is what is down this fails too; then the job's dead letter is
   * where the sweep finds the item (failItemForGood, once the database answers), so it is only logged.
   */
  async function lastAttemptFailed(batchId: string, index: number, cause: unknown) {
    try {
      const batch = await db.findBatch(batchId);
      if (!batch) return;
      logger.error({ err: cause, batch_id: batchId, index }, 'batch item failed for good');
      await failItemForGood(db, batch, index);
    } catch (error) {
      logger.warn(
        { batch_id: batchId, index, error: (error as Error).message },
        'batch item could not be recorded failed now: the sweep records it from the dead letter',
      );
    }
  }
}

const FAULT_MESSAGE = 'The item could not be processed because of a fault on our side; it was not counted.';

/**
 * The end of an item that failed through our fault: recorded `failed` with INTERNAL_ERROR and its
 * request given back to the quota. The record is the same conditional UPDATE as every item's end, so
 * of several callers (the handler's last attempt, sweeps in several processes) exactly one records
 * it, and only that one refunds. True when this call recorded it.
 */
export async function failItemForGood(
  db: Database,
  batch: Pick<BatchRecord, 'id' | 'accountId' | 'quotaDay'>,
  index: number,
  message: string = FAULT_MESSAGE,
  inputSize: number | null = null,
): Promise<boolean> {
  const recorded = await db.finishBatchItem(
    batch.id,
    index,
    { status: 'failed', errorCode: 'INTERNAL_ERROR', errorMessage: message, inputSize },
    new Date().toISOString(),
  );
  if (recorded) await db.refundQuota(batch.accountId, batch.quotaDay);
  return recorded;
}

/** Between tries while the database or blob store is down: from half a second, doubling, at most 10 s. */
const OUTAGE_WAIT_MS = { first: 500, max: 10_000 };

/**
 * Longest one attempt waits out SERVICE_UNAVAILABLE: 5 minutes, well past a database restart or
 * failover (seconds) and an S3 blip. The wait must end somewhere because the same code can come from
 * one item rather than the service (an object whose read keeps breaking off), and a job waiting is
 * `active`, which the sweep leaves alone: unbounded, such an item would hold a worker slot for ever.
 * Past the limit the attempt fails as any other does, so an outage longer than about
 * attempts × 5 min fails the items it catches (INTERNAL_ERROR, given back to the quota) rather
 * than stranding them.
 */
export const OUTAGE_LIMIT_MS = 5 * 60_000;

const isOutage = (error: unknown) => isCompressoError(error) && error.code === 'SERVICE_UNAVAILABLE';

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

function itemView(batchId: string, item: BatchItemRecord) {
  const info = item.result ? (JSON.parse(item.result) as InfoResult) : undefined;
  return {
    index: item.index,
    name: item.name,
    ...(item.sourceUrl ? { url: item.sourceUrl } : {}),
    status: item.status,
    input_size: item.inputSize,
    output_size: item.outputSize,
    savings_percent: info?.savings_percent ?? null,
    output_format: info?.output_format ?? null,
    output_name: info ? outputName(item.name, info) : null,
    width: info?.width ?? null,
    height: info?.height ?? null,
    // The status is what a single request would have answered with this code (415, 422…).
    error: item.errorCode
      ? {
          code: item.errorCode,
          message: item.errorMessage ?? '',
          ...(isErrorCode(item.errorCode) ? { status: statusOf(item.errorCode) } : {}),
        }
      : null,
    download_url: item.status === 'done' ? `/api/v1/jobs/${batchId}/items/${item.index}` : null,
    finished_at: item.finishedAt,
  };
}

export type BatchView = ReturnType<typeof batchView>;

/** The wire shape of a batch: progress and one entry per item, in upload order. */
export function batchView(batch: BatchRecord, items: BatchItemRecord[]) {
  const done = items.filter((i) => i.status === 'done').length;
  const failed = items.filter((i) => i.status === 'failed').length;
  const finished = done + failed;
  return {
    id: batch.id,
    status: finished === batch.total ? 'completed' : finished === 0 ? 'queued' : 'running',
    created_at: batch.createdAt,
    status_url: `/api/v1/jobs/${batch.id}`,
    options: JSON.parse(batch.options) as Record<string, unknown>,
    progress: {
      total: batch.total,
      done,
      failed,
      queued: batch.total - finished,
      percent: batch.total ? Math.floor((finished / batch.total) * 100) : 100,
    },
    items: items.map((item) => itemView(batch.id, item)),
  };
}

/** Owner check: another account's batch is answered exactly like an unknown one. */
export async function ownBatch(db: Database, id: string, accountId: string): Promise<BatchRecord> {
  const batch = await db.findBatch(id);
  if (!batch || batch.accountId !== accountId) {
    throw new CompressoError(
      'NOT_FOUND',
      `No batch job ${JSON.stringify(id.slice(0, 100))} in this account.`,
    );
  }
  return batch;
}
