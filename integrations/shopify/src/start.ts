import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Clock, KIT_MIGRATIONS } from '@compresso/integration-kit';
import { type ProcessContext, type RunningProcess, startProcess } from '@compresso/runtime';
import { createShopifyApp, type ShopifyApp } from './app.ts';
import { SHOPIFY_BULK_MIGRATIONS } from './bulk.ts';
import { loadShopifyConfig, type ShopifyConfig } from './config.ts';
import { SHOPIFY_MIGRATIONS } from './migrations.ts';
import { type ShopifyWorker, type ShopifyWorkerDeps, startShopifyWorker } from './worker.ts';

/** The app's tables, the kit's (asset ledger, runs) and bulk optimize's, migrated with the core's. */
const MIGRATIONS = [SHOPIFY_MIGRATIONS, KIT_MIGRATIONS, SHOPIFY_BULK_MIGRATIONS];

export interface StartShopifyOptions {
  env?: Record<string, string | undefined>;
  overrides?: Partial<ShopifyConfig>;
  /** How the app reaches the Compresso API (default: global fetch). */
  fetch?: typeof fetch;
  handleSignals?: boolean;
  /** The worker's clock (tests: a virtual one, which also drives the test API's quota day). */
  clock?: Clock;
  /**
   * Run the queue worker in this process too. Default: yes on the embedded default (the in-process
   * queue has no other worker), no with REDIS_URL (run `npm run shopify:worker` processes).
   */
  worker?: boolean;
  /** The worker's bulk runs: images at once, a listener of their events (tests). */
  bulk?: ShopifyWorkerDeps['bulk'];
}

export interface RunningShopifyApp extends ShopifyApp {
  /** Where the HTTP server listens (127.0.0.1:port in tests; SHOPIFY_APP_URL is what Shopify uses). */
  url: string;
  server: Server;
  /** The queue worker, when this process runs one. */
  worker: ShopifyWorker | undefined;
}

function workerOn(
  context: ProcessContext<ShopifyConfig>,
  built: ShopifyApp,
  fetchImpl: typeof fetch | undefined,
  clock: Clock | undefined,
  bulk?: ShopifyWorkerDeps['bulk'],
): ShopifyWorker {
  const worker = startShopifyWorker({
    ...context,
    shops: built.shops,
    sessions: built.sessions,
    api: built.shopify.api,
    ...(fetchImpl ? { fetch: fetchImpl } : {}),
    ...(clock ? { clock } : {}),
    ...(bulk ? { bulk } : {}),
  });
  context.onClose('worker', () => worker.close());
  return worker;
}

/**
 * `npm run shopify`: the app's HTTP process on the runtime's process assembly — its settings checked
 * with the base ones in one ConfigError, its tables migrated with the core's, the HTTP server closed
 * first on SIGINT/SIGTERM (then queue, blobs, database).
 */
export function startShopifyApp(
  options: StartShopifyOptions = {},
): Promise<RunningProcess<ShopifyConfig, RunningShopifyApp>> {
  return startProcess<ShopifyConfig, RunningShopifyApp>({
    name: 'shopify',
    env: options.env ?? process.env,
    overrides: options.overrides ?? {},
    loadConfig: loadShopifyConfig,
    database: { migrations: MIGRATIONS },
    handleSignals: options.handleSignals ?? true,
    async start(context) {
      const built = createShopifyApp({ ...context, ...(options.fetch ? { fetch: options.fetch } : {}) });
      // Registered before the HTTP server, so it closes after it: no new webhooks, then the work in flight.
      const worker =
        (options.worker ?? !context.config.redisUrl)
          ? workerOn(context, built, options.fetch, options.clock, options.bulk)
          : undefined;
      const server = built.app.listen(context.config.port, context.config.host);
      await once(server, 'listening');
      context.onClose('http server', async () => {
        server.closeIdleConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      });
      const address = server.address() as AddressInfo;
      const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      const url = `http://${host}:${address.port}`;
      context.logger.info({ url, app_url: context.config.shopifyAppUrl }, 'shopify app listening');
      return { ...built, url, server, worker };
    },
  });
}

/** `npm run shopify:worker`: a queue worker alone (REDIS_URL deployments run several). */
export function startShopifyWorkerProcess(
  options: Omit<StartShopifyOptions, 'worker'> = {},
): Promise<RunningProcess<ShopifyConfig, ShopifyWorker>> {
  return startProcess<ShopifyConfig, ShopifyWorker>({
    name: 'shopify-worker',
    env: options.env ?? process.env,
    overrides: options.overrides ?? {},
    loadConfig: loadShopifyConfig,
    database: { migrations: MIGRATIONS },
    handleSignals: options.handleSignals ?? true,
    async start(context) {
      const built = createShopifyApp({ ...context, ...(options.fetch ? { fetch: options.fetch } : {}) });
      return workerOn(context, built, options.fetch, options.clock, options.bulk);
    },
  });
}
