import { describePlatformPortBattery } from '@compresso/integration-kit/testing';
import { MemorySessionStorage } from '@shopify/shopify-app-session-storage-memory';
import { FakeShopify } from './fake/fake-shopify.ts';
import { shopifyApiLib, shopifyExpress, shopifyRuntime } from './shopify-lib.ts';
import { shopifyPlatform } from './shopify-platform.ts';
import { API_KEY, API_SECRET, APP_URL } from './test-harness.ts';

// The kit's battery, run against the Shopify adapter over the fake Admin API, through the real
// @shopify/shopify-api client with an offline session (a token the fake issued for the shop).
describePlatformPortBattery('shopify over the fake Admin API', async ({ images, pacer, clock, bucket }) => {
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
  const port = shopifyPlatform({ api: shopify.api, sessions, pacer, clock });
  return {
    port,
    site: shop,
    ids,
    missingId: 'gid://shopify/MediaImage/999999999',
    throttled: () => fake.throttledRequests,
    close: () => fake.close(),
  };
});
