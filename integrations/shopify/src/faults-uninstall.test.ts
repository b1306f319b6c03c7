import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeEvent } from './fake/fake-shopify.ts';
import { expectIntact, jobEvents } from './test-fault-checks.ts';
import { type Harness, startHarness } from './test-harness.ts';
import { webhookJobId } from './webhooks.ts';
import type { ProductJobResult } from './worker.ts';

const CORPUS = new URL('../../../../shared/corpus/', import.meta.url);
const PHOTOS = ['photo-skimage-rocket.jpg', 'photo-mate-LadyBird.jpg', 'photo-mate-TwoWings.jpg'];

let h: Harness;
let jobs: ReturnType<typeof jobEvents>;
beforeAll(async () => {
  // One job at a time: the self-caused products/update jobs queue behind the one under test.
  h = await startHarness({ overrides: { workerConcurrency: 1 } });
  jobs = jobEvents(h.app.queue);
});
afterAll(async () => {
  if (h) h.fake.onEvent = undefined;
  await h?.close();
});

/**
 * A merchant uninstalls while the shop's product job runs: app/uninstalled arrives (and Shopify
 * revokes the token) at a moment the fake picks — the second image's upload, or its CDN download.
 * The job stops: the image in flight is either untouched or fully replaced, the ones not begun are
 * left alone, the originals are all kept, and nothing of the shop stays queued or running.
 */
async function uninstallDuring(name: string, moment: (event: FakeEvent, second: string) => boolean) {
  const shop = h.fake.addShop(name);
  await h.install(shop);
  await h.app.app.shops.updateSettings(shop, { enabled: true, quality: 75 });
  const originals = PHOTOS.map((n) => readFileSync(new URL(n, CORPUS)));
  let second = '';
  let uninstalled: Promise<unknown> | undefined;
  h.fake.onEvent = async (event) => {
    if (event.shop !== shop || uninstalled || !second || !moment(event, second)) return;
    // Delivered to the app and answered before the fake goes on with the worker's request.
    uninstalled = h.fake.uninstall(shop);
    const [delivery] = (await uninstalled) as { status: number }[];
    expect(delivery?.status).toBe(200);
  };
  const product = await h.fake.createProduct(shop, {
    title: name,
    images: originals.map((bytes, i) => ({ bytes, filename: `${name}-${i}.jpg` })),
  });
  second = product.mediaIds[1]!;
  const created = h.fake.deliveries.find((d) => d.body.includes(product.id))!;
  const jobId = webhookJobId(created.webhookId);
  const end = await jobs.finished(jobId);
  h.fake.onEvent = undefined;
  expect(uninstalled, 'the uninstall happened during the job').toBeDefined();
  expect(end.type, JSON.stringify(end)).toBe('completed');
  const result = (await h.app.queue.getJob<unknown, ProductJobResult>(jobId))?.result;
  expect(result?.stopped).toBe('uninstalled');

  // Every delivery the product caused has run its job to the end (the self-caused update, dropped
  // for a shop no longer installed); then nothing is queued, delayed or running.
  for (const d of h.fake.deliveries.filter((x) => x.body.includes(product.id) && x.status === 200))
    expect((await jobs.finished(webhookJobId(d.webhookId))).type).toBe('completed');
  expect(await h.app.queue.counts()).toMatchObject({ waiting: 0, active: 0, delayed: 0, failed: 0 });
  expect(h.app.app.worker!.running.running).toBe(0);
  expect(await h.app.app.shops.isActive(shop)).toBe(false);
  expect(await h.app.app.sessions.findSessionsByShop(shop)).toEqual([]);
  return { shop, product, originals, result: result! };
}

describe('a shop that uninstalls while its product job runs', () => {
  it('during the second image’s upload: the first stays replaced, the second is not, the third is not begun', async () => {
    const { shop, product, originals, result } = await uninstallDuring(
      'gone-at-upload',
      (event) => event.kind === 'upload' && event.filename === 'gone-at-upload-1.jpg',
    );
    // Shopify refused the fileUpdate with the revoked token: the earlier file stays, and says so.
    expect(result.outcomes.map((o) => o.outcome.kind)).toEqual(['optimized', 'failed']);
    const [first, second, third] = product.mediaIds as [string, string, string];
    const ledger = h.app.app.worker!.optimizer.ledger;
    expect((await ledger.get(shop, second))?.lastError).toMatch(/UNAUTHORIZED/);
    expect(await ledger.get(shop, third)).toBeUndefined();
    await expectIntact(h, shop, [
      { id: first, original: originals[0]!, replaced: true },
      { id: second, original: originals[1]!, replaced: false },
      { id: third, original: originals[2]!, replaced: false },
    ]);
  }, 120_000);

  it('during the second image’s download: it is backed up and compressed, never put in place; the job stops there', async () => {
    const { shop, product, originals, result } = await uninstallDuring(
      'gone-at-download',
      (event, second) => event.kind === 'download' && event.fileId === second,
    );
    expect(result.outcomes.map((o) => o.outcome.kind)).toEqual(['optimized']);
    const [first, second, third] = product.mediaIds as [string, string, string];
    const ledger = h.app.app.worker!.optimizer.ledger;
    // Stopped before the intent to replace: its backup is kept for a later run, nothing failed.
    expect((await ledger.get(shop, second))?.state).toBe('backed_up');
    expect(await ledger.get(shop, third)).toBeUndefined();
    await expectIntact(h, shop, [
      { id: first, original: originals[0]!, replaced: true },
      { id: second, original: originals[1]!, replaced: false },
      { id: third, original: originals[2]!, replaced: false },
    ]);
  }, 120_000);
});
