import { randomUUID } from 'node:crypto';
import type { Database } from '@compresso/runtime';
import { type Clock, systemClock } from './clock.ts';
import type { OptimizeOutcome, Optimizer } from './pipeline.ts';
import { isPlatformError } from './platform-error.ts';
import type { PlatformAsset, PlatformPort } from './port.ts';
import { type BulkRun, type RunCounts, type RunStore, runStore, ZERO_COUNTS } from './runs.ts';

export interface BulkRunnerOptions {
  db: Database;
  port: PlatformPort;
  /** The optimizer every asset goes through — the same one (and ledger) webhooks use. */
  optimizer: Optimizer;
  clock?: Clock;
  /** This worker's id for run leases (default: the optimizer's). */
  owner?: string;
  /** How long a run's lease lasts without renewal (default 2 minutes; renewed before each asset). */
  leaseMs?: number;
  /** Assets listed per page (default 50). */
  pageSize?: number;
  /**
   * Assets of a page worked at once (default 1). Downloads, compressions and uploads overlap; the
   * platform's calls still go through the adapter's pacer. The page is committed when all are done.
   */
  concurrency?: number;
  /** Longest single wait before the run's state is read again (default 30 s): a pause from another process is seen within it. */
  pollMs?: number;
  /** Pacing hook called before each asset (after the platform port's own pacer): a site's share of a worker, say. */
  beforeAsset?(run: BulkRun, asset: PlatformAsset): void | Promise<void>;
  /** Hears each asset's outcome and each state the run reaches (for progress pages and logs). */
  onProgress?(event: RunProgress): void | Promise<void>;
}

export type RunProgress =
  | { type: 'asset'; run: BulkRun; asset: PlatformAsset; outcome: OptimizeOutcome }
  | { type: 'page'; run: BulkRun }
  | { type: 'waiting'; run: BulkRun; until: number; reason: string }
  | { type: 'stopped'; run: BulkRun };

export interface BulkRunner {
  readonly runs: RunStore;
  /** Start a run for the site, or get the active one (one per site). Not driven yet: call `drive`. */
  start(site: string): Promise<{ run: BulkRun; created: boolean }>;
  /** Pause a running run: its driver stops after the asset in hand. False when it was not running. */
  pause(id: string): Promise<boolean>;
  /** Resume a paused run (drive it again to continue). */
  resume(id: string): Promise<boolean>;
  /** Cancel a running or paused run: it stops after the asset in hand and cannot be resumed. */
  cancel(id: string): Promise<boolean>;
  /**
   * Work the run until it completes, is paused or cancelled, or another worker holds it. Safe to call
   * on any worker at any time: the run's lease lets one drive it; its cursor and counts are committed
   * page by page with the assets done, so a driver killed anywhere is replaced without losing or
   * repeating work (the ledger makes each asset's work happen once).
   */
  drive(id: string, options?: { signal?: AbortSignal }): Promise<BulkRun>;
  /** Drive every running run no worker holds (at start, after a restart or a killed worker), one after another. */
  resumeOrphans(options?: { signal?: AbortSignal }): Promise<BulkRun[]>;
}

class Stop extends Error {}

/** The runtime's answer when its database or blob store cannot be reached. */
const isOutage = (error: unknown) =>
  error instanceof Error && (error as { code?: unknown }).code === 'SERVICE_UNAVAILABLE';

export function createBulkRunner(options: BulkRunnerOptions): BulkRunner {
  const { port, optimizer } = options;
  const runs = runStore(options.db);
  const clock = options.clock ?? systemClock;
  const owner = options.owner ?? optimizer.owner ?? `kit-${randomUUID()}`;
  const leaseMs = options.leaseMs ?? 120_000;
  const pageSize = options.pageSize ?? 50;
  const pollMs = options.pollMs ?? 30_000;
  const concurrency = Math.max(1, Math.trunc(options.concurrency ?? 1));
  // Drivers in this process, so a local pause or cancel interrupts a wait at once.
  const local = new Map<string, AbortController>();

  /** The run's row, with the lease renewed; Stop when it is no longer ours to drive. */
  async function hold(id: string): Promise<BulkRun> {
    const run = await runs.claim(id, owner, clock.now(), leaseMs);
    if (!run) throw new Stop();
    return run;
  }

  /** Wait up to `ms`, in slices of `pollMs`, while the run stays ours and running. */
  async function wait(id: string, ms: number, signal: AbortSignal): Promise<void> {
    const until = clock.now() + ms;
    while (clock.now() < until) {
      await clock.sleep(Math.min(pollMs, until - clock.now()), signal).catch(() => {
        throw new Stop();
      });
      await hold(id);
    }
  }

  async function work(
    run: BulkRun,
    asset: PlatformAsset,
    counts: RunCounts,
    signal: AbortSignal,
    outer: AbortSignal | undefined,
  ): Promise<void> {
    for (;;) {
      await options.beforeAsset?.(run, asset);
      // The asset in hand finishes even when the run is paused meanwhile (only the caller's own signal
      // cuts it short): an aborted compression would count as a failed attempt.
      const outcome = await optimizer.optimize(run.site, asset.id, {
        force: true,
        ...(outer ? { signal: outer } : {}),
      });
      switch (outcome.kind) {
        case 'optimized':
          counts.optimized++;
          counts.bytesBefore += outcome.before;
          counts.bytesAfter += outcome.after;
          break;
        case 'unchanged':
          if (outcome.state === 'optimized') {
            counts.optimized++;
            counts.bytesBefore += outcome.before ?? 0;
            counts.bytesAfter += outcome.after ?? 0;
          } else if (outcome.state === 'failed') counts.failed++;
          else counts.skipped++;
          break;
        case 'skipped':
        case 'disabled':
          counts.skipped++;
          break;
        case 'failed':
          counts.failed++;
          break;
        case 'busy':
          // A webhook's work (or a dead worker's lease) on this asset: its result is what we count.
          await wait(run.id, 1000, signal);
          continue;
        case 'retry':
          await wait(run.id, outcome.retryAfterMs ?? Math.min(60_000, 1000 * 2 ** outcome.attempts), signal);
          continue;
        case 'quota': {
          // Nothing is failed for the quota: the run says until when it waits, and goes on by itself.
          const until = outcome.resetAt.getTime();
          await runs.setWaiting(run.id, owner, until, 'quota', clock.now());
          await options.onProgress?.({ type: 'waiting', run: await hold(run.id), until, reason: 'quota' });
          await wait(run.id, until - clock.now(), signal);
          await runs.setWaiting(run.id, owner, null, null, clock.now());
          continue;
        }
      }
      counts.done++;
      await options.onProgress?.({ type: 'asset', run, asset, outcome });
      return;
    }
  }

  /** One page of the run: listed, each asset worked, committed. True when the run has ended. */
  async function onePage(id: string, both: AbortSignal, signal: AbortSignal | undefined): Promise<boolean> {
    let run = await hold(id);
    let page: Awaited<ReturnType<PlatformPort['listAssets']>>;
    try {
      page = await port.listAssets(run.site, { cursor: run.cursor, limit: pageSize, signal: both });
    } catch (error) {
      if (both.aborted) throw new Stop();
      if (isPlatformError(error) && error.retryable) {
        await wait(id, error.retryAfterMs ?? 5000, both);
        return false;
      }
      const message = isPlatformError(error) ? `${error.code}: ${error.message}` : String(error);
      await runs.finish(id, owner, 'failed', `listing: ${message}`, clock.now());
      return true;
    }
    if (page.total !== undefined && run.total !== page.total)
      await runs.setTotal(id, owner, page.total, clock.now());
    const counts = { ...ZERO_COUNTS };
    const queue = [...page.assets];
    let stopped: unknown;
    // `concurrency` lanes take the page's assets one at a time; the first error stops every lane from
    // taking another (the assets in hand finish), and is thrown once all have.
    const lane = async () => {
      while (queue.length > 0 && stopped === undefined) {
        const asset = queue.shift()!;
        try {
          run = await hold(id); // also sees a pause or cancel: claim only holds a running run
          if (both.aborted) throw new Stop();
          await work(run, asset, counts, both, signal);
        } catch (error) {
          stopped ??= error;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, queue.length) }, lane));
    if (stopped !== undefined) throw stopped;
    // The page is done: its counts and the next cursor in one statement. A driver killed before
    // this line leaves the old cursor, and the next driver's pass over the page finds every
    // asset already settled in the ledger (counted from it, compressed nowhere).
    await runs.commitPage(id, owner, page.cursor, counts, clock.now());
    await options.onProgress?.({ type: 'page', run: (await runs.get(id))! });
    if (page.waitMs !== undefined && page.assets.length === 0 && page.cursor !== null) {
      // The platform is still preparing the listing (a bulk operation): its cursor is stored, ask again later.
      await wait(id, page.waitMs, both);
      return false;
    }
    if (page.cursor === null) {
      await runs.finish(id, owner, 'completed', null, clock.now());
      return true;
    }
    return false;
  }

  async function drive(id: string, { signal }: { signal?: AbortSignal } = {}): Promise<BulkRun> {
    const controller = new AbortController();
    const both = signal ? AbortSignal.any([signal, controller.signal]) : controller.signal;
    local.set(id, controller);
    try {
      const start = await hold(id);
      if (start.total === null && port.countAssets) {
        const total = await port.countAssets(start.site, { signal: both }).catch(() => undefined);
        if (total !== undefined) await runs.setTotal(id, owner, total, clock.now());
      }
      let outages = 0;
      for (;;) {
        try {
          if (await onePage(id, both, signal)) break;
          outages = 0;
        } catch (error) {
          // The database or blob store went away (an outage, SERVICE_UNAVAILABLE): wait and pick the
          // run up again from its last committed page, instead of dropping it. Anything else is a bug.
          if (error instanceof Stop) throw error;
          if (both.aborted) throw new Stop();
          if (!isOutage(error)) throw error;
          outages++;
          await clock.sleep(Math.min(30_000, 1000 * 2 ** outages), both).catch(() => {
            throw new Stop();
          });
        }
      }
    } catch (error) {
      if (!(error instanceof Stop)) throw error;
    } finally {
      local.delete(id);
      // During an outage the release fails too; the lease then runs out by itself.
      await runs.release(id, owner).catch(() => {});
    }
    const final = (await runs.get(id))!;
    await options.onProgress?.({ type: 'stopped', run: final });
    return final;
  }

  return {
    runs,
    start: (site) => runs.start(site, clock.now()),
    async pause(id) {
      const paused = await runs.transition(id, ['running'], 'paused', clock.now());
      if (paused) local.get(id)?.abort();
      return paused;
    },
    resume: (id) => runs.transition(id, ['paused'], 'running', clock.now()),
    async cancel(id) {
      const cancelled = await runs.transition(id, ['running', 'paused'], 'cancelled', clock.now());
      if (cancelled) local.get(id)?.abort();
      return cancelled;
    },
    drive,
    async resumeOrphans({ signal } = {}) {
      const done: BulkRun[] = [];
      for (const run of await runs.orphaned(clock.now())) {
        if (signal?.aborted) break;
        done.push(await drive(run.id, signal ? { signal } : {}));
      }
      return done;
    },
  };
}
