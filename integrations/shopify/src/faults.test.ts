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
  it('a CDN download that fails or is not an image: retried or failed with its reason, nothing replaced', async () => {
    const shop = h.fake.addShop('cdn-faults');
    await h.install(shop);
    await h.app.app.shops.updateSettings(shop, { enabled: false, quality: 75 });
    const originals = ['photo-mate-LadyBird.jpg', 'photo-mate-TwoWings.jpg', 'photo-skimage-rocket.jpg'].map(
      (n) => readFileSync(new URL(n, CORPUS)),
    );
    const product = await h.fake.createProduct(shop, {
      title: 'Flaky CDN',
      images: originals.map((bytes, i) => ({ bytes, filename: `cdn-${i}.jpg` })),
    });
    const created = h.fake.deliveries.find((d) => d.body.includes(product.id))!;
    await finished(webhookJobId(created.webhookId));
    const [erroring, resetting, notImage] = product.mediaIds as [string, string, string];
    h.fake.cdnFaults.set(erroring, 'error');
    h.fake.cdnFaults.set(resetting, 'reset');
    h.fake.cdnFaults.set(notImage, 'not-image');

    await h.app.app.shops.updateSettings(shop, { enabled: true });
    await h.fake.touchProduct(product.id, 'Flaky CDN, renamed');
    const touched = h.fake.deliveries.filter((d) => d.body.includes(product.id)).at(-1)!;
    const jobId = webhookJobId(touched.webhookId);
    // The first attempt ends in a retry (the queue's backoff), not in the dead letter.
    const firstTry = await new Promise<QueueEvent>((resolve) => {
      const seen = events.find((e) => e.type === 'failed' && e.id === jobId);
      if (seen) return resolve(seen);
      const stop = h.app.queue.on((e) => {
        if (e.type === 'failed' && e.id === jobId) {
          stop();
          resolve(e);
        }
      });
    });
    expect(firstTry).toMatchObject({ type: 'failed', attempt: 1, willRetry: true });
    const ledger = h.app.app.worker!.optimizer.ledger;
    const fiveHundred = await ledger.get(shop, erroring);
    expect(fiveHundred?.state).not.toBe('failed');
    expect(fiveHundred?.lastError).toContain('CDN answered 500');
    const dropped = await ledger.get(shop, resetting);
    expect(dropped?.state).not.toBe('failed');
    expect(dropped?.lastError).toContain('CDN download failed');
    // Not an image: recorded as failed with that reason, before anything was backed up or sent.
    const refused = await ledger.get(shop, notImage);
    expect(refused?.state).toBe('failed');
    expect(refused?.lastError).toContain('not an image');
    expect(refused?.backupKey ?? null).toBeNull();
    expect(refused?.originalHash ?? null).toBeNull();
    // Shopify still serves every original; nothing was half-replaced.
    for (const [i, id] of product.mediaIds.entries()) {
      expect(h.fake.file(id)?.version).toBe(1);
      expect(h.fake.file(id)?.status).toBe('READY');
      expect(h.fake.file(id)?.bytes.equals(originals[i]!)).toBe(true);
    }

    // The CDN recovers for two of them: the retry replaces those, the refused one stays as it was.
    h.fake.cdnFaults.delete(erroring);
    h.fake.cdnFaults.delete(resetting);
    const end = await finished(jobId);
    expect(end, JSON.stringify(events.filter((e) => e.type === 'failed'))).toMatchObject({
      type: 'completed',
    });
    for (const [i, id] of [erroring, resetting].entries()) {
      expect((await ledger.get(shop, id))?.state).toBe('optimized');
      expect(h.fake.file(id)!.bytes.length).toBeLessThan(originals[i]!.length);
    }
    expect((await ledger.get(shop, notImage))?.state).toBe('failed');
    expect(h.fake.file(notImage)?.bytes.equals(originals[2]!)).toBe(true);
    h.fake.cdnFaults.clear();
  }, 240_000);
});
