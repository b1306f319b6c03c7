import { Compresso } from '@compresso/client';
import {
  type AltBatch,
  type AltMode,
  type AltText,
  type AutoAltOutcome,
  type Clock,
  checkAltTemplate,
  costPacer,
  createAltText,
  isPlatformError,
  type PlatformPort,
  systemClock,
} from '@compresso/integration-kit';
import type { Database, JobContext, JobHandlers, JobQueue, Logger } from '@compresso/runtime';
import type { SessionStorage } from '@shopify/shopify-app-session-storage';
import express, { type Request, type Response } from 'express';
import { z } from 'zod';
import { badRequest, problems } from './admin-problems.ts';
import type { ShopStore } from './shop-store.ts';
import type { Session } from './shopify-lib.ts';
import { type ShopifyApiHandle, shopifyPlatform } from './shopify-platform.ts';

/** Queue jobs of alt text: a batch applied, a batch undone (both run in the worker). */
export const ALT_JOBS = {
  apply: 'shopify.alt-text.apply',
  undo: 'shopify.alt-text.undo',
} as const;

export interface AltTextJob {
  shop: string;
  batchId: string;
}

/** Attempts an alt text job gets (Shopify or the API unavailable): the work goes on where it was. */
const JOB_ATTEMPTS = 5;

const template = z
  .string()
  .max(1000)
  .superRefine((value, ctx) => {
    for (const problem of checkAltTemplate(value)) ctx.addIssue({ code: 'custom', message: problem });
  });
const mode = z.enum(['template', 'ai']);
const scope = z.enum(['missing', 'all']);

const PreviewSchema = z
  .object({ mode, template: template.optional(), scope, limit: z.number().int().min(1).max(50).optional() })
  .strict();
const ApplySchema = z.object({ mode, template: template.optional(), scope }).strict();
const UndoSchema = z
  .object({ batch_id: z.string().regex(/^alt_[A-Za-z0-9]{1,64}$/, 'a batch id, alt_…') })
  .strict();

/** Preview sizes when none is asked: AI asks the server once per image, so fewer. */
const DEFAULT_PREVIEW = { template: 20, ai: 5 } as const;

/** A batch as the admin API shows it (snake_case, times as ISO strings). */
export function batchJson(batch: AltBatch) {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    id: batch.id,
    mode: batch.mode,
    scope: batch.scope,
    changed: batch.changed,
    created_at: iso(batch.createdAt),
    undone: batch.undoneAt !== null,
    state: batch.state,
    template: batch.template,
    unchanged: batch.unchanged,
    failed: batch.failed,
    message: batch.message,
    error: batch.lastError,
    finished_at: iso(batch.finishedAt),
    undone_at: iso(batch.undoneAt),
  };
}

/** The shop's Compresso client (its own key), made once per key. */
export function compressoClients(deps: {
  shops: ShopStore;
  compressoBaseUrl: string;
  fetch?: typeof fetch | undefined;
}): (shop: string) => Promise<Compresso> {
  const clients = new Map<string, { key: string; client: Compresso }>();
  return async (shop) => {
    const key = await deps.shops.key(shop);
    if (!key) throw new Error(`${shop} has no Compresso key (connect one in the app)`);
    const cached = clients.get(shop);
    if (cached?.key === key) return cached.client;
    const client = new Compresso(key, {
      baseUrl: deps.compressoBaseUrl,
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
    });
    clients.set(shop, { key, client });
    return client;
  };
}

export interface ShopifyAltTextDeps {
  db: Database;
  port: PlatformPort;
  shops: ShopStore;
  logger: Logger;
  client(shop: string): Promise<Compresso>;
  clock?: Clock;
}

export interface ShopifyAltText {
  service: AltText;
  /** The worker's handlers of ALT_JOBS. */
  jobs: JobHandlers;
  /**
   * After a product webhook's image is handled: alt text per the shop's `alt_text_mode`, only when
   * the image has none (and the app never wrote one for it). Never fails the job: a problem is logged.
   */
  onProductImage(
    shop: string,
    productId: string,
    assetId: string,
    signal?: AbortSignal,
  ): Promise<AutoAltOutcome | undefined>;
}

/** The worker's side of alt text: the batch jobs and the hook on new product images. */
export function shopifyAltText(deps: ShopifyAltTextDeps): ShopifyAltText {
  const { shops, logger } = deps;
  const service = createAltText({
    db: deps.db,
    port: deps.port,
    client: deps.client,
    clock: deps.clock ?? systemClock,
  });

  async function applyJob(job: JobContext<AltTextJob>) {
    const { shop, batchId } = job.data;
    try {
      const batch = await service.runBatch(shop, batchId, job.signal);
      logger.info({ shop, batch: batchId, changed: batch.changed, failed: batch.failed }, 'alt text batch');
      return {
        batch_id: batchId,
        changed: batch.changed,
        unchanged: batch.unchanged,
        failed: batch.failed,
        message: batch.message,
      };
    } catch (error) {
      if (job.attempt >= JOB_ATTEMPTS && !job.signal.aborted)
        await service.failBatch(shop, batchId, error instanceof Error ? error.message : String(error));
      throw error;
    }
  }

  async function undoJob(job: JobContext<AltTextJob>) {
    const { shop, batchId } = job.data;
    const result = await service.undoBatch(shop, batchId, job.signal);
    logger.info(
      { shop, batch: batchId, restored: result.restored, kept: result.kept },
      'alt text batch undone',
    );
    return { batch_id: batchId, restored: result.restored, kept: result.kept, failed: result.failed };
  }

  return {
    service,
    jobs: { [ALT_JOBS.apply]: applyJob, [ALT_JOBS.undo]: undoJob },
    async onProductImage(shop, productId, assetId, signal) {
      const settings = (await shops.find(shop))?.settings;
      if (!settings || settings.alt_text_mode === 'off') return undefined;
      try {
        const outcome = await service.autoAltText(
          shop,
          assetId,
          { mode: settings.alt_text_mode, template: settings.alt_text_template, parentId: productId },
          signal,
        );
        logger.info(
          {
            shop,
            asset: assetId,
            alt_text: outcome.kind,
            ...(outcome.kind === 'skipped' ? { reason: outcome.reason } : { source: outcome.source }),
          },
          'alt text on arrival',
        );
        return outcome;
      } catch (error) {
        logger.warn(
          { shop, asset: assetId, err: error },
          'alt text on arrival failed; the next product update tries again',
        );
        return undefined;
      }
    },
  };
}

/**
 * The admin's alt text API (mounted inside `adminRouter`, behind its App Bridge session-token check):
 * preview, apply (a queued job), the batches, undo (a queued job). JSON in snake_case; bad input is
 * 400 `INVALID_REQUEST` naming each field.
 */
export function adminAltRouter(deps: {
  db: Database;
  queue: JobQueue;
  shops: ShopStore;
  api: ShopifyApiHandle;
  sessions: SessionStorage;
  compressoBaseUrl: string;
  fetch?: typeof fetch | undefined;
  clock?: Clock;
}): express.Router {
  const { queue, shops } = deps;
  const clock = deps.clock ?? systemClock;
  const port = shopifyPlatform({
    api: deps.api,
    sessions: deps.sessions,
    pacer: costPacer({ clock }),
    clock,
    ...(deps.fetch ? { fetch: deps.fetch } : {}),
  });
  const service = createAltText({ db: deps.db, port, clock, client: compressoClients(deps) });
  const router = express.Router();
  const shopOf = (res: Response): string | undefined =>
    (res.locals.shopify as { session?: Session } | undefined)?.session?.shop;
  const refuse = (res: Response, status: number, code: string, message: string) =>
    res.status(status).json({ error: { code, message } });

  /** The shop of the verified session token, or a 401 (this router is only mounted behind the check). */
  function shopFor(res: Response): string | undefined {
    const shop = shopOf(res);
    if (!shop) refuse(res, 401, 'UNAUTHENTICATED', 'A session token is needed.');
    return shop;
  }

  router.post('/api/admin/alt-text/preview', async (req: Request, res: Response) => {
    const shop = shopFor(res);
    if (!shop) return;
    const parsed = PreviewSchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      badRequest(
        res,
        'Expected {"mode": "template" | "ai", "template"?: "…{product_title}…", "scope": "missing" | "all", "limit"?: 1–50}.',
        problems(parsed.error, req.body),
      );
      return;
    }
    const { mode: asked, scope: inScope } = parsed.data;
    const settings = (await shops.find(shop))?.settings;
    try {
      const preview = await service.preview(shop, {
        mode: asked as AltMode,
        template: parsed.data.template ?? settings?.alt_text_template,
        scope: inScope,
        limit: parsed.data.limit ?? DEFAULT_PREVIEW[asked],
      });
      res.json({
        items: preview.items.map((item) => ({
          asset_id: item.assetId,
          product_title: item.productTitle,
          filename: item.filename,
          current: item.current,
          proposed: item.proposed,
          source: item.source,
          ...(item.error ? { error: item.error } : {}),
        })),
        source: preview.source,
        message: preview.message,
      });
    } catch (error) {
      if (isPlatformError(error)) {
        refuse(res, 502, 'SHOPIFY_ERROR', `Shopify could not list the images: ${error.message}`);
        return;
      }
      throw error;
    }
  });

  router.post('/api/admin/alt-text/apply', async (req: Request, res: Response) => {
    const shop = shopFor(res);
    if (!shop) return;
    const parsed = ApplySchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      badRequest(
        res,
        'Expected {"mode": "template" | "ai", "template"?: "…{product_title}…", "scope": "missing" | "all"}.',
        problems(parsed.error, req.body),
      );
      return;
    }
    const running = await service.activeBatch(shop);
    if (running) {
      res.status(409).json({
        error: {
          code: 'BATCH_IN_PROGRESS',
          message: 'An alt text batch is still being applied; wait for it to finish.',
          batch_id: running.id,
        },
      });
      return;
    }
    const settings = (await shops.find(shop))?.settings;
    const batch = await service.createBatch(shop, {
      mode: parsed.data.mode,
      template: parsed.data.template ?? settings?.alt_text_template,
      scope: parsed.data.scope,
    });
    const job: AltTextJob = { shop, batchId: batch.id };
    const { id } = await queue.add(ALT_JOBS.apply, job, {
      jobId: `alt-apply-${batch.id}`,
      attempts: JOB_ATTEMPTS,
    });
    res.status(202).json({ batch_id: batch.id, job_id: id });
  });

  router.get('/api/admin/alt-text/batches', async (_req: Request, res: Response) => {
    const shop = shopFor(res);
    if (!shop) return;
    res.json({ batches: (await service.listBatches(shop, { limit: 50 })).map(batchJson) });
  });

  router.post('/api/admin/alt-text/undo', async (req: Request, res: Response) => {
    const shop = shopFor(res);
    if (!shop) return;
    const parsed = UndoSchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      badRequest(res, 'Expected {"batch_id": "alt_…"}.', problems(parsed.error, req.body));
      return;
    }
    const batch = await service.getBatch(shop, parsed.data.batch_id);
    if (!batch) {
      refuse(res, 404, 'NOT_FOUND', 'No such alt text batch for this shop.');
      return;
    }
    if (batch.undoneAt !== null) {
      refuse(res, 409, 'ALREADY_UNDONE', 'This batch was undone already.');
      return;
    }
    if (batch.state === 'queued' || batch.state === 'running') {
      refuse(
        res,
        409,
        'BATCH_IN_PROGRESS',
        'This batch is still being applied; undo it once it has finished.',
      );
      return;
    }
    const job: AltTextJob = { shop, batchId: batch.id };
    // One undo job per batch at a time; after a partly failed undo, a new request runs another.
    const { id } = await queue.add(ALT_JOBS.undo, job, {
      jobId: `alt-undo-${batch.id}-${clock.now()}`,
      attempts: JOB_ATTEMPTS,
    });
    res.status(202).json({ batch_id: batch.id, job_id: id });
  });

  return router;
}
