import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type RunningProcess, startProcess } from '@compresso/runtime';
import { createShopifyApp, type ShopifyApp } from './app.ts';
import { loadShopifyConfig, type ShopifyConfig } from './config.ts';
import { SHOPIFY_MIGRATIONS } from './migrations.ts';

export interface StartShopifyOptions {
  env?: Record<string, string | undefined>;
  overrides?: Partial<ShopifyConfig>;
  /** How the app reaches the Compresso API (default: global fetch). */
  fetch?: typeof fetch;
  handleSignals?: boolean;
}

export interface RunningShopifyApp extends ShopifyApp {
  /** Where the HTTP server listens (127.0.0.1:port in tests; SHOPIFY_APP_URL is what Shopify uses). */
  url: string;
  server: Server;
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
    database: { migrations: [SHOPIFY_MIGRATIONS] },
    handleSignals: options.handleSignals ?? true,
    async start(context) {
      const built = createShopifyApp({ ...context, ...(options.fetch ? { fetch: options.fetch } : {}) });
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
      return { ...built, url, server };
    },
  });
}
