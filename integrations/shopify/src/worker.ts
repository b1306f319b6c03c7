import {
  backupStore,
  type Clock,
  costPacer,
  createOptimizer,
  type OptimizeOutcome,
  type Optimizer,
  type OptimizerOptions,
  type RestoreOutcome,
  type SiteSettings,
  systemClock,
} from '@compresso/integration-kit';
import type { BlobStore, Database, JobContext, JobQueue, Logger, QueueWorker } from '@compresso/runtime';
import type { SessionStorage } from '@shopify/shopify-app-session-storage';
import type { RestoreJob } from './admin.ts';
import { compressoClients, shopifyAltText } from './admin-alt.ts';
import { type BulkWorker, bulkWorker } from './bulk.ts';
import type { ShopifyConfig } from './config.ts';
import { BACKUP_PREFIX, type BackupPruner, backupPruner } from './retention.ts';
import type { ShopStore } from './shop-store.ts';
import { type ShopifyApiHandle, shopifyPlatform } from './shopify-platform.ts';
import { JOBS, type WebhookJob } from './webhooks.ts';

export interface ShopifyWorkerDeps {
  config: ShopifyConfig;
  db: Database;
  queue: JobQueue;
  blobs: BlobStore;
  logger: Logger;
  shops: ShopStore;
  sessions: SessionStorage;
  api: ShopifyApiHandle;
  clock?: Clock;
  /** Downloads and uploads (default: global fetch). */
  fetch?: typeof fetch;
  /** Jobs at once (default: the runtime's COMPRESSO_WORKER_CONCURRENCY). */
  concurrency?: number;
  /** Bulk runs: images of a page worked at once (default 4), and a listener of the runner's events. */
  bulk?: Pick<Parameters<typeof bulkWorker>[0], 'concurrency' | 'onProgress'>;
}

export interface ProductJobResult {
  shop: string;
  productId: string;
  outcomes: { assetId: string; outcome: OptimizeOutcome }[];
  /**
   * The shop's Compresso quota ran out: these images wait (nothing failed, nothing spent) in a
   * follow-up job, `delayed` in the queue until the quota's reset, which then runs by itself.
   */
  waiting?: { until: number; jobId: string; assetIds: string[] };
  /** The shop uninstalled while the job ran: the images after `outcomes` were not begun. */
  stopped?: 'uninstalled';
}

/** The shop uninstalled while its job ran (checked before an image is replaced). */
class ShopGone extends Error {
  constructor(shop: string) {
    super(`${shop} uninstalled the app`);
  }
}

/** Least wait before a quota follow-up: the API's clock may be a moment behind ours at the reset. */
export const QUOTA_RESET_MARGIN_MS = 1000;

export interface ShopifyWorker {
  optimizer: Optimizer;
  /** Put every image of these back to its original (restore one image, a product's, or a whole shop's). */
  restore(shop: string, assetIds: readonly string[]): Promise<{ assetId: string; outcome: RestoreOutcome }[]>;
  /** Every image of the shop the ledger has a backup for. */
  restoreShop(shop: string): Promise<{ assetId: string; outcome: RestoreOutcome }[]>;
  /** The shop's backup retention (Settings), applied as the worker works on a shop, once a day. */
  pruner: BackupPruner;
  /** Stop taking jobs; jobs in flight finish first. */
  close(): Promise<void>;
  /** Bulk optimize runs (bulk.ts): their runner and jobs. */
  readonly bulk: BulkWorker;
  readonly running: QueueWorker;
}

/** The shop's settings as the kit's pipeline reads them. */
export function siteSettings(settings: {
  enabled: boolean;
  quality: number | 'auto';
  maxDimension: number | null;
  keepExif: boolean;
}): SiteSettings {
  return {
    enabled: settings.enabled,
    quality: settings.quality,
    ...(settings.maxDimension === null ? {} : { maxDimension: settings.maxDimension }),
    stripExif: !settings.keepExif,
  };
}

/**
 * The app's queue worker: a product webhook's job runs the kit's optimize pipeline on each of the
 * product's images through the Shopify adapter (fetch → back up → compress through the Compresso
 * API with the shop's own key → replace in place when smaller → record). The products/update that
 * our own replacement causes comes back as a job too; the ledger knows the bytes it wrote, so that
 * job changes nothing (no loop). shop/redact's job erases the shop: ledger, backups, sessions, record.
 */
export function startShopifyWorker(deps: ShopifyWorkerDeps): ShopifyWorker {
  const { shops, logger } = deps;
  const clock = deps.clock ?? systemClock;
  const port = shopifyPlatform({
    api: deps.api,
    sessions: deps.sessions,
    pacer: costPacer({ clock }),
    clock,
    ...(deps.fetch ? { fetch: deps.fetch } : {}),
  });
  const backups = backupStore({ blobs: deps.blobs, prefix: BACKUP_PREFIX });
  const clientFor = compressoClients({
    shops,
    compressoBaseUrl: deps.config.compressoBaseUrl,
    fetch: deps.fetch,
  });
  // One optimizer per job, owning its images' leases under the job's id: an optimizer is one lease
  // owner, and the ledger lets an owner take its own lease again — two jobs sharing one (concurrency 2:
  // a webhook and the self-caused one) would both work on the same image, so each job has its own, and
  // the second gets `busy`. The owner is the job id, not a random one, so the same job run again —
  // after its worker was killed mid-image, or after an attempt that failed with the database or Redis
  // away — takes its own leases back at once instead of waiting out the dead run's (10 minutes). Two
  // runs of one job in this process (BullMQ's stalled-job check while the first still runs) share the
  // optimizer, whose in-flight guard makes the second wait.
  const makeOptimizer = (owner?: string, afterStep?: OptimizerOptions['afterStep']) =>
    createOptimizer({
      db: deps.db,
      backups,
      port,
      clock,
      ...(owner ? { owner } : {}),
      ...(afterStep ? { afterStep } : {}),
      client: clientFor,
      async settings(shop) {
        const record = await shops.find(shop);
        return record ? siteSettings(record.settings) : { enabled: false };
      },
    });
  const jobOptimizers = new Map<string, { optimizer: Optimizer; runs: number }>();
  async function withJobOptimizer<T>(jobId: string, work: (optimizer: Optimizer) => Promise<T>): Promise<T> {
    let entry = jobOptimizers.get(jobId);
    if (!entry) {
      // Before the replacement only: once the intent is recorded, the image goes through to the end
      // (or is refused), so an uninstall never leaves one half-replaced.
      entry = {
        optimizer: makeOptimizer(`shopify-job-${jobId}`, async (step, at) => {
          if (step === 'compressed' && !(await shops.isActive(at.site))) throw new ShopGone(at.site);
        }),
        runs: 0,
      };
      jobOptimizers.set(jobId, entry);
    }
    entry.runs++;
    try {
      return await work(entry.optimizer);
    } finally {
      if (--entry.runs === 0) jobOptimizers.delete(jobId);
    }
  }
  const optimizer = makeOptimizer();
  const ledger = optimizer.ledger;
  const pruner = backupPruner({ db: deps.db, blobs: deps.blobs, port, shops, logger, clock });
  const bulk = bulkWorker({ db: deps.db, port, makeOptimizer, clock, logger, shops, ...deps.bulk });
  // Alt text: the batch jobs of the admin, and new product images' alt text per the shop's setting.
  const altText = shopifyAltText({ db: deps.db, port, shops, logger, clock, client: clientFor });

  async function productJob(
    job: JobContext<WebhookJob>,
    mine: Optimizer,
    outcomes: ProductJobResult['outcomes'],
  ): Promise<ProductJobResult> {
    const { shop, productId, mediaIds } = job.data;
    if (!(await shops.isActive(shop))) {
      logger.info({ shop, product: productId }, 'product job for a shop no longer installed: dropped');
      return { shop, productId, outcomes };
    }
    await pruner
      .pruneIfDue(shop)
      .catch((err) => logger.warn({ err, shop }, 'pruning originals past the retention failed'));
    let retry: string | undefined;
    for (const [index, assetId] of mediaIds.entries()) {
      // app/uninstalled may arrive while the job runs: the images not begun stay as they are.
      if (index > 0 && !(await shops.isActive(shop))) return stopped(job, outcomes);
      let outcome = await mine.optimize(shop, assetId, { signal: job.signal });
      if (outcome.kind === 'quota') {
        // The quota is the shop's: the rest would meet it too. They all wait for the reset in a job of
        // their own, delayed until then; this one completes (nothing failed, no attempt spent).
        outcomes.push({ assetId, outcome });
        const waiting = await waitForQuota(job, mediaIds.slice(index), outcome.resetAt.getTime());
        logger.info(
          {
            shop,
            product: productId,
            images: waiting.assetIds.length,
            until: new Date(waiting.until).toISOString(),
          },
          'Compresso quota used up: images wait for its reset',
        );
        return { shop, productId, outcomes, waiting };
      }
      // Busy: another job holds the image's lease — usually the webhook our own replacement caused,
      // done in moments, so wait a little for it. Past that the image is the holder's to finish:
      // whatever holds a lease is a queued job that completes, or is run again after its worker died
      // (and then takes its lease back, see makeOptimizer). Retrying here would only spend attempts
      // waiting for it — after a worker was killed, for as long as its lease lasts.
      for (let wait = 100; outcome.kind === 'busy' && wait <= 1600; wait *= 2) {
        await clock.sleep(wait, job.signal);
        outcome = await mine.optimize(shop, assetId, { signal: job.signal });
      }
      outcomes.push({ assetId, outcome });
      if (outcome.kind !== 'busy') await shops.endQuotaWait(shop, assetId);
      if (outcome.kind === 'retry') retry ??= `${assetId}: ${outcome.kind}`;
      else if (outcome.kind !== 'busy') await altText.onProductImage(shop, productId, assetId, job.signal);
      logger.info({ shop, product: productId, asset: assetId, outcome: outcome.kind }, 'image');
    }
    // A transient failure (Shopify or the API unavailable) runs the job again after the queue's
    // backoff; what was settled stays settled (the ledger). Not for a shop gone meanwhile.
    if (retry && !(await shops.isActive(shop))) return stopped(job, outcomes);
    if (retry) throw new Error(`retry later: ${retry}`);
    return { shop, productId, outcomes };
  }

  /** A product job on its own optimizer; an uninstall between compression and replacement stops it. */
  const runProductJob = (job: JobContext<WebhookJob>) =>
    withJobOptimizer(job.id, async (mine) => {
      const outcomes: ProductJobResult['outcomes'] = [];
      try {
        return await productJob(job, mine, outcomes);
      } catch (error) {
        // Nothing was put in place for the image in flight (checked before its replacement began).
        if (error instanceof ShopGone) return stopped(job, outcomes);
        throw error;
      }
    });

  function stopped(job: JobContext<WebhookJob>, outcomes: ProductJobResult['outcomes']): ProductJobResult {
    const { shop, productId } = job.data;
    logger.info(
      { shop, product: productId, done: outcomes.length, images: job.data.mediaIds.length },
      'shop uninstalled during the job: stopped',
    );
    return { shop, productId, outcomes, stopped: 'uninstalled' };
  }

  async function waitForQuota(
    job: JobContext<WebhookJob>,
    assetIds: string[],
    until: number,
  ): Promise<NonNullable<ProductJobResult['waiting']>> {
    // One follow-up per job and reset: adding it again (this handler run twice) changes nothing.
    const base = job.id.replace(/-quota-\d+(-r\d+)?$/, '');
    let jobId = `${base}-quota-${until}`;
    // The API still said the same reset (our follow-up ran a moment early): the next link of the chain,
    // numbered — not timed: two links at one instant of a stopped clock would share an id, and the
    // second add would do nothing, leaving the images with no job to take them.
    const link = job.id.startsWith(jobId) ? /-r(\d+)$/.exec(job.id) : null;
    if (jobId === job.id || link) jobId = `${base}-quota-${until}-r${Number(link?.[1] ?? 0) + 1}`;
    const delayMs = Math.max(QUOTA_RESET_MARGIN_MS, Math.ceil(until - clock.now()));
    await deps.queue.add(JOBS.product, { ...job.data, mediaIds: assetIds }, { jobId, delayMs });
    // Recorded after the job exists: the admin shows these images as waiting, until when.
    await shops.addQuotaWaits(job.data.shop, { productId: job.data.productId, assetIds, until, jobId });
    return { until, jobId, assetIds };
  }

  async function eraseShop(job: JobContext<{ shop: string }>): Promise<{ assets: number; backups: number }> {
    const { shop } = job.data;
    const backupsErased = await backups.eraseSite(shop);
    const assets = await ledger.eraseSite(shop);
    await bulk.eraseSite(shop);
    await shops.erase(shop);
    logger.info({ shop, assets, backups: backupsErased }, 'shop erased (shop/redact)');
    return { assets, backups: backupsErased };
  }

  const restore = async (shop: string, assetIds: readonly string[]) => {
    const results: { assetId: string; outcome: RestoreOutcome }[] = [];
    const mine = makeOptimizer();
    for (const assetId of assetIds) {
      // Busy: a job holds the image (often the products/update the previous restore caused, which
      // finds nothing to do and lets go within moments). Wait for it rather than report a non-result.
      let outcome = await mine.restore(shop, assetId);
      for (let wait = 50; outcome.kind === 'busy' && wait <= 5000; wait *= 2) {
        await clock.sleep(wait);
        outcome = await mine.restore(shop, assetId);
      }
      results.push({ assetId, outcome });
    }
    return results;
  };

  async function restoreShop(shop: string) {
    const ids: string[] = [];
    for (let after: string | undefined; ; ) {
      const page = await ledger.list(shop, { limit: 200, ...(after ? { after } : {}) });
      ids.push(...page.filter((a) => a.backupKey).map((a) => a.assetId));
      if (page.length < 200) break;
      after = page[page.length - 1]?.assetId;
    }
    return restore(shop, ids);
  }

  async function restoreJob(job: JobContext<RestoreJob>) {
    const { shop, assetIds } = job.data;
    const results = assetIds === 'all' ? await restoreShop(shop) : await restore(shop, assetIds);
    logger.info({ shop, images: results.length }, 'restore');
    return results;
  }

  const running = deps.queue.work(
    {
      [JOBS.product]: runProductJob,
      [JOBS.eraseShop]: eraseShop,
      [JOBS.restore]: restoreJob,
      ...altText.jobs,
      ...bulk.handlers,
    },
    { concurrency: deps.concurrency ?? deps.config.workerConcurrency },
  );

  // Runs a stopped or killed worker left are driven again (in the background).
  void bulk.resumeOrphans();
  return {
    optimizer,
    running,
    restore,
    restoreShop,
    pruner,
    bulk,
    close: () => {
      bulk.close();
      return running.close();
    },
  };
}
