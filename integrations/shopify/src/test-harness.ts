import { createHmac, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '@compresso/integration-kit';
import type { Config, RunningProcess } from '@compresso/runtime';
import { startTestServer, type TestServer } from '@compresso/server/testing';
import type { ShopifyConfig } from './config.ts';
import { FakeShopify, type FakeShopifyOptions } from './fake/fake-shopify.ts';
import { shopifyRuntime } from './shopify-lib.ts';
import { type RunningShopifyApp, startShopifyApp, startShopifyWorkerProcess } from './start.ts';
import type { ShopifyWorker } from './worker.ts';

/**
 * Everything a Shopify app test stands on, all real but Shopify: the Compresso server on a loopback
 * port (with an operator token), the fake Shopify, and the app process as `npm run shopify` starts
 * it, whose @shopify/shopify-api sends its `https://<shop>.myshopify.com` requests to the fake.
 * SHOPIFY_APP_URL is an https address no one resolves: the fake and the test's browser map it to
 * the app's loopback port, as Shopify and a merchant's browser reach a deployed app.
 */
export const APP_URL = 'https://compresso-app.example.com';
export const API_KEY = 'test-client-id-0001';
export const API_SECRET = 'test-app-secret-0123456789abcdef';

/**
 * An App Bridge session token as Shopify issues it to the embedded admin: an HS256 JWT for the shop,
 * signed with the app's secret (another secret makes a forged one).
 */
export function sessionToken(forShop: string, secret = API_SECRET): string {
  const now = Math.floor(Date.now() / 1000);
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const body = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({
    iss: `https://${forShop}/admin`,
    dest: `https://${forShop}`,
    aud: API_KEY,
    sub: '42',
    exp: now + 60,
    nbf: now - 5,
    iat: now,
    jti: randomUUID(),
    sid: randomUUID(),
  })}`;
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`;
}
export const ADMIN_TOKEN = 'test-operator-token-0123456789abcdef';
export const ENCRYPTION_KEY = 'test-encryption-key-0123456789abcdef-0123';
/** A desktop browser's User-Agent: the library answers 410 to bot-like ones (Node's fetch is one). */
export const BROWSER_UA =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36';

export interface Harness {
  compresso: TestServer;
  fake: FakeShopify;
  app: RunningProcess<ShopifyConfig, RunningShopifyApp>;
  /** With `redis`: the separate worker process (`npm run shopify:worker`). */
  worker: RunningProcess<ShopifyConfig, ShopifyWorker> | undefined;
  /** The app's address on this machine. */
  appUrl: string;
  /** The environment the app was started with (a test's own worker processes take the same). */
  env: Record<string, string | undefined>;
  /** Where a browser request really goes: the app URL and shop domains mapped to loopback. */
  resolve(url: string): string;
  /** A merchant installs the app from the Shopify admin: OAuth in a browser, every redirect followed. */
  install(shop: string): Promise<{ status: number; location: string | undefined; steps: string[] }>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  fake?: Partial<FakeShopifyOptions>;
  env?: Record<string, string | undefined>;
  overrides?: Partial<ShopifyConfig>;
  /** Without COMPRESSO_ADMIN_TOKEN (the merchant connects a key). */
  noAdminToken?: boolean;
  /**
   * BullMQ on the test Redis (COMPRESSO_TEST_REDIS_URL, default 127.0.0.1:6379) under a prefix of its
   * own: the HTTP process only queues, and a second process — `npm run shopify:worker` — works.
   */
  redis?: boolean;
  /** With `redis`: start no worker here (the test runs its own worker processes). */
  noWorker?: boolean;
  /** One clock for the app's worker and the Compresso server's quota day (a virtual one crosses midnight at once). */
  clock?: Clock;
  /** The Pro plan's daily limit on the Compresso server (shops are provisioned on Pro). */
  dailyLimit?: number;
  /** More settings of the Compresso server (its AI provider: `openaiApiKey`, `openaiBaseUrl`). */
  compresso?: Partial<Config>;
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const dataDir = mkdtempSync(join(tmpdir(), 'compresso-shopify-'));
  const clock = options.clock;
  const compresso = await startTestServer({
    dbPath: ':memory:',
    ...(clock ? { now: () => new Date(clock.now()) } : {}),
    overrides: {
      ...(options.noAdminToken ? {} : { adminToken: ADMIN_TOKEN }),
      ...(options.dailyLimit ? { proDailyLimit: options.dailyLimit } : {}),
      ...options.compresso,
    },
  });
  let appUrl = '';
  const fake = await new FakeShopify({
    apiKey: API_KEY,
    apiSecret: API_SECRET,
    deliverTo: (url) => url.replace(APP_URL, appUrl),
    complianceUrl: `${APP_URL}/webhooks`,
    ...options.fake,
  }).start();
  shopifyRuntime.setAbstractFetchFunc(fake.fetch as typeof fetch);
  const env = {
    SHOPIFY_API_KEY: API_KEY,
    SHOPIFY_API_SECRET: API_SECRET,
    SHOPIFY_APP_URL: APP_URL,
    SHOPIFY_ENCRYPTION_KEY: ENCRYPTION_KEY,
    COMPRESSO_BASE_URL: compresso.url,
    ...(options.noAdminToken ? {} : { COMPRESSO_ADMIN_TOKEN: ADMIN_TOKEN }),
    COMPRESSO_DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    ...(options.redis
      ? {
          REDIS_URL: process.env.COMPRESSO_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
          COMPRESSO_QUEUE_PREFIX: `cmp-shopify-${Math.random().toString(36).slice(2, 10)}`,
        }
      : {}),
    ...options.env,
  };
  const common = {
    handleSignals: false,
    env,
    overrides: options.overrides ?? {},
    ...(clock ? { clock } : {}),
  };
  const app = await startShopifyApp(common);
  const worker = options.redis && !options.noWorker ? await startShopifyWorkerProcess(common) : undefined;
  appUrl = app.app.url;
  const resolve = (url: string) => fake.rewrite(url.startsWith(APP_URL) ? url.replace(APP_URL, appUrl) : url);

  return {
    compresso,
    fake,
    app,
    worker,
    appUrl,
    env,
    resolve,
    async install(shop) {
      const cookies = new Map<string, string>();
      const steps: string[] = [];
      let url = `${APP_URL}/auth?shop=${shop}`;
      for (let hop = 0; hop < 10; hop++) {
        steps.push(url);
        const target = resolve(url);
        if (target === url && !url.startsWith('http://127.0.0.1')) {
          // Left the app and the shop (the Shopify admin's embedded app URL): where the browser lands.
          return { status: 302, location: url, steps };
        }
        const res = await fetch(target, {
          redirect: 'manual',
          headers: {
            'user-agent': BROWSER_UA,
            cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
          },
        });
        for (const line of res.headers.getSetCookie()) {
          const [pair] = line.split(';');
          const eq = (pair ?? '').indexOf('=');
          if (eq > 0)
            cookies.set((pair as string).slice(0, eq).trim(), (pair as string).slice(eq + 1).trim());
        }
        const location = res.headers.get('location');
        await res.arrayBuffer();
        if (res.status >= 300 && res.status < 400 && location) {
          url = new URL(location, url).toString();
          continue;
        }
        return { status: res.status, location: undefined, steps };
      }
      throw new Error(`install: too many redirects (${steps.join(' → ')})`);
    },
    async close() {
      await worker?.close();
      await app.close();
      await fake.close();
      await compresso.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
