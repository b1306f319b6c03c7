import { AuthenticationError, Compresso, PermissionError } from '@compresso/client';
import { assetLedger } from '@compresso/integration-kit';
import type { Database, JobQueue } from '@compresso/runtime';
import express, { type Request, type Response } from 'express';
import { z } from 'zod';
import { ShopSettingsSchema, type ShopStore } from './shop-store.ts';
import type { Session } from './shopify-lib.ts';
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

function problems(error: z.ZodError, body: unknown) {
  return error.issues.map((issue) => ({
    field: issue.path.join('.') || '(body)',
    expected: issue.message,
    received:
      JSON.stringify(
        issue.path.reduce<unknown>(
          (v, k) => (v && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined),
          body,
        ),
      ) ?? 'nothing',
  }));
}

function badRequest(res: Response, message: string, details: unknown) {
  res.status(400).json({ error: { code: 'INVALID_REQUEST', message, details } });
}

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
}): express.Router {
  const { shops, queue } = deps;
  const ledger = assetLedger(deps.db);
  const router = express.Router();
  const shopOf = (res: Response) => (res.locals.shopify as { session: Session }).session.shop;

  router.use('/api/admin', deps.authenticated, express.json({ limit: '16kb' }));

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
        'Expected some of {enabled, quality, maxDimension, keepExif}.',
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

  // The page itself holds no data; it asks the API above with App Bridge's session token.
  router.get('/', (_req: Request, res: Response) => {
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    res.send(adminPage(deps.apiKey));
  });
  return router;
}

function adminPage(apiKey: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="shopify-api-key" content="${apiKey.replace(/[^A-Za-z0-9_-]/g, '')}">
<script src="https://cdn.shopify.com/shopifycloud/app-bridge.js"></script>
<title>Compresso</title>
<style>body{font:14px system-ui,sans-serif;margin:1.5rem}table{border-collapse:collapse}td,th{padding:.25rem .6rem;text-align:left}</style>
</head>
<body>
<h1>Compresso</h1>
<p id="status">Loading…</p>
<p id="waiting" hidden></p>
<form id="settings">
<label><input type="checkbox" name="enabled"> Compress new and changed product images</label><br>
<label>Quality <input name="quality" size="4"> (1–100 or auto)</label>
<label>Longest side <input name="maxDimension" size="6"> px</label>
<label><input type="checkbox" name="keepExif"> Keep EXIF</label>
<button>Save</button>
</form>
<h2>Last optimized</h2>
<table><thead><tr><th>File</th><th>Before</th><th>After</th><th>Saved</th><th></th></tr></thead><tbody id="recent"></tbody></table>
<p>Shopify's CDN already serves WebP/AVIF and resized copies; what changes here is the stored original.</p>
<script type="module">
const $ = (s) => document.querySelector(s);
async function load() {
  const s = await (await fetch('/api/admin/status')).json();
  $('#status').textContent = s.connected ? 'Connected to Compresso (' + s.key_source + ' key). Optimized: ' + s.totals.states.optimized : 'Not connected to Compresso.';
  const w = s.waiting;
  $('#waiting').hidden = !w.count;
  if (w.count) $('#waiting').textContent = w.count + (w.count === 1 ? ' image waits' : ' images wait') + ' for your daily Compresso quota to reset at ' + new Date(w.until).toLocaleString() + '. Nothing is lost: they are compressed by themselves then.';
  const f = $('#settings');
  f.enabled.checked = s.settings.enabled; f.quality.value = s.settings.quality; f.maxDimension.value = s.settings.maxDimension ?? ''; f.keepExif.checked = s.settings.keepExif;
  $('#recent').replaceChildren(...s.recent.map((r) => {
    const tr = document.createElement('tr');
    for (const v of [r.filename, r.before, r.after, r.saved_percent + ' %']) { const td = document.createElement('td'); td.textContent = v; tr.append(td); }
    const b = document.createElement('button'); b.textContent = 'Restore';
    b.onclick = () => fetch('/api/admin/restore', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ asset_ids: [r.id] }) }).then(load);
    const td = document.createElement('td'); td.append(b); tr.append(td); return tr;
  }));
}
$('#settings').onsubmit = async (e) => {
  e.preventDefault(); const f = e.target;
  const q = f.quality.value.trim();
  await fetch('/api/admin/settings', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({
    enabled: f.enabled.checked, quality: q === 'auto' ? 'auto' : Number(q), maxDimension: f.maxDimension.value ? Number(f.maxDimension.value) : null, keepExif: f.keepExif.checked }) });
  load();
};
load();
</script>
</body>
</html>`;
}
