import { fixtureImage } from '@compresso/integration-kit/testing';
import { MemorySessionStorage } from '@shopify/shopify-app-session-storage-memory';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BULK_QUERY } from './bulk-listing.ts';
import { FakeShopify } from './fake/fake-shopify.ts';
import { shopifyApiLib, shopifyExpress, shopifyRuntime } from './shopify-lib.ts';
import { type ShopifyPlatformOptions, shopifyPlatform } from './shopify-platform.ts';
import { API_KEY, API_SECRET, APP_URL } from './test-harness.ts';

let fake: FakeShopify;
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
let shop: string;
const media = new Map<string, string>(); // media id → product id

beforeAll(async () => {
  fake = await new FakeShopify({ apiKey: API_KEY, apiSecret: API_SECRET }).start();
  shopifyRuntime.setAbstractFetchFunc(fake.fetch as typeof fetch);
  shop = fake.addShop('bulk-listing');
  await sessions.storeSession(
    new shopifyApiLib.Session({
      id: shopify.api.session.getOfflineId(shop),
      shop,
      state: 'bulk',
      isOnline: false,
      accessToken: fake.grantToken(shop),
      scope: 'write_products,write_files',
    }),
  );
  const small = await fixtureImage(1, 'jpeg', 24);
  for (let p = 0; p < 7; p++) {
    const product = await fake.createProduct(shop, {
      title: `Product ${p}`,
      images: [0, 1, 2].map((i) => ({ bytes: small.bytes, filename: `p${p}-${i}.jpg` })),
    });
    for (const id of product.mediaIds) media.set(id, product.id);
  }
});
afterAll(async () => {
  await fake?.close();
});

const port = (options: Partial<ShopifyPlatformOptions> = {}) =>
  shopifyPlatform({ api: shopify.api, sessions, bulkPollMs: 5, ...options });

describe('the fake Shopify: bulk query operations', () => {
  it('CREATED → RUNNING → COMPLETED with counts and a JSONL url: one object a line, children with __parentId; refusals as userErrors', async () => {
    const session = (await sessions.loadSession(shopify.api.session.getOfflineId(shop)))!;
    const client = new shopify.api.clients.Graphql({ session });
    const run = (query: string) =>
      client.request(
        `mutation($q: String!) { bulkOperationRunQuery(query: $q) { bulkOperation { id status } userErrors { code field message } } }`,
        { variables: { q: query } },
      ) as Promise<{
        data: {
          bulkOperationRunQuery: {
            bulkOperation: { id: string; status: string } | null;
            userErrors: { code: string; message: string }[];
          };
        };
      }>;
    const poll = async (id: string) =>
      (
        (await client.request(
          `query($id: ID!) { node(id: $id) { ... on BulkOperation { id status objectCount rootObjectCount url fileSize } } }`,
          { variables: { id } },
        )) as {
          data: {
            node: {
              status: string;
              objectCount: string;
              rootObjectCount: string;
              url: string | null;
              fileSize: string | null;
            };
          };
        }
      ).data.node;

    const refused = (await run('{ shop { name } }')).data.bulkOperationRunQuery;
    expect(refused.bulkOperation).toBeNull();
    expect(refused.userErrors[0]).toMatchObject({
      code: 'INVALID',
      message: expect.stringContaining('connection'),
    });

    fake.holdBulk = true;
    const created = (await run(BULK_QUERY)).data.bulkOperationRunQuery;
    expect(created.userErrors).toEqual([]);
    expect(created.bulkOperation?.status).toBe('CREATED');
    const id = created.bulkOperation!.id;
    // One bulk query per shop at a time.
    const second = (await run(BULK_QUERY)).data.bulkOperationRunQuery;
    expect(second.userErrors[0]).toMatchObject({
      code: 'OPERATION_IN_PROGRESS',
      message: expect.stringContaining(id),
    });
    let seen = await poll(id);
    while (seen.status === 'CREATED') {
      await new Promise((resolve) => setImmediate(resolve));
      seen = await poll(id);
    }
    expect(seen).toMatchObject({ status: 'RUNNING', url: null });
    const done = fake.changed();
    fake.finishBulk();
    await done;
    seen = await poll(id);
    expect(seen).toMatchObject({ status: 'COMPLETED', objectCount: '28', rootObjectCount: '7' });
    const current = (await client.request('{ currentBulkOperation { id status } }')) as {
      data: { currentBulkOperation: { id: string } };
    };
    expect(current.data.currentBulkOperation.id).toBe(id);

    const text = await (await fetch(seen.url!)).text();
    expect(String(Buffer.byteLength(text))).toBe(seen.fileSize);
    const lines = text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(28);
    const products = lines.filter((l) => String(l.id).includes('/Product/'));
    const images = lines.filter((l) => String(l.id).includes('/MediaImage/'));
    expect(products).toHaveLength(7);
    expect(products.every((p) => !('__parentId' in p) && !('media' in p))).toBe(true);
    expect(images).toHaveLength(21);
    for (const image of images) {
      expect(image.__parentId).toBe(media.get(String(image.id)));
      expect(image).toMatchObject({
        mimeType: 'image/jpeg',
        originalSource: { url: expect.stringContaining('/cdn/') },
      });
    }
    fake.holdBulk = false;
  });
});

describe('the Shopify adapter: a catalog listed through a bulk operation', () => {
  it('waits while the operation runs, then streams pages; a stored cursor resumes in a new process at the same image', async () => {
    fake.holdBulk = true;
    const first = port({ listing: 'bulk' });
    let page = await first.listAssets(shop, { limit: 4 });
    expect(page).toMatchObject({ assets: [], cursor: expect.stringMatching(/^shb1\.\d+\.0$/), waitMs: 5 });
    const pending = page.cursor;
    page = await first.listAssets(shop, { cursor: pending, limit: 4 });
    expect(page.assets).toEqual([]);
    expect(page.cursor).toBe(pending);
    const done = fake.changed();
    fake.finishBulk();
    await done;
    fake.holdBulk = false;

    const seen: string[] = [];
    const cursors: string[] = [];
    let cursor = pending;
    let total: number | undefined;
    while (cursor) {
      page = await first.listAssets(shop, { cursor, limit: 4 });
      total ??= page.total;
      expect(page.assets.length).toBeGreaterThan(0);
      for (const asset of page.assets) expect(asset.parentId).toBe(media.get(asset.id));
      seen.push(...page.assets.map((a) => a.id));
      cursor = page.cursor;
      if (cursor) cursors.push(cursor);
    }
    expect(total).toBe(21);
    expect(seen.toSorted()).toEqual([...media.keys()].toSorted());
    // A new process (a new adapter) with the cursor stored after the second page: the rest, in order.
    const after = cursors[1]!;
    const rest: string[] = [];
    for (let c: string | null = after; c; ) {
      const next = await port({ listing: 'bulk' }).listAssets(shop, { cursor: c, limit: 5 });
      rest.push(...next.assets.map((a) => a.id));
      c = next.cursor;
    }
    expect(rest).toEqual(seen.slice(8));
  });

  it('auto: a small shop is listed incrementally; above the threshold through a bulk operation', async () => {
    const small = await port({ bulkThreshold: 100 }).listAssets(shop, { limit: 4 });
    expect(small.cursor).toMatch(/^shp1\./);
    expect(small.assets).toHaveLength(4);
    const large = await port({ bulkThreshold: 3 }).listAssets(shop, { limit: 4 });
    expect(large.cursor).toMatch(/^shb1\./);
  });
});
