import { readFileSync } from 'node:fs';
import { Compresso, type CompressoError, RateLimitError } from '@compresso/client';
import {
  type AssetRecord,
  assetLedger,
  BackupError,
  backupStore,
  costPacer,
  isPlatformError,
  type PlatformPort,
  systemClock,
} from '@compresso/integration-kit';
import type { BlobStore, Database } from '@compresso/runtime';
import type { SessionStorage } from '@shopify/shopify-app-session-storage';
import express, { type Request, type Response } from 'express';
import { BACKUP_PREFIX } from './retention.ts';
import type { ShopStore } from './shop-store.ts';
import { type Session, shopifyApiLib } from './shopify-lib.ts';
import { type ShopifyApiHandle, shopifyPlatform } from './shopify-platform.ts';

/** The screens of the embedded admin; App Bridge's nav menu links to each path, the server answers the page at all of them. */
export const SCREENS = [
  { path: '/', label: 'Overview' },
  { path: '/bulk', label: 'Optimize all' },
  { path: '/alt-text', label: 'Alt text' },
  { path: '/images', label: 'Images' },
  { path: '/settings', label: 'Settings' },
] as const;

/** How long the quota read from the API is reused: `/api/v1/usage` counts as one request of the quota. */
export const QUOTA_CACHE_MS = 60_000;

// The listing's requested cost by Shopify's rule (2 + first × node) is about 2 + 5 × (3 + 25 × 3) ≈ 400
// points: a fifth of a standard bucket, refilled in a few seconds.
const PRODUCTS_PER_PAGE = 5;
const MEDIA_PER_PRODUCT = 25;
/** A THROTTLED answer is waited out (once or twice) when the bucket refills within this. */
const MAX_THROTTLE_WAIT_MS = 5000;
const CURSOR = /^[A-Za-z0-9+/=_-]{1,512}$/;
const MEDIA_NUMBER = /^\d{1,20}$/;

const IMAGES_QUERY = /* GraphQL */ `
  query CompressoDashboardImages($first: Int!, $after: String) {
    products(first: $first, after: $after) {
      edges {
        cursor
        node {
          id
          title
          media(first: ${MEDIA_PER_PRODUCT}) {
            nodes { ... on MediaImage { id alt mimeType image { url } originalSource { url fileSize } } }
            pageInfo { hasNextPage }
          }
        }
      }
      pageInfo { hasNextPage endCursor }
    }
  }
`;

interface MediaNode {
  id?: string;
  alt?: string | null;
  mimeType?: string | null;
  image?: { url?: string | null } | null;
  originalSource?: { url?: string | null; fileSize?: number | null } | null;
}

interface ProductsPage {
  products: {
    edges: {
      cursor: string;
      node: {
        id: string;
        title: string;
        media: { nodes: MediaNode[]; pageInfo?: { hasNextPage: boolean } };
      };
    }[];
    pageInfo: { hasNextPage: boolean; endCursor: string | null };
  };
}

class Throttled extends Error {
  readonly waitMs: number;
  constructor(waitMs: number) {
    super(`throttled for ${waitMs} ms`);
    this.waitMs = waitMs;
  }
}

/** One page of products with their images; a THROTTLED answer is waited out when the bucket refills soon. */
async function listProducts(
  api: ShopifyApiHandle,
  session: Session,
  cursor: string | null,
): Promise<ProductsPage> {
  for (let attempt = 0; ; attempt++) {
    try {
      const client = new api.clients.Graphql({ session });
      const response = await client.request(IMAGES_QUERY, {
        variables: { first: PRODUCTS_PER_PAGE, after: cursor },
      });
      return response.data as ProductsPage;
    } catch (error) {
      if (!(error instanceof shopifyApiLib.GraphqlQueryError)) throw error;
      const body = error.body as {
        errors?: { graphQLErrors?: { extensions?: { code?: string } }[] };
        extensions?: {
          cost?: {
            requestedQueryCost?: number;
            throttleStatus?: { currentlyAvailable: number; restoreRate: number };
          };
        };
      };
      if (!body?.errors?.graphQLErrors?.some((e) => e.extensions?.code === 'THROTTLED')) throw error;
      const cost = body.extensions?.cost;
      const status = cost?.throttleStatus;
      const waitMs = status
        ? Math.ceil(
            (Math.max(0, (cost?.requestedQueryCost ?? 400) - status.currentlyAvailable) /
              Math.max(status.restoreRate, 0.001)) *
              1000,
          ) + 50
        : 2000;
      if (attempt >= 2 || waitMs > MAX_THROTTLE_WAIT_MS) throw new Throttled(waitMs);
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
}

export interface DashboardDeps {
  db: Database;
  shops: ShopStore;
  blobs: BlobStore;
  api: ShopifyApiHandle;
  sessions: SessionStorage;
  apiKey: string;
  compressoBaseUrl: string;
  /** How the app reaches the Compresso API and downloads from the CDN (default: global fetch). */
  fetch?: typeof fetch;
  now?: () => number;
}

function fail(res: Response, status: number, code: string, message: string, extra: object = {}) {
  res.status(status).json({ error: { code, message, ...extra } });
}

const percent = (before: number, after: number) =>
  before > 0 ? Math.round((1 - after / before) * 1000) / 10 : 0;

/** One image of the list, as the page shows it. */
function imageRow(product: { id: string; title: string }, node: MediaNode, record: AssetRecord | undefined) {
  const optimized = record?.state === 'optimized';
  const before = record?.originalSize ?? null;
  const after = optimized ? (record?.currentSize ?? null) : (node.originalSource?.fileSize ?? null);
  return {
    asset_id: node.id as string,
    product_id: product.id,
    product_title: product.title,
    filename: filenameOf(node.originalSource?.url ?? node.image?.url ?? '') || record?.filename || 'image',
    thumbnail_url: node.image?.url ?? null,
    alt: node.alt || null,
    state: record?.state ?? 'not_seen',
    reason: record?.reason ?? record?.lastError ?? null,
    bytes_before: before,
    bytes_now: after,
    bytes_saved: optimized && before !== null && after !== null ? before - after : 0,
    percent_saved: optimized && before !== null && after !== null ? percent(before, after) : 0,
    has_original: Boolean(record?.backupKey),
  };
}

function filenameOf(url: string): string {
  if (!url) return '';
  try {
    const last = new URL(url).pathname.split('/').pop() ?? '';
    return decodeURIComponent(last);
  } catch {
    return '';
  }
}

/**
 * The merchant's dashboard: the page (one document for every screen, its script and style as static
 * files) and the JSON it reads beyond admin.ts's — the overview (ledger totals and today's quota),
 * the image list (Shopify's products and media joined with the ledger) and an image's original
 * (from the backup store, checksum verified) and current bytes (from Shopify's CDN), which the page
 * fetches with its session token into object URLs for the before/after comparison. Mounted inside
 * adminRouter, after its `/api/admin` session-token check.
 */
export function dashboardRouter(deps: DashboardDeps): express.Router {
  const { shops } = deps;
  const now = deps.now ?? Date.now;
  const ledger = assetLedger(deps.db);
  const backups = backupStore({ blobs: deps.blobs, prefix: BACKUP_PREFIX });
  const port: PlatformPort = shopifyPlatform({
    api: deps.api,
    sessions: deps.sessions,
    pacer: costPacer({ clock: systemClock }),
    clock: systemClock,
    ...(deps.fetch ? { fetch: deps.fetch } : {}),
  });
  const quotaCache = new Map<string, { at: number; key: string; value: object }>();
  const router = express.Router();
  const shopOf = (res: Response) => (res.locals.shopify as { session: Session }).session.shop;

  async function quotaOf(shop: string): Promise<object> {
    const key = await shops.key(shop);
    if (!key)
      return {
        available: false,
        message: 'No Compresso key is connected yet. Connect one under Settings.',
      };
    const cached = quotaCache.get(shop);
    if (cached && cached.key === key && now() - cached.at < QUOTA_CACHE_MS) return cached.value;
    const client = new Compresso(key, {
      baseUrl: deps.compressoBaseUrl,
      maxRetries: 1,
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
    });
    let value: object;
    try {
      const usage = await client.usage();
      value = {
        available: true,
        plan: usage.plan,
        used: usage.used,
        limit: usage.limit,
        remaining: usage.remaining,
        resets_at: usage.resetsAt,
        checked_at: new Date(now()).toISOString(),
      };
    } catch (error) {
      const e = error as CompressoError;
      if (error instanceof RateLimitError && e.code === 'QUOTA_EXCEEDED') {
        const details = (e.details ?? {}) as { limit?: number; used?: number; resets_at?: string };
        value = {
          available: true,
          used: details.used ?? details.limit ?? null,
          limit: details.limit ?? null,
          remaining: 0,
          resets_at: details.resets_at ?? error.resetAt?.toISOString() ?? null,
          checked_at: new Date(now()).toISOString(),
        };
      } else {
        return {
          available: false,
          message: `Compresso could not say how much of today's quota is used (${e.code ?? 'unreachable'}: ${e.message}). Try again in a minute.`,
        };
      }
    }
    quotaCache.set(shop, { at: now(), key, value });
    return value;
  }

  router.get('/api/admin/overview', async (_req: Request, res: Response) => {
    const shop = shopOf(res);
    const record = await shops.find(shop);
    const totals = await ledger.totals(shop);
    const saved = totals.bytesBefore - totals.bytesAfter;
    res.json({
      shop,
      connected: record?.hasKey ?? false,
      key_source: record?.keySource ?? null,
      auto_compress: record?.settings.enabled ?? false,
      images_optimized: totals.states.optimized,
      images: totals.states,
      bytes_before: totals.bytesBefore,
      bytes_after: totals.bytesAfter,
      bytes_saved: saved,
      percent_saved: percent(totals.bytesBefore, totals.bytesAfter),
      quota: await quotaOf(shop),
      // Images whose turn waits for the quota's reset (a delayed job takes them then).
      waiting: await shops.quotaWaits(shop, 0).then((w) => ({
        count: w.count,
        until: w.until === null ? null : new Date(w.until).toISOString(),
      })),
    });
  });

  router.get('/api/admin/images', async (req: Request, res: Response) => {
    const shop = shopOf(res);
    const cursor = typeof req.query.cursor === 'string' && req.query.cursor !== '' ? req.query.cursor : null;
    if (cursor !== null && !CURSOR.test(cursor)) {
      fail(res, 400, 'INVALID_REQUEST', 'cursor must be the next_cursor of an earlier page.', {
        details: [{ field: 'cursor', expected: 'a next_cursor value', received: JSON.stringify(cursor) }],
      });
      return;
    }
    const session = await deps.sessions.loadSession(deps.api.session.getOfflineId(shop));
    if (!session?.accessToken) {
      fail(
        res,
        409,
        'NOT_INSTALLED',
        'The app is not installed on this shop. Open it again from Apps in your Shopify admin.',
      );
      return;
    }
    let data: ProductsPage;
    try {
      data = await listProducts(deps.api, session, cursor);
    } catch (error) {
      if (error instanceof Throttled) {
        res.setHeader('Retry-After', String(Math.ceil(error.waitMs / 1000)));
        fail(
          res,
          503,
          'SHOPIFY_BUSY',
          'Shopify is busy answering other requests for your shop. Try again in a few seconds.',
        );
        return;
      }
      if (error instanceof shopifyApiLib.GraphqlQueryError) {
        fail(
          res,
          400,
          'INVALID_REQUEST',
          'Shopify did not accept this page of the list. Start again from the first page.',
        );
        return;
      }
      fail(res, 503, 'SHOPIFY_UNAVAILABLE', 'Shopify could not be reached. Try again in a minute.');
      return;
    }
    const items = [];
    const notes: string[] = [];
    for (const edge of data.products.edges) {
      const media = edge.node.media.nodes.filter((m) => m.id?.includes('/MediaImage/'));
      for (const node of media) {
        items.push(imageRow(edge.node, node, await ledger.get(shop, node.id as string)));
      }
      if (edge.node.media.pageInfo?.hasNextPage)
        notes.push(`${edge.node.title}: only its first ${MEDIA_PER_PRODUCT} images are listed here.`);
    }
    res.json({
      items,
      next_cursor: data.products.pageInfo.hasNextPage ? data.products.pageInfo.endCursor : null,
      notes,
    });
  });

  // The original as it was before the app changed it, from the backup store (checksum verified).
  router.get('/api/admin/images/:n/original', async (req: Request, res: Response) => {
    const n = String(req.params.n);
    if (!MEDIA_NUMBER.test(n)) {
      fail(
        res,
        400,
        'INVALID_REQUEST',
        'Expected the number of a MediaImage (gid://shopify/MediaImage/<n>).',
      );
      return;
    }
    const shop = shopOf(res);
    const record = await ledger.get(shop, `gid://shopify/MediaImage/${n}`);
    if (!record?.backupKey) {
      fail(res, 404, 'NO_ORIGINAL', 'The app keeps no original of this image: it has not changed it.');
      return;
    }
    try {
      const { backup, bytes } = await backups.read(record.backupKey);
      sendImage(res, bytes, backup.contentType);
    } catch (error) {
      if (error instanceof BackupError) {
        fail(
          res,
          error.code === 'MISSING' ? 404 : 409,
          error.code === 'MISSING' ? 'NO_ORIGINAL' : 'ORIGINAL_DAMAGED',
          error.code === 'MISSING'
            ? 'The original of this image is no longer kept (past the backup retention).'
            : 'The kept original does not match its checksum; it is not shown. Contact support.',
        );
        return;
      }
      throw error;
    }
  });

  // What Shopify serves now, downloaded from its CDN.
  router.get('/api/admin/images/:n/current', async (req: Request, res: Response) => {
    const n = String(req.params.n);
    if (!MEDIA_NUMBER.test(n)) {
      fail(
        res,
        400,
        'INVALID_REQUEST',
        'Expected the number of a MediaImage (gid://shopify/MediaImage/<n>).',
      );
      return;
    }
    try {
      const { asset, bytes } = await port.fetchAsset(shopOf(res), `gid://shopify/MediaImage/${n}`);
      sendImage(res, bytes, asset.contentType);
    } catch (error) {
      if (isPlatformError(error)) {
        if (error.code === 'NOT_FOUND') {
          fail(res, 404, 'NOT_FOUND', 'Shopify has no such image in this shop (it may have been deleted).');
          return;
        }
        if (error.code === 'UNAUTHORIZED') {
          fail(
            res,
            409,
            'NOT_INSTALLED',
            'Shopify refused the app’s access. Open the app again from Apps in your Shopify admin.',
          );
          return;
        }
        res.setHeader('Retry-After', '5');
        fail(
          res,
          503,
          'SHOPIFY_UNAVAILABLE',
          'Shopify could not send this image right now. Try again in a moment.',
        );
        return;
      }
      throw error;
    }
  });

  router.get('/assets/dashboard.js', (_req, res) => sendAsset(res, 'dashboard.js', 'text/javascript'));
  router.get('/assets/dashboard.css', (_req, res) => sendAsset(res, 'dashboard.css', 'text/css'));

  // The page holds no data: it asks the API above with App Bridge's session token.
  const page = dashboardPage(deps.apiKey);
  router.get(
    SCREENS.map((s) => s.path),
    (req: Request, res: Response) => {
      const shop = typeof req.query.shop === 'string' ? req.query.shop : '';
      // Shopify admin embeds the app: only it (and the shop's own admin) may frame the page.
      const ancestors = /^[a-z0-9][a-z0-9-]*\.myshopify\.com$/.test(shop)
        ? `https://${shop} https://admin.shopify.com`
        : 'https://*.myshopify.com https://admin.shopify.com';
      res.setHeader('Content-Security-Policy', `frame-ancestors ${ancestors};`);
      res.setHeader('Content-Type', 'text/html; charset=utf-8');
      res.send(page);
    },
  );
  return router;
}

function sendImage(res: Response, bytes: Uint8Array, contentType: string) {
  const type = /^image\/[a-z0-9.+-]+$/i.test(contentType) ? contentType : 'application/octet-stream';
  res.setHeader('Content-Type', type);
  res.setHeader('Cache-Control', 'private, no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Content-Length', String(bytes.byteLength));
  res.end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}

const ASSETS = new URL('./dashboard/', import.meta.url);
const assetCache = new Map<string, string>();
function sendAsset(res: Response, name: string, type: string) {
  let text = assetCache.get(name);
  if (text === undefined) {
    text = readFileSync(new URL(name, ASSETS), 'utf8');
    assetCache.set(name, text);
  }
  res.setHeader('Content-Type', `${type}; charset=utf-8`);
  res.setHeader('Cache-Control', 'no-cache');
  res.send(text);
}

/** The one document of every screen: App Bridge first (Shopify requires it first in <head>), then ours. */
export function dashboardPage(apiKey: string): string {
  const key = apiKey.replace(/[^A-Za-z0-9_-]/g, '');
  const nav = SCREENS.map(
    (s) => `<a href="${s.path}"${s.path === '/' ? ' rel="home"' : ''}>${s.label}</a>`,
  ).join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="shopify-api-key" content="${key}">
<script src="https://cdn.shopify.com/shopifycloud/app-bridge.js"></script>
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Compresso</title>
<link rel="stylesheet" href="/assets/dashboard.css">
<script type="module" src="/assets/dashboard.js"></script>
</head>
<body>
<ui-nav-menu>${nav}</ui-nav-menu>
<div class="page">
<nav class="tabs" aria-label="Compresso screens">${SCREENS.map(
    (s) => `<a class="tab" href="${s.path}" data-screen="${s.path}">${s.label}</a>`,
  ).join('')}</nav>
<main id="main" tabindex="-1"><p class="muted">Loading…</p></main>
</div>
<div id="toast" class="toast" role="status" aria-live="polite" hidden></div>
</body>
</html>`;
}
