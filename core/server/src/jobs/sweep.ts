import type { BatchRecord, Database, JobQueue, JobView, Logger, QueuedBatchItem } from '@compresso/runtime';
import { isCompressoError } from '@compresso/schema';
import { batchItemJob, failItemForGood, itemJobId } from './batch.ts';

/**
 * The reconciliation of batch items with the queue. The database is the record of what the user
 * was promised; the queue only carries the work, and there are two ways it can drop an item without
 * any handler noticing, which would leave the item `queued` — and its batch unfinished — for ever:
 * - **lost**: Redis came back empty (a restart without persistence, a failover to an empty replica,
 *   FLUSHALL), or an in-process queue died with its process. The job is simply not there: it is
 *   added again under the same id. That is safe whatever happened meanwhile, because the handler
 *   checks its own record first (an item no longer queued is skipped) and finishes an item with one
 *   conditional UPDATE, so an item is never recorded twice.
 * - **dead letter without a handler**: a worker killed mid-item more often than BullMQ's stalled
 *   limit (out of memory on every try) is failed by BullMQ without running the handler, whose last
 *   attempt would have recorded the failure. The sweep does it instead, through the handler's own
 *   final-failure path (`failItemForGood`): `failed` with INTERNAL_ERROR, its request given back.
 * Waiting, active and delayed jobs are left alone; so is a completed one (its item was recorded
 * before the job completed: the database was read a moment before the queue).
 *
 * Several processes may sweep at once: adding an existing id changes nothing, and of several
 * `failItemForGood` calls exactly one records the item and refunds it.
 */
export interface BatchSweepDeps {
  db: Database;
  queue: JobQueue;
  logger: Logger;
  /**
   * Items of batches younger than this are not looked at: a submission writes its items to the
   * database before it adds their jobs, and must not find its own items being added by a sweep (or,
   * if its addBulk fails, recorded failed under it).
   */
  graceMs: number;
  /** Items read from the database and looked up in the queue at a time (default 500). */
  pageSize?: number;
  /**
   * Most items one sweep looks at (default `SWEEP_MAX_ITEMS`): it pages on while pages come back
   * full, up to this, then the next sweep goes on from there. See SWEEP_MAX_ITEMS.
   */
  maxItems?: number;
}

export interface SweepResult {
  /** Queued items of old-enough batches looked up in the queue. */
  checked: number;
  /** Of those, jobs the queue did not have, added again. */
  requeued: number;
  /** Of those, jobs in the dead letter whose item this sweep recorded failed (and refunded). */
  failed: number;
}

export interface BatchSweep {
  /**
   * Pages of queued items from where the previous sweep stopped, while they come back full, up to
   * `maxItems`; from the start again once one reached the end.
   */
  sweep(now?: number): Promise<SweepResult>;
}

/** Queue lookups at once: one round trip each on Redis, so overlap them without flooding it. */
const LOOKUPS_AT_ONCE = 32;

/**
 * Items one sweep looks at, at most: 20 pages. A lookup is one Redis round trip, 32 at a time, so
 * this is a few hundred round trips — well under a second on a local network — and it is the rate at
 * which a Redis that came back empty is refilled: 10 000 lost items per interval. The cap keeps a
 * huge backlog (all of it legitimately waiting, mostly) from making one sweep run for minutes.
 */
export const SWEEP_MAX_ITEMS = 10_000;

export function createBatchSweep(deps: BatchSweepDeps): BatchSweep {
  const { db, queue, logger, graceMs } = deps;
  const pageSize = deps.pageSize ?? 500;
  const maxItems = deps.maxItems ?? SWEEP_MAX_ITEMS;
  // Where the last fully checked page ended. Kept across sweeps, so a backlog larger than a sweep
  // does not hide the items behind its first pages from every sweep; moved only once a page is
  // done, so a sweep that fails partway (Redis or the database gone for a moment) leaves the page
  // it was on to the next sweep rather than skipping it until the cursor comes round again.
  let cursor: QueuedBatchItem | undefined;

  /** Look one page up in the queue: add back what it lost, fail what is dead-lettered. */
  const checkPage = async (page: QueuedBatchItem[], result: SweepResult) => {
    const views: (JobView | undefined)[] = [];
    for (let start = 0; start < page.length; start += LOOKUPS_AT_ONCE) {
      const chunk = page.slice(start, start + LOOKUPS_AT_ONCE);
      views.push(...(await Promise.all(chunk.map((i) => queue.getJob(itemJobId(i.batchId, i.index))))));
    }

    const lost = page.filter((_, k) => views[k] === undefined);
    if (lost.length > 0) {
      await queue.addBulk(lost.map((i) => batchItemJob(i.batchId, i.index)));
      result.requeued += lost.length;
      logger.warn(
        { items: lost.length, first: itemJobId(lost[0]!.batchId, lost[0]!.index) },
        'batch items queued in the database had no job in the queue (it lost them): added again',
      );
    }

    const batches = new Map<string, BatchRecord | undefined>();
    for (const [k, item] of page.entries()) {
      const view = views[k];
      if (view?.state !== 'failed') continue;
      if (!batches.has(item.batchId)) batches.set(item.batchId, await db.findBatch(item.batchId));
      const batch = batches.get(item.batchId);
      if (!batch) continue;
      const recorded = await failItemForGood(db, batch, item.index, deadLetterMessage(view));
      if (recorded) result.failed++;
      // The cause stays in the log (with the job's own reason); the user gets the generic message.
      // At error level once per item: only from the sweep that recorded it. Another sweeper (or the
      // handler's last attempt) that got there first has said so already.
      logger[recorded ? 'error' : 'debug'](
        {
          batch_id: item.batchId,
          index: item.index,
          recorded,
          stalls: view.stalls,
          attempts_made: view.attemptsMade,
          failed_reason: view.failedReason,
        },
        'batch item in the dead letter without its handler recording it: failed and given back',
      );
    }
  };

  return {
    async sweep(now = Date.now()) {
      const createdBefore = new Date(now - graceMs).toISOString();
      const result: SweepResult = { checked: 0, requeued: 0, failed: 0 };
      while (result.checked < maxItems) {
        const limit = Math.min(pageSize, maxItems - result.checked);
        const page = await db.listQueuedBatchItems(limit, {
          createdBefore,
          ...(cursor ? { after: cursor } : {}),
        });
        await checkPage(page, result);
        result.checked += page.length;
        if (page.length < limit) {
          cursor = undefined; // the end: the next sweep starts from the beginning
          break;
        }
        cursor = page.at(-1);
      }
      return result;
    },
  };
}

function deadLetterMessage(view: JobView): string | undefined {
  if (view.stalls === 0) return undefined; // the handler's own wording
  const times = view.stalls === 1 ? 'once' : `${view.stalls} times`;
  return `The item could not be processed: it stopped its worker ${times} before finishing (for example by running out of memory); it was not counted.`;
}

export interface BatchSweeper extends BatchSweep {
  /** Stop sweeping; waits for a sweep in progress. Idempotent. */
  close(): Promise<void>;
}

/**
 * Sweep once now and then every `intervalMs` ± 25 % (the jitter spreads processes that started
 * together), one sweep at a time, until closed. A sweep that fails (the database or Redis is down)
 * is logged and tried again at the next tick; the timer never keeps the process alive.
 */
export function startBatchSweeper(deps: BatchSweepDeps & { intervalMs: number }): BatchSweeper {
  const { logger, intervalMs } = deps;
  const sweeper = createBatchSweep(deps);
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;

  const tick = () => {
    running = sweeper
      .sweep()
      .then(
        (result) => {
          logger[result.requeued || result.failed ? 'info' : 'debug'](
            { ...result, queue: deps.queue.name },
            'batch sweep',
          );
        },
        (error: unknown) => {
          if (closed) return;
          if (isCompressoError(error) && error.code === 'SERVICE_UNAVAILABLE') {
            logger.warn(
              { error: error.message },
              'batch sweep skipped: the database or queue is unavailable',
            );
          } else logger.error({ err: error }, 'batch sweep failed');
        },
      )
      .finally(() => {
        running = undefined;
        if (closed) return;
        timer = setTimeout(tick, intervalMs * (0.75 + Math.random() * 0.5));
        timer.unref();
      });
  };
  tick();

  return {
    sweep: (now) => sweeper.sweep(now),
    async close() {
      closed = true;
      clearTimeout(timer);
      await running;
    },
  };
}
