import { AuthenticationError, Compresso, PermissionError } from '@compresso/client';
import { assetLedger } from '@compresso/integration-kit';
import type { BlobStore, Database, JobQueue } from '@compresso/runtime';
import type { SessionStorage } from '@shopify/shopify-app-session-storage';
import express, { type Request, type Response } from 'express';
import { z } from 'zod';
import { adminAltRouter } from './admin-alt.ts';
import { adminBulkRouter } from './admin-bulk.ts';
import { dashboardRouter } from './admin-dashboard.ts';
import { badRequest, problems } from './admin-problems.ts';
import { ShopSettingsSchema, type ShopStore } from './shop-store.ts';
import type { Session } from './shopify-lib.ts';
import type { ShopifyApiHandle } from './shopify-platform.ts';
import { JOBS } from './webhooks.ts';

/** The restore job: images of a shop put back to their originals (by id, or every one the ledger has). */
export interface RestoreJob {
  shop: string;
  assetIds: string[] | 'all';
}

const SettingsPatchSchema = ShopSettingsSchema.partial().strict();
const KeyRequestSchema = z
  .object({ key: z.string().regex(/^cmp_live_[A-Za-z0-9_-]{20,100}$/, 'a Compresso API key, cmp_live_…') })
  .strict();
const RestoreRequestSchema = z.union([
  z
    .object({
      asset_ids: z
        .array(z.string().regex(/^gid:\/\/shopify\/MediaImage\/\d+$/))
        .min(1)
        .max(250),
    })
    .strict(),
  z.object({ all: z.literal(true) }).strict(),
]);

/**
 * The embedded admin's JSON API, behind App Bridge session tokens (`validateAuthenticatedSession`:
 * the token is verified with the app secret, the shop's session loaded and checked against Shopify):
 * the connection, the settings, the last optimized images with their savings, and restore (queued:
 * it runs in the worker, wherever that is).
 */
export function adminRouter(deps: {
  db: Database;
  queue: JobQueue;
  shops: ShopStore;
  authenticated: express.RequestHandler;
  apiKey: string;
  /** The Compresso API a merchant's own key is checked against. */
  compressoBaseUrl: string;
  fetch?: typeof fetch;
  /** For the dashboard: the backup store's blobs, the Shopify API and the sessions. */
  blobs: BlobStore;
  api: ShopifyApiHandle;
  sessions: SessionStorage;
}): express.Router {
  const { shops, queue } = deps;
  const ledger = assetLedger(deps.db);
  const router = express.Router();
  const shopOf = (res: Response) => (res.locals.shopify as { session: Session }).session.shop;

  router.use('/api/admin', deps.authenticated, express.json({ limit: '16kb' }));
  router.use(adminBulkRouter(deps)); // /api/admin/bulk… (admin-bulk.ts), behind the same session token
  router.use(adminAltRouter(deps));
  router.use(dashboardRouter(deps));

  router.get('/api/admin/status', async (_req: Request, res: Response) => {
    const shop = shopOf(res);
    const record = await shops.find(shop);
    const assets = await ledger.list(shop, { state: 'optimized', limit: 500 });
    const recent = assets
      .sort((a, b) => b.updatedAt - a.updatedAt)
      .slice(0, 20)
      .map((a) => ({
        id: a.assetId,
        filename: a.filename,
        before: a.originalSize,
        after: a.currentSize,
        saved_percent:
          a.originalSize && a.currentSize
            ? Math.round((1 - a.currentSize / a.originalSize) * 1000) / 10
            : null,
      }));
    // Images whose turn waits for the shop's Compresso quota to reset (a delayed job takes them then).
    const waits = await shops.quotaWaits(shop, 50);
    const iso = (ms: number) => new Date(ms).toISOString();
    res.json({
      shop,
      waiting: {
        count: waits.count,
        until: waits.until === null ? null : iso(waits.until),
        images: waits.images.map((w) => ({ id: w.assetId, product_id: w.productId, until: iso(w.until) })),
      },
      connected: record?.hasKey ?? false,
      key_source: record?.keySource ?? null,
      settings: record?.settings ?? null,
      totals: await ledger.totals(shop),
      recent,
    });
  });

  router.post('/api/admin/settings', async (req: Request, res: Response) => {
    const parsed = SettingsPatchSchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      badRequest(
        res,
        'Expected some of {enabled, quality, maxDimension, keepExif, backupRetentionDays, alt_text_mode, alt_text_template}.',
        problems(parsed.error, req.body),
      );
      return;
    }
    res.json({ settings: await shops.updateSettings(shopOf(res), parsed.data) });
  });

  // A merchant who has a Compresso account connects its key instead of the one made on install: it
  // is checked against the API first (a key that does not work, or has no API plan, is refused).
  router.post('/api/admin/key', async (req: Request, res: Response) => {
    const parsed = KeyRequestSchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      badRequest(res, 'Expected {"key": "cmp_live_…"}.', problems(parsed.error, req.body));
      return;
    }
    const client = new Compresso(parsed.data.key, {
      baseUrl: deps.compressoBaseUrl,
      maxRetries: 1,
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
    });
    try {
      const usage = await client.usage();
      await shops.setKey(shopOf(res), { secret: parsed.data.key, source: 'merchant' });
      res.json({ connected: true, key_source: 'merchant', plan: usage.plan });
    } catch (error) {
      if (error instanceof AuthenticationError || error instanceof PermissionError) {
        badRequest(res, `The API refused this key: ${error.message}`, [
          { field: 'key', expected: 'a working key of an account with the API', received: 'a refused key' },
        ]);
        return;
      }
      throw error;
    }
  });

  router.post('/api/admin/restore', async (req: Request, res: Response) => {
    const parsed = RestoreRequestSchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      badRequest(
        res,
        'Expected {"asset_ids": [MediaImage gids]} or {"all": true}.',
        problems(parsed.error, req.body),
      );
      return;
    }
    const job: RestoreJob = {
      shop: shopOf(res),
      assetIds: 'all' in parsed.data ? 'all' : parsed.data.asset_ids,
    };
    const { id } = await queue.add(JOBS.restore, job, { attempts: 5 });
    res.status(202).json({ job_id: id });
  });

  router.get('/api/admin/jobs/:id', async (req: Request, res: Response) => {
    const job = await queue.getJob<RestoreJob>(String(req.params.id));
    if (!job || job.data.shop !== shopOf(res)) {
      res.status(404).json({ error: { code: 'NOT_FOUND', message: 'No such job for this shop.' } });
      return;
    }
    res.json({ id: job.id, state: job.state, result: job.result ?? null, error: job.failedReason ?? null });
  });

  return router;
}
