import { BadRequestError, Compresso, TooLargeError, UnsupportedImageError } from '@compresso/client';
import {
  assetLedger,
  type Clock,
  costPacer,
  isPlatformError,
  runStore,
  systemClock,
} from '@compresso/integration-kit';
import type { Database, JobQueue } from '@compresso/runtime';
import type { SessionStorage } from '@shopify/shopify-app-session-storage';
import express, { type Request, type Response } from 'express';
import { z } from 'zod';
import { BULK_JOBS, type BulkDriveJob, type BulkRetryJob, bulkFailures, failureOf, runView } from './bulk.ts';
import type { ShopStore } from './shop-store.ts';
import type { Session } from './shopify-lib.ts';
import { type ShopifyApiHandle, shopifyPlatform } from './shopify-platform.ts';
import { siteSettings } from './worker.ts';

/**
 * The embedded admin's bulk optimize API (snake_case JSON, like the other admin routes). Mounted by
 * admin.ts inside its router, after the session-token check of every `/api/admin` path:
 *
 * - `GET /api/admin/bulk` → `{run, failures}`: the shop's latest run (null before the first) and
 *   its images that failed, with their product, file, code and reason;
 * - `POST /api/admin/bulk/start` (202: a new run, 200: the one already active), `pause`, `resume`,
 *   `cancel` → `{run}`; a transition the run is not in is 409 `RUN_STATE`, no run 404 `NO_RUN`;
 * - `POST /api/admin/bulk/retry` `{asset_ids?}` → 202 `{job_id, assets}`: failed images again;
 * - `POST /api/admin/bulk/estimate` → `{sampled, total_images, estimated_bytes_saved,
 *   estimated_percent, unreadable}`: a sample of the catalog's images through `/api/v1/info` (nothing
 *   written); a sampled image that cannot be read is left out and counted in `unreadable`.
 */
export interface AdminBulkDeps {
  db: Database;
  queue: JobQueue;
  shops: ShopStore;
  /** The Compresso API the estimate asks. */
  compressoBaseUrl: string;
  fetch?: typeof fetch;
  /** The configured @shopify/shopify-api and the sessions: the estimate reads a sample of images. */
  api?: ShopifyApiHandle;
  sessions?: SessionStorage;
  clock?: Clock;
  /** Images the estimate samples (default 12). */
  estimateSample?: number;
}

const RetrySchema = z
  .object({
    asset_ids: z
      .array(z.string().regex(/^gid:\/\/shopify\/MediaImage\/\d+$/))
      .min(1)
      .max(250)
      .optional(),
  })
  .strict();

const error = (res: Response, status: number, code: string, message: string, details?: unknown) =>
  res.status(status).json({ error: { code, message, ...(details === undefined ? {} : { details }) } });

/** Savings the pipeline would not act on (under 5 % or 512 bytes) count as none, as in a run. */
const worthIt = (before: number, after: number) => before - after >= Math.max(512, before * 0.05);

export function adminBulkRouter(deps: AdminBulkDeps): express.Router {
  const { queue, shops } = deps;
  const clock = deps.clock ?? systemClock;
  const runs = runStore(deps.db);
  const ledger = assetLedger(deps.db);
  const failures = bulkFailures(deps.db);
  const router = express.Router();
  const shopOf = (res: Response) => (res.locals.shopify as { session: Session }).session.shop;
  const port =
    deps.api && deps.sessions
      ? shopifyPlatform({
          api: deps.api,
          sessions: deps.sessions,
          pacer: costPacer({ clock }),
          clock,
          listing: 'incremental',
          ...(deps.fetch ? { fetch: deps.fetch } : {}),
        })
      : undefined;

  const latest = async (shop: string) => (await runs.list(shop, 1))[0];
  const drive = (run: { id: string; site: string }) =>
    queue.add(BULK_JOBS.drive, { shop: run.site, runId: run.id } satisfies BulkDriveJob, {
      jobId: `bulk-${run.id}-${clock.now()}`,
    });

  router.get('/api/admin/bulk', async (_req: Request, res: Response) => {
    const shop = shopOf(res);
    const run = await latest(shop);
    const failed = await ledger.list(shop, { state: 'failed', limit: 200 });
    const titles = await failures.titles(
      shop,
      failed.map((a) => a.assetId),
    );
    res.json({
      run: run ? runView(run, clock.now()) : null,
      failures: failed.map((a) => ({
        asset_id: a.assetId,
        product_title: titles.get(a.assetId) ?? null,
        filename: a.filename,
        ...failureOf(a.lastError),
      })),
    });
  });

  router.post('/api/admin/bulk/start', async (_req: Request, res: Response) => {
    const shop = shopOf(res);
    const { run, created } = await runs.start(shop, clock.now());
    if (created) await drive(run);
    res.status(created ? 202 : 200).json({ run: runView(run, clock.now()) });
  });

  const transition =
    (from: ('running' | 'paused')[], to: 'running' | 'paused' | 'cancelled') =>
    async (_req: Request, res: Response) => {
      const shop = shopOf(res);
      const run = await latest(shop);
      if (!run) return void error(res, 404, 'NO_RUN', 'This shop has no bulk run; start one first.');
      if (!(await runs.transition(run.id, from, to, clock.now()))) {
        return void error(
          res,
          409,
          'RUN_STATE',
          `The run is ${run.state}; it can be ${to === 'running' ? 'resumed' : to} only when ${from.join(' or ')}.`,
        );
      }
      // Resumed: a worker drives it again from its last committed page. Paused or cancelled: its
      // driver stops after the image in hand.
      if (to === 'running') await drive(run);
      res.json({ run: runView((await runs.get(run.id))!, clock.now()) });
    };
  router.post('/api/admin/bulk/pause', transition(['running'], 'paused'));
  router.post('/api/admin/bulk/resume', transition(['paused'], 'running'));
  router.post('/api/admin/bulk/cancel', transition(['running', 'paused'], 'cancelled'));

  router.post('/api/admin/bulk/retry', async (req: Request, res: Response) => {
    const parsed = RetrySchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      return void error(
        res,
        400,
        'INVALID_REQUEST',
        'Expected {} (every failed image) or {"asset_ids": [MediaImage gids]}.',
        parsed.error.issues.map((i) => ({ field: i.path.join('.') || '(body)', expected: i.message })),
      );
    }
    const shop = shopOf(res);
    const job: BulkRetryJob = { shop, assetIds: parsed.data.asset_ids ?? 'failed' };
    const { id } = await queue.add(BULK_JOBS.retry, job, { attempts: 3 });
    res.status(202).json({ job_id: id, assets: parsed.data.asset_ids?.length ?? null });
  });

  router.post('/api/admin/bulk/estimate', async (_req: Request, res: Response) => {
    const shop = shopOf(res);
    const key = await shops.key(shop);
    const record = await shops.find(shop);
    if (!port || !key || !record)
      return void error(res, 409, 'NOT_CONNECTED', 'This shop is not connected to Compresso yet.');
    const client = new Compresso(key, {
      baseUrl: deps.compressoBaseUrl,
      maxRetries: 1,
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
    });
    const settings = siteSettings(record.settings);
    const options = {
      ...(settings.quality !== undefined ? { quality: settings.quality } : {}),
      ...(settings.maxDimension !== undefined ? { maxDimension: settings.maxDimension } : {}),
      ...(settings.stripExif !== undefined ? { stripExif: settings.stripExif } : {}),
    };
    const sample = deps.estimateSample ?? 12;
    const page = await port.listAssets(shop, { limit: sample });
    let before = 0;
    let saved = 0;
    let sampled = 0;
    // An image of the sample that cannot be read (the CDN answers an error page, or bytes that are not
    // an image the API takes) is left out of the estimate and counted, not a failure of the estimate:
    // a bulk run would fail that one image with its reason and go on.
    let unreadable = 0;
    for (const asset of page.assets) {
      let info: Awaited<ReturnType<typeof client.info>>;
      try {
        const { bytes } = await port.fetchAsset(shop, asset.id);
        info = await client.info(bytes, { ...options, filename: asset.filename });
      } catch (err) {
        const imageProblem =
          (isPlatformError(err) && !err.retryable) ||
          err instanceof UnsupportedImageError ||
          err instanceof TooLargeError ||
          err instanceof BadRequestError;
        if (!imageProblem) throw err;
        unreadable++;
        continue;
      }
      sampled++;
      before += info.input_size;
      if (worthIt(info.input_size, info.output_size)) saved += info.input_size - info.output_size;
    }
    // The catalog's size: exact when the sample was all of it, else the last run's count or, before
    // any, the shop's products times the sample's images per product.
    let total = page.assets.length;
    if (page.cursor !== null) {
      const run = await latest(shop);
      if (run?.total) total = run.total;
      else {
        const products = await port.countProducts(shop);
        const sampledProducts = new Set(page.assets.map((a) => a.parentId)).size;
        total = Math.round(products * (page.assets.length / Math.max(1, sampledProducts)));
      }
    }
    const percent = before > 0 ? Math.round((saved / before) * 1000) / 10 : 0;
    res.json({
      sampled,
      unreadable,
      total_images: total,
      estimated_bytes_saved: sampled > 0 ? Math.round((saved / sampled) * total) : 0,
      estimated_percent: percent,
    });
  });

  return router;
}
