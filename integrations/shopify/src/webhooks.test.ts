import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_SECRET, type Harness, startHarness } from './test-harness.ts';
import { JOBS, type WebhookJob, webhookJobId } from './webhooks.ts';

let h: Harness;
let shop: string;
let jpeg: Buffer;
beforeAll(async () => {
  h = await startHarness();
  shop = h.fake.addShop('hooks-demo');
  await h.install(shop);
  jpeg = await import('sharp').then(({ default: sharp }) =>
    sharp({ create: { width: 64, height: 48, channels: 3, background: '#c83' } })
      .jpeg()
      .toBuffer(),
  );
});
afterAll(async () => {
  await h?.close();
});

function signed(body: string, secret = API_SECRET) {
  return createHmac('sha256', secret).update(body).digest('base64');
}

async function post(topic: string, shopDomain: string, body: string, hmac: string | undefined, id: string) {
  return fetch(`${h.appUrl}/webhooks`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-shopify-topic': topic,
      'x-shopify-shop-domain': shopDomain,
      'x-shopify-api-version': '2025-10',
      'x-shopify-webhook-id': id,
      ...(hmac === undefined ? {} : { 'x-shopify-hmac-sha256': hmac }),
    },
    body,
  });
}

describe('product webhooks', () => {
  it('a signed products/create is answered 200 at once and queued under its webhook id, with its media', async () => {
    const product = await h.fake.createProduct(shop, {
      title: 'Mug',
      images: [
        { bytes: jpeg, filename: 'mug-1.jpg' },
        { bytes: jpeg, filename: 'mug-2.jpg' },
      ],
    });
    const delivery = h.fake.deliveries.find(
      (d) => d.topic === 'products/create' && d.body.includes(product.id),
    )!;
    expect(delivery.status).toBe(200);
    expect(delivery.answeredInMs).toBeLessThan(5000);
    const job = await h.app.queue.getJob<WebhookJob>(webhookJobId(delivery.webhookId));
    expect(job?.name).toBe(JOBS.product);
    expect(job?.data).toEqual({
      shop,
      topic: 'PRODUCTS_CREATE',
      webhookId: delivery.webhookId,
      productId: product.id,
      mediaIds: product.mediaIds,
    });
  });

  it('a redelivery (same webhook id) is answered 200 and adds nothing', async () => {
    const product = await h.fake.createProduct(shop, {
      title: 'Cup',
      images: [{ bytes: jpeg, filename: 'cup.jpg' }],
    });
    const delivery = h.fake.deliveries.find((d) => d.body.includes(product.id))!;
    const before = await h.app.queue.counts();
    const again = await h.fake.redeliver(delivery);
    expect(again.status).toBe(200);
    expect(await h.app.queue.counts()).toEqual(before);
  });

  it('a forged or unsigned delivery is refused (401, 400) and queues nothing', async () => {
    const body = JSON.stringify(
      h.fake.productPayload(await h.fake.createProduct(shop, { title: 'Bowl', images: [] })),
    );
    const before = await h.app.queue.counts();
    expect(
      (await post('products/update', shop, body, signed(body, 'not-the-app-secret'), 'forged-1')).status,
    ).toBe(401);
    expect((await post('products/update', shop, body, signed(`${body} `), 'forged-2')).status).toBe(401);
    expect((await post('products/update', shop, body, undefined, 'forged-3')).status).toBe(400);
    expect(await h.app.queue.counts()).toEqual(before);
    expect(await h.app.app.shops.seenWebhook('forged-1')).toBe(false);
  });

  it('a verified delivery for a shop that never installed is acknowledged and ignored', async () => {
    const body = JSON.stringify({ admin_graphql_api_id: 'gid://shopify/Product/1', media: [] });
    const before = await h.app.queue.counts();
    const res = await post('products/update', 'stranger.myshopify.com', body, signed(body), 'stranger-1');
    expect(res.status).toBe(200);
    expect(await h.app.queue.counts()).toEqual(before);
  });
});

describe('uninstall and compliance', () => {
  it('app/uninstalled stops the shop: its session goes, its later webhooks are ignored', async () => {
    const gone = h.fake.addShop('hooks-leaving');
    await h.install(gone);
    const product = await h.fake.createProduct(gone, {
      title: 'Lamp',
      images: [{ bytes: jpeg, filename: 'lamp.jpg' }],
    });
    const [delivery] = await h.fake.uninstall(gone);
    expect(delivery?.status).toBe(200);
    expect(await h.app.app.sessions.findSessionsByShop(gone)).toEqual([]);
    expect((await h.app.app.shops.find(gone))?.uninstalledAt).toBeDefined();
    expect(await h.app.app.shops.isActive(gone)).toBe(false);

    const body = JSON.stringify(h.fake.productPayload(product));
    const before = await h.app.queue.counts();
    expect((await post('products/update', gone, body, signed(body), 'after-uninstall')).status).toBe(200);
    expect(await h.app.queue.counts()).toEqual(before);
  });

  it('customers/data_request and customers/redact are verified and answered 200; shop/redact queues the erasure', async () => {
    const customer = { id: 1, email: 'c@example.com', phone: null };
    for (const topic of ['customers/data_request', 'customers/redact']) {
      const d = await h.fake.sendCompliance(shop, topic, {
        shop_id: 1,
        shop_domain: shop,
        customer,
        orders_requested: [],
        orders_to_redact: [],
        data_request: { id: 9 },
      });
      expect(d.status, topic).toBe(200);
    }
    const redact = await h.fake.sendCompliance(shop, 'shop/redact', { shop_id: 1, shop_domain: shop });
    expect(redact.status).toBe(200);
    const job = await h.app.queue.getJob(webhookJobId(redact.webhookId));
    expect(job?.name).toBe(JOBS.eraseShop);
    expect(job?.data).toEqual({ shop });

    const body = JSON.stringify({ shop_id: 1, shop_domain: shop });
    expect((await post('shop/redact', shop, body, signed(body, 'forged'), 'redact-forged')).status).toBe(401);
  });
});
