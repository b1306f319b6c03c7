import type { BlobStore, Database, JobQueue, Logger } from '@compresso/runtime';
import type { SessionStorage } from '@shopify/shopify-app-session-storage';
import express, { type NextFunction, type Request, type Response } from 'express';
import { adminRouter } from './admin.ts';
import { appHost, type ShopifyConfig } from './config.ts';
import { type ProvisionOptions, provisionShop } from './provision.ts';
import { createSealer } from './sealed.ts';
import { databaseSessionStorage } from './session-storage.ts';
import { type ShopStore, shopStore } from './shop-store.ts';
import { shopifyApiLib, shopifyExpress } from './shopify-lib.ts';
import { type WebhookJob, webhookHandlers } from './webhooks.ts';

export interface ShopifyAppDeps {
  config: ShopifyConfig;
  db: Database;
  queue: JobQueue;
  blobs: BlobStore;
  logger: Logger;
  /** How the app reaches the Compresso API (default: global fetch). */
  fetch?: typeof fetch;
}

export interface ShopifyApp {
  app: express.Express;
  /** The @shopify/shopify-app-express object (its `api` is the configured @shopify/shopify-api). */
  shopify: ReturnType<typeof shopifyExpress.shopifyApp>;
  shops: ShopStore;
  sessions: SessionStorage;
}

/** Where the app's routes are; shopify.app.toml points Shopify at the same paths. */
export const PATHS = {
  authBegin: '/auth',
  authCallback: '/auth/callback',
  webhooks: '/webhooks',
} as const;

/** Topics the app subscribes to through the API on install (the compliance ones are in the toml). */
export const SUBSCRIBED_TOPICS = ['PRODUCTS_CREATE', 'PRODUCTS_UPDATE', 'APP_UNINSTALLED'] as const;

const LOG_LEVELS = ['error', 'warn', 'debug', 'trace'] as const;

/**
 * The Shopify app's HTTP side: OAuth install (offline token, stored sealed in the runtime
 * database), the shop's record and Compresso key, and the webhooks — verified, recorded by id and
 * queued, so Shopify gets its 200 well within its 5 s while the work happens in the worker.
 */
export function createShopifyApp(deps: ShopifyAppDeps): ShopifyApp {
  const { config, db, queue, logger } = deps;
  const sealer = createSealer(config.shopifyEncryptionKey);
  const shops = shopStore(db, sealer);
  const sessions = databaseSessionStorage(db, sealer);
  const { scheme, host } = appHost(config);
  const provision: ProvisionOptions = {
    baseUrl: config.compressoBaseUrl,
    adminToken: config.adminToken,
    fetch: deps.fetch ?? fetch,
  };

  const shopify = shopifyExpress.shopifyApp({
    api: {
      apiKey: config.shopifyApiKey,
      apiSecretKey: config.shopifyApiSecret,
      scopes: config.shopifyScopes,
      hostName: host,
      hostScheme: scheme,
      apiVersion:
        config.shopifyApiVersion as (typeof shopifyApiLib.ApiVersion)[keyof typeof shopifyApiLib.ApiVersion],
      isEmbeddedApp: true,
      logger: {
        // The library's own lines, at one level lower in ours: it logs every webhook at info.
        level: shopifyApiLib.LogSeverity.Debug,
        httpRequests: false,
        timestamps: false,
        log: async (severity, message) => {
          logger[LOG_LEVELS[severity] ?? 'debug']({ source: 'shopify-api' }, message);
        },
      },
    },
    auth: { path: PATHS.authBegin, callbackPath: PATHS.authCallback },
    webhooks: { path: PATHS.webhooks },
    sessionStorage: sessions,
    hooks: {
      afterAuth: async ({ session }) => {
        await shops.install(session.shop);
        logger.info({ shop: session.shop }, 'shop installed');
        await provisionShop(shops, session.shop, provision, logger);
      },
    },
  });
  const handlers = webhookHandlers({ shops, queue, logger, path: PATHS.webhooks });
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxy);

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get(PATHS.authBegin, shopify.auth.begin());
  app.get(PATHS.authCallback, shopify.auth.callback(), shopify.redirectToShopifyOrAppRoot());
  app.post(PATHS.webhooks, ...shopify.processWebhooks({ webhookHandlers: handlers }));
  app.use(
    adminRouter({
      db,
      queue,
      shops,
      authenticated: shopify.validateAuthenticatedSession(),
      apiKey: config.shopifyApiKey,
      compressoBaseUrl: config.compressoBaseUrl,
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
      blobs: deps.blobs,
      api: shopify.api,
      sessions,
    }),
  );

  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    logger.error({ err: error }, 'shopify app: request failed');
    if (!res.headersSent) res.status(500).json({ error: { code: 'INTERNAL', message: 'Internal error' } });
  });
  return { app, shopify, shops, sessions };
}

export type { WebhookJob };
