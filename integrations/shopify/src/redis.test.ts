import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { QueueEvent } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, API_SECRET, type Harness, startHarness } from './test-harness.ts';
import { webhookJobId } from './webhooks.ts';

const CORPUS = new URL('../../../../shared/corpus/', import.meta.url);

let h: Harness;
const events: QueueEvent[] = [];
beforeAll(async () => {
  h = await startHarness({ redis: true });
  h.worker!.queue.on((e) => events.push(e));
});
afterAll(async () => {
  await h?.close();
});

function finished(id: string): Promise<void> {
  const done = (e: QueueEvent) => e.type === 'completed' && e.id === id;
  if (events.some(done)) return Promise.resolve();
  return new Promise((resolve) => {
    const stop = h.worker!.queue.on((e) => {
      if (done(e)) {
        stop();
        resolve();
      }
    });
  });
}

describe('with REDIS_URL: the HTTP process queues on BullMQ, a separate worker process does the work', () => {
  it('a product webhook queued by one process is worked by the other; restore too', async () => {
    expect(h.app.queue.kind).toBe('bullmq');
    expect(h.app.app.worker).toBeUndefined();
    const shop = h.fake.addShop('redis-demo');
    await h.install(shop);
    await h.app.app.shops.updateSettings(shop, { quality: 75 });
    const original = readFileSync(new URL('photo-skimage-rocket.jpg', CORPUS));
    const product = await h.fake.createProduct(shop, {
      title: 'Rocket',
      images: [{ bytes: original, filename: 'rocket.jpg' }],
    });
    const created = h.fake.deliveries.find((d) => d.body.includes(product.id))!;
    expect(created.status).toBe(200);
    await finished(webhookJobId(created.webhookId));
    const id = product.mediaIds[0]!;
    expect(h.fake.file(id)?.version).toBe(2);
    expect(h.fake.file(id)!.bytes.length).toBeLessThan(original.length);

    const restored = await h.worker!.app.restore(shop, [id]);
    expect(restored.map((r) => r.outcome.kind)).toEqual(['restored']);
    expect(h.fake.file(id)!.bytes.equals(original)).toBe(true);
  }, 240_000);
});

describe('with REDIS_URL: alt text', () => {
  it('on arrival in the worker process; an apply and its undo queued by the HTTP process run there too', async () => {
    const shop = h.fake.addShop('redis-alt');
    await h.install(shop);
    await h.app.app.shops.updateSettings(shop, {
      enabled: false,
      alt_text_mode: 'template',
      alt_text_template: '{product_title}, {n}',
    });
    const bytes = readFileSync(new URL('photo-skimage-rocket.jpg', CORPUS));
    const product = await h.fake.createProduct(shop, {
      title: 'Kite',
      images: [
        { bytes, filename: 'k1.jpg' },
        { bytes, filename: 'k2.jpg', alt: 'mine' },
      ],
    });
    await finished(webhookJobId(h.fake.deliveries.find((d) => d.body.includes(product.id))!.webhookId));
    const alts = () => product.mediaIds.map((id) => h.fake.file(id)!.alt);
    expect(alts()).toEqual(['Kite, 1', 'mine']);

    const applied = await adminPost(shop, '/api/admin/alt-text/apply', {
      mode: 'template',
      template: 'All {product_title}',
      scope: 'all',
    });
    await finished(applied.job_id);
    expect(alts()).toEqual(['All Kite', 'All Kite']);
    await finished(
      (await adminPost(shop, '/api/admin/alt-text/undo', { batch_id: applied.batch_id })).job_id,
    );
    expect(alts()).toEqual(['Kite, 1', 'mine']);
  }, 120_000);
});

/** A POST of the embedded admin, with an App Bridge session token (HS256, the app secret) for the shop. */
async function adminPost(
  shop: string,
  path: string,
  body: unknown,
): Promise<{ batch_id: string; job_id: string }> {
  const now = Math.floor(Date.now() / 1000);
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const claims = { iss: `https://${shop}/admin`, dest: `https://${shop}`, aud: API_KEY, sub: '42' };
  const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ ...claims, exp: now + 60, nbf: now - 5, iat: now, jti: randomUUID(), sid: randomUUID() })}`;
  const token = `${unsigned}.${createHmac('sha256', API_SECRET).update(unsigned).digest('base64url')}`;
  const res = await fetch(`${h.appUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(202);
  return (await res.json()) as { batch_id: string; job_id: string };
}
