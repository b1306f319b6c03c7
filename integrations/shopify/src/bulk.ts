import {
  type AssetLedger,
  type BulkRun,
  type BulkRunner,
  type Clock,
  createBulkRunner,
  type OptimizeOutcome,
  type Optimizer,
  type RunProgress,
  runStore,
  ZERO_COUNTS,
} from '@compresso/integration-kit';
import type { Database, JobContext, JobHandler, Logger, MigrationSet } from '@compresso/runtime';
import type { ShopifyPort } from './shopify-platform.ts';
import { appSql } from './sql.ts';

/**
 * Bulk optimize of a whole shop: the kit's durable bulk run (one per shop; cursor and counts in the
 * database; start, pause, resume, cancel) driven by the worker over the Shopify adapter, whose
 * listing of a large catalog is a bulk query operation (bulk-listing.ts). Webhooks arriving
 * meanwhile go through the same optimizer ledger: an image is never compressed twice.
 *
 * The one table of its own (namespace `shopify_bulk`): the product a failed image belongs to and its
 * title, written when the image fails (the ledger keeps the reason), for the failures list.
 */
export const SHOPIFY_BULK_MIGRATIONS: MigrationSet = {
  namespace: 'shopify_bulk',
  sqlite: [
    {
      version: 1,
      sql: `
CREATE TABLE shopify_bulk_failures (
  shop TEXT NOT NULL,
  asset_id TEXT NOT NULL,
  product_id TEXT,
  product_title TEXT,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (shop, asset_id)
);
`,
    },
  ],
  postgres: [
    {
      version: 1,
      sql: `
CREATE TABLE shopify_bulk_failures (
  shop TEXT NOT NULL,
  asset_id TEXT NOT NULL,
  product_id TEXT,
  product_title TEXT,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (shop, asset_id)
);
`,
    },
  ],
};

export const BULK_JOBS = {
  /** Drive a shop's bulk run (queued by start and resume; a restarted worker resumes orphans by itself). */
  drive: 'shopify.bulk-drive',
  /** Retry failed images (some, or every failed one of the shop). */
  retry: 'shopify.bulk-retry',
} as const;

export interface BulkDriveJob {
  shop: string;
  runId: string;
}

export interface BulkRetryJob {
  shop: string;
  assetIds: string[] | 'failed';
}

/** The products of failed images (shopify_bulk_failures). */
export function bulkFailures(db: Database) {
  const sql = appSql(db.backend);
  return {
    async record(shop: string, assetId: string, productId: string | null, title: string | null, now: number) {
      await sql.run(
        `INSERT INTO shopify_bulk_failures (shop, asset_id, product_id, product_title, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (shop, asset_id) DO UPDATE SET product_id = excluded.product_id, product_title = excluded.product_title,
           updated_at = excluded.updated_at`,
        shop,
        assetId,
        productId,
        title,
        now,
      );
    },
    async titles(shop: string, assetIds: readonly string[]): Promise<Map<string, string | null>> {
      const found = new Map<string, string | null>();
      for (let i = 0; i < assetIds.length; i += 100) {
        const part = assetIds.slice(i, i + 100);
        const rows = await sql.all(
          `SELECT asset_id, product_title FROM shopify_bulk_failures WHERE shop = ? AND asset_id IN (${part.map(() => '?').join(', ')})`,
          shop,
          ...part,
        );
        for (const row of rows)
          found.set(String(row.asset_id), row.product_title === null ? null : String(row.product_title));
      }
      return found;
    },
    async eraseSite(shop: string) {
      await sql.run('DELETE FROM shopify_bulk_failures WHERE shop = ?', shop);
    },
  };
}

/** A ledger error (`CODE: message`, or `gave up after n attempts: CODE: message`) as a code and a reason. */
export function failureOf(lastError: string | null): { code: string; reason: string } {
  const text = lastError ?? 'Unknown error';
  const match = /^(?:gave up after \d+ attempts: )?([A-Z][A-Z0-9_]+): (.*)$/s.exec(text);
  return match ? { code: match[1] as string, reason: match[2] as string } : { code: 'FAILED', reason: text };
}

/** The run as the admin API shows it (snake_case, states a person reads). */
export function runView(run: BulkRun, now: number) {
  const state =
    run.state === 'running' && run.waitingReason === 'quota' && run.waitingUntil !== null
      ? 'waiting_quota'
      : run.state;
  const end = run.finishedAt ?? (run.state === 'running' ? now : run.updatedAt);
  const minutes = Math.max(end - run.createdAt, 1) / 60_000;
  const perMinute = run.done > 0 ? run.done / minutes : 0;
  const left = run.total === null ? null : Math.max(0, run.total - run.done);
  return {
    id: run.id,
    state,
    total: run.total,
    done: run.done,
    optimized: run.optimized,
    skipped: run.skipped,
    failed: run.failed,
    bytes_before: run.bytesBefore,
    bytes_after: run.bytesAfter,
    bytes_saved: run.bytesBefore - run.bytesAfter,
    images_per_minute: Math.round(perMinute * 10) / 10,
    eta_seconds:
      state === 'running' && left !== null && perMinute > 0 ? Math.ceil((left / perMinute) * 60) : null,
    waiting_until: run.waitingUntil === null ? null : new Date(run.waitingUntil).toISOString(),
    started_at: new Date(run.createdAt).toISOString(),
    updated_at: new Date(run.updatedAt).toISOString(),
  };
}

export interface BulkWorkerDeps {
  db: Database;
  port: ShopifyPort;
  /** A new optimizer (one lease owner) on the same ledger as the webhooks' jobs. */
  makeOptimizer(): Optimizer;
  clock: Clock;
  logger: Logger;
  /** Whether the shop still has the app: a run of an uninstalled shop is cancelled. */
  shops: { isActive(shop: string): Promise<boolean> };
  /** Images of a page worked at once (default 4). */
  concurrency?: number;
  /** Hears the runner's events (tests, logs). */
  onProgress?(event: RunProgress): void | Promise<void>;
}

export interface BulkWorker {
  runner: BulkRunner;
  handlers: Record<string, JobHandler<never>>;
  /** Drive the runs a stopped or killed worker left (called at start, in the background). */
  resumeOrphans(): Promise<void>;
  /** shop/redact: the shop's failure records (the ledger's erase takes its runs). */
  eraseSite(shop: string): Promise<void>;
  close(): void;
}

export function bulkWorker(deps: BulkWorkerDeps): BulkWorker {
  const { clock, logger, port } = deps;
  const failures = bulkFailures(deps.db);
  const stop = new AbortController();

  async function recordFailure(shop: string, assetId: string, productId: string | undefined) {
    const title = productId ? await port.productTitle(shop, productId).catch(() => null) : null;
    await failures.record(shop, assetId, productId ?? null, title, clock.now());
  }

  const runner = createBulkRunner({
    db: deps.db,
    port,
    optimizer: deps.makeOptimizer(),
    clock,
    concurrency: deps.concurrency ?? 4,
    async beforeAsset(run) {
      // Uninstalled meanwhile: the run ends (the image in hand fails without a session; none after it).
      if (!(await deps.shops.isActive(run.site))) await runner.cancel(run.id);
    },
    async onProgress(event) {
      if (event.type === 'asset' && event.outcome.kind === 'failed')
        await recordFailure(event.run.site, event.asset.id, event.asset.parentId).catch((error: unknown) =>
          logger.warn({ err: error, shop: event.run.site }, 'bulk: could not record a failure'),
        );
      if (event.type === 'waiting')
        logger.info(
          { shop: event.run.site, run: event.run.id, until: new Date(event.until).toISOString() },
          'bulk run waits for the Compresso quota',
        );
      if (event.type === 'stopped')
        logger.info(
          { shop: event.run.site, run: event.run.id, state: event.run.state, done: event.run.done },
          'bulk run stopped',
        );
      await deps.onProgress?.(event);
    },
  });

  async function drive(job: JobContext<BulkDriveJob>) {
    const signal = AbortSignal.any([job.signal, stop.signal]);
    const run = await runner.drive(job.data.runId, { signal });
    return { runId: run.id, state: run.state, done: run.done, total: run.total };
  }

  /** Retry failed images: a success moves the image from `failed` to its outcome in the shop's last run's counts. */
  async function retry(job: JobContext<BulkRetryJob>) {
    const { shop } = job.data;
    const optimizer = deps.makeOptimizer();
    const ledger: AssetLedger = optimizer.ledger;
    let ids: string[];
    if (job.data.assetIds === 'failed') {
      ids = [];
      for (let after: string | undefined; ; ) {
        const page = await ledger.list(shop, { state: 'failed', limit: 200, ...(after ? { after } : {}) });
        ids.push(...page.map((a) => a.assetId));
        if (page.length < 200) break;
        after = page[page.length - 1]?.assetId;
      }
    } else ids = job.data.assetIds;
    const runs = runStore(deps.db);
    const [last] = await runs.list(shop, 1);
    const results: { assetId: string; outcome: OptimizeOutcome['kind'] }[] = [];
    for (const assetId of ids) {
      if ((await ledger.get(shop, assetId))?.state !== 'failed') continue;
      let outcome = await optimizer.optimize(shop, assetId, { retryFailed: true, signal: job.signal });
      for (let wait = 100; outcome.kind === 'busy' && wait <= 5000; wait *= 2) {
        await clock.sleep(wait, job.signal);
        outcome = await optimizer.optimize(shop, assetId, { retryFailed: true, signal: job.signal });
      }
      results.push({ assetId, outcome: outcome.kind });
      // No longer failed: the last ended run's counts follow, so its totals stay equal to the
      // ledger's (a running run counts the image itself when it gets there).
      if (!last || last.state === 'running' || last.state === 'paused') continue;
      if (outcome.kind === 'optimized')
        await runs.adjustCounts(
          last.id,
          {
            ...ZERO_COUNTS,
            failed: -1,
            optimized: 1,
            bytesBefore: outcome.before,
            bytesAfter: outcome.after,
          },
          clock.now(),
        );
      else if (outcome.kind === 'skipped' || outcome.kind === 'disabled')
        await runs.adjustCounts(last.id, { ...ZERO_COUNTS, failed: -1, skipped: 1 }, clock.now());
    }
    return { shop, results };
  }

  return {
    runner,
    handlers: {
      [BULK_JOBS.drive]: drive as JobHandler<never>,
      [BULK_JOBS.retry]: retry as JobHandler<never>,
    },
    async resumeOrphans() {
      try {
        await runner.resumeOrphans({ signal: stop.signal });
      } catch (error) {
        logger.error({ err: error }, 'bulk: resuming runs failed');
      }
    },
    eraseSite: (shop) => failures.eraseSite(shop),
    close() {
      stop.abort();
    },
  };
}
