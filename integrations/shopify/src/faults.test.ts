import { readFileSync } from 'node:fs';
import type { QueueEvent } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from './test-harness.ts';
import { webhookJobId } from './webhooks.ts';

const CORPUS = new URL('../../../../shared/corpus/', import.meta.url);

let h: Harness;
const events: QueueEvent[] = [];
beforeAll(async () => {
  h = await startHarness();
  h.app.queue.on((event) => events.push(event));
});
afterAll(async () => {
  await h?.close();
});

/** The job's end, waited for on the queue's own events. */
function finished(id: string): Promise<QueueEvent> {
  const done = (e: QueueEvent) =>
    (e.type === 'completed' || (e.type === 'failed' && !e.willRetry)) && e.id === id;
  const seen = events.find(done);
  if (seen) return Promise.resolve(seen);
  return new Promise((resolve) => {
    const stop = h.app.queue.on((e) => {
      if (done(e)) {
        stop();
        resolve(e);
      }
    });
  });
}

describe('faults', () => {
  it('an image Shopify cannot process: the earlier file stays live, the failure is recorded, the rest are replaced', async () => {
    const shop = h.fake.addShop('faults');
    await h.install(shop);
    await h.app.app.shops.updateSettings(shop, { enabled: false, quality: 75 });
    const originals = ['photo-skimage-rocket.jpg', 'photo-mate-LadyBird.jpg'].map((n) =>
      readFileSync(new URL(n, CORPUS)),
    );
    const product = await h.fake.createProduct(shop, {
      title: 'Rocket',
      images: originals.map((bytes, i) => ({ bytes, filename: `rocket-${i}.jpg` })),
    });
    const created = h.fake.deliveries.find((d) => d.body.includes(product.id))!;
    await finished(webhookJobId(created.webhookId));
    // Off: nothing was touched.
    expect(product.mediaIds.map((id) => h.fake.file(id)?.version)).toEqual([1, 1]);

    const [rejected, accepted] = product.mediaIds as [string, string];
    h.fake.failNextUpdate.add(rejected);
    await h.app.app.shops.updateSettings(shop, { enabled: true });
    await h.fake.touchProduct(product.id, 'Rocket, renamed');
    const touched = h.fake.deliveries.filter((d) => d.body.includes(product.id)).at(-1)!;
    expect(touched.topic).toBe('products/update');
    const end = await finished(webhookJobId(touched.webhookId));
    expect(end, JSON.stringify(events.filter((e) => e.type === 'failed'))).toMatchObject({
      type: 'completed',
    });

    const ledger = h.app.app.worker!.optimizer.ledger;
    const failed = await ledger.get(shop, rejected);
    expect(failed?.state).toBe('failed');
    expect(failed?.lastError).toContain('REJECTED');
    // Shopify kept the earlier file; the app acknowledged the failure, so the file is READY again.
    expect(h.fake.file(rejected)?.status).toBe('READY');
    expect(h.fake.file(rejected)?.bytes.equals(originals[0]!)).toBe(true);
    expect((await ledger.get(shop, accepted))?.state).toBe('optimized');
    expect(h.fake.file(accepted)!.bytes.length).toBeLessThan(originals[1]!.length);
  }, 240_000);
});
