import { readFileSync } from 'node:fs';
import type { QueueEvent } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from './test-harness.ts';
import { JOBS, webhookJobId } from './webhooks.ts';
import type { ProductJobResult } from './worker.ts';

const CORPUS = new URL('../../../../shared/corpus/', import.meta.url);
const PHOTOS = ['photo-mate-LadyBird.jpg', 'photo-skimage-rocket.jpg', 'photo-skimage-hubble_deep_field.jpg'];

let h: Harness;
const events: QueueEvent[] = [];
const waiters = new Set<() => void>();
beforeAll(async () => {
  h = await startHarness();
  h.app.queue.on((event) => {
    events.push(event);
    for (const wake of [...waiters]) wake();
  });
});
afterAll(async () => {
  await h?.close();
});

/** Resolves when `done()` holds, re-checked on every queue event and every change at the fake. */
async function until(done: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let turn = 0; turn < 10_000; turn++) {
    if (await done()) return;
    await Promise.race([
      new Promise<void>((resolve) => {
        const wake = () => {
          waiters.delete(wake);
          resolve();
        };
        waiters.add(wake);
      }),
      h.fake.changed(),
    ]);
  }
  throw new Error(`never: ${what}`);
}

const completed = (id: string) => events.some((e) => e.type === 'completed' && e.id === id);

describe('the whole journey against the fake Shopify and the real API', () => {
  it('install → product with three photos → each replaced in place by a smaller file → own webhooks ignored → restore → uninstall → shop/redact', async () => {
    const shop = h.fake.addShop('journey');
    await h.install(shop);
    expect(await h.app.app.shops.isActive(shop)).toBe(true);
    // A fixed quality: `auto` searches per image and takes seconds each on a busy 2-core machine.
    await h.app.app.shops.updateSettings(shop, { quality: 75 });

    const originals = PHOTOS.map((name) => readFileSync(new URL(name, CORPUS)));
    const started = performance.now();
    const product = await h.fake.createProduct(shop, {
      title: 'Space poster',
      images: originals.map((bytes, i) => ({ bytes, filename: PHOTOS[i] as string })),
    });
    const created = h.fake.deliveries.find(
      (d) => d.topic === 'products/create' && d.body.includes(product.id),
    );
    expect(created?.status).toBe(200);
    const jobId = webhookJobId(created!.webhookId);
    await until(() => completed(jobId), 'the products/create job completed');
    const seconds = (performance.now() - started) / 1000;

    const job = await h.app.queue.getJob<unknown, ProductJobResult>(jobId);
    expect(job?.name).toBe(JOBS.product);
    expect(job?.state).toBe('completed');
    const ledger = h.app.app.worker!.optimizer.ledger;
    const records = await Promise.all(product.mediaIds.map((id) => ledger.get(shop, id)));
    expect(records.map((r) => r?.state)).toEqual(['optimized', 'optimized', 'optimized']);
    for (const [i, id] of product.mediaIds.entries()) {
      const file = h.fake.file(id)!;
      // Same media id, same name (and so extension), new content, smaller than the original.
      expect(file.filename).toBe(PHOTOS[i]);
      expect(file.version).toBe(2);
      expect(file.status).toBe('READY');
      expect(file.bytes.length).toBeLessThan(originals[i]!.length);
      expect(file.bytes.subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
    }
    expect(h.fake.product(product.id)?.mediaIds).toEqual(product.mediaIds);

    // Each replacement made Shopify send products/update: those come back as jobs, and change nothing.
    const ownUpdates = () =>
      h.fake.deliveries.filter((d) => d.topic === 'products/update' && d.body.includes(product.id));
    await until(() => ownUpdates().length >= 3, 'three products/update deliveries');
    await until(
      () => ownUpdates().every((d) => completed(webhookJobId(d.webhookId))),
      'the self-caused jobs completed',
    );
    for (const d of ownUpdates()) {
      const self = await h.app.queue.getJob<unknown, ProductJobResult>(webhookJobId(d.webhookId));
      for (const { outcome } of self?.result?.outcomes ?? []) expect(outcome.kind).toBe('unchanged');
    }
    expect(product.mediaIds.map((id) => h.fake.file(id)?.version)).toEqual([2, 2, 2]);

    // Restore the product: the exact original bytes are live again, under the same ids.
    const worker = h.app.app.worker!;
    const restored = await worker.restore(shop, product.mediaIds);
    expect(restored.map((r) => r.outcome.kind)).toEqual(['restored', 'restored', 'restored']);
    for (const [i, id] of product.mediaIds.entries()) {
      expect(h.fake.file(id)!.bytes.equals(originals[i]!)).toBe(true);
    }
    // The restore's own products/update webhooks do not compress the originals again.
    const afterRestore = h.fake.deliveries.length;
    await until(() => h.fake.deliveries.length >= afterRestore, 'restore deliveries');
    await until(
      () => ownUpdates().every((d) => completed(webhookJobId(d.webhookId))),
      'the jobs of the restore’s webhooks completed',
    );
    expect(product.mediaIds.map((id) => h.fake.file(id)?.version)).toEqual([3, 3, 3]);
    for (const [i, id] of product.mediaIds.entries()) {
      expect(h.fake.file(id)!.bytes.equals(originals[i]!)).toBe(true);
    }

    // Uninstall, then Shopify's shop/redact 48 hours later: nothing of the shop is left.
    await h.fake.uninstall(shop);
    expect(await h.app.app.sessions.findSessionsByShop(shop)).toEqual([]);
    const redact = await h.fake.sendCompliance(shop, 'shop/redact', { shop_id: 1, shop_domain: shop });
    expect(redact.status).toBe(200);
    await until(() => completed(webhookJobId(redact.webhookId)), 'the erasure job completed');
    expect(await h.app.app.shops.find(shop)).toBeUndefined();
    expect(await worker.optimizer.ledger.list(shop)).toEqual([]);
    const left: string[] = [];
    for await (const entry of h.app.blobs.list('shopify-backups/')) left.push(entry.key);
    expect(left).toEqual([]);

    const saved = originals.reduce((n, b, i) => n + b.length - (records[i]?.currentSize ?? b.length), 0);
    const answers = h.fake.deliveries.map((d) => d.answeredInMs);
    expect(Math.max(...answers)).toBeLessThan(5000);
    process.stdout.write(
      `shopify journey: 3 images, webhook → all three replaced in ${seconds.toFixed(2)} s ` +
        `(${(3 / seconds).toFixed(2)} images/s, one worker), ${saved} bytes saved; ` +
        `${answers.length} webhooks answered in ≤ ${Math.max(...answers).toFixed(0)} ms\n`,
    );
    // Three real photos through the real API on a 2-core machine shared with other suites.
  }, 240_000);
});
