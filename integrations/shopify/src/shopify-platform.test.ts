import { Compresso } from '@compresso/client';
import type { Pacer } from '@compresso/integration-kit';
import type { ManualClock } from '@compresso/integration-kit/testing';
import {
  describePipelineCrashBattery,
  describePlatformPortBattery,
} from '@compresso/integration-kit/testing';
import { proAccount, startTestServer } from '@compresso/server/testing';
import { MemorySessionStorage } from '@shopify/shopify-app-session-storage-memory';
import { FakeShopify } from './fake/fake-shopify.ts';
import { shopifyApiLib, shopifyExpress, shopifyRuntime } from './shopify-lib.ts';
import { shopifyPlatform } from './shopify-platform.ts';
import { API_KEY, API_SECRET, APP_URL } from './test-harness.ts';

/**
 * A fresh fake Shopify with one shop, and the adapter reaching it through the real
 * @shopify/shopify-api client with an offline session (a token the fake issued for the shop).
 */
async function fakeShop(options: {
  clock: ManualClock;
  pacer?: Pacer;
  bucket?: { size: number; restorePerSecond: number };
}) {
  const { clock, bucket } = options;
  const fake = await new FakeShopify({
    apiKey: API_KEY,
    apiSecret: API_SECRET,
    now: () => clock.now(),
    ...(bucket ? { bucket: { maximumAvailable: bucket.size, restoreRate: bucket.restorePerSecond } } : {}),
  }).start();
  shopifyRuntime.setAbstractFetchFunc(fake.fetch as typeof fetch);
  const shop = fake.addShop(`battery-${Math.random().toString(36).slice(2, 8)}`);
  const shopify = shopifyExpress.shopifyApp({
    api: {
      apiKey: API_KEY,
      apiSecretKey: API_SECRET,
      scopes: ['write_products', 'write_files'],
      hostName: new URL(APP_URL).host,
      apiVersion: shopifyApiLib.ApiVersion.October25,
      logger: { level: shopifyApiLib.LogSeverity.Error, log: async () => {} },
    },
    auth: { path: '/auth', callbackPath: '/auth/callback' },
    webhooks: { path: '/webhooks' },
  });
  const sessions = new MemorySessionStorage();
  await sessions.storeSession(
    new shopifyApiLib.Session({
      id: shopify.api.session.getOfflineId(shop),
      shop,
      state: 'battery',
      isOnline: false,
      accessToken: fake.grantToken(shop),
      scope: 'write_products,write_files',
    }),
  );
  const port = shopifyPlatform({
    api: shopify.api,
    sessions,
    clock,
    ...(options.pacer ? { pacer: options.pacer } : {}),
  });
  return { fake, shop, port };
}

// The kit's battery, run against the Shopify adapter over the fake Admin API.
describePlatformPortBattery('shopify over the fake Admin API', async ({ images, pacer, clock, bucket }) => {
  const { fake, shop, port } = await fakeShop({ clock, pacer, ...(bucket ? { bucket } : {}) });
  const ids: string[] = [];
  for (const image of images) {
    const product = await fake.createProduct(shop, {
      title: image.context.title ?? 'Product',
      vendor: image.context.vendor ?? '',
      productType: image.context.productType ?? '',
      images: [{ bytes: image.bytes, filename: image.filename, alt: image.altText }],
    });
    ids.push(...product.mediaIds);
  }
  return {
    port,
    site: shop,
    ids,
    missingId: 'gid://shopify/MediaImage/999999999',
    throttled: () => fake.throttledRequests,
    close: () => fake.close(),
  };
});

// The kit's pipeline killed after each step, then run again, with the Shopify adapter over the fake:
// what the shop serves is read from the fake itself (the file's bytes; its version counts replacements).
describePipelineCrashBattery(
  'shopify over the fake Admin API',
  async ({ clock }) => {
    const { fake, shop, port } = await fakeShop({ clock });
    const file = (id: string) => {
      const found = fake.file(id);
      if (!found) throw new Error(`the fake has no file ${id}`);
      return found;
    };
    return {
      port,
      site: shop,
      async addImage(image) {
        const product = await fake.createProduct(shop, {
          title: 'Crash chair',
          images: [{ bytes: image.bytes, filename: image.filename }],
        });
        return product.mediaIds[0]!;
      },
      async liveBytes(id) {
        // What the storefront gets: the file's CDN URL, fetched.
        const response = await fake.fetch(fake.fileUrl(file(id)));
        if (!response.ok) throw new Error(`the fake's CDN answered ${response.status} for ${id}`);
        return new Uint8Array(await response.arrayBuffer());
      },
      replacements: async (id) => file(id).version - 1,
      close: () => fake.close(),
    };
  },
  {
    async compresso(now) {
      const server = await startTestServer({
        dbPath: ':memory:',
        now: () => new Date(now()),
        overrides: { logLevel: 'warn' },
      });
      const { key } = await proAccount(server.db, 'crash@example.com');
      const client = new Compresso(key, { baseUrl: server.url, maxRetries: 0 });
      return { client, close: () => server.close() };
    },
  },
);
