import { readFileSync } from 'node:fs';
import type { QueueEvent } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from './test-harness.ts';
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
