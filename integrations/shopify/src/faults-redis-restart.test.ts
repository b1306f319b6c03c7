import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectIntact, jobEvents, until } from './test-fault-checks.ts';
import { type Harness, startHarness } from './test-harness.ts';
import { type PrivateRedis, privateRedis } from './test-services.ts';
import { webhookJobId } from './webhooks.ts';

const CORPUS = new URL('../../../../shared/corpus/', import.meta.url);
const PHOTOS = ['photo-skimage-rocket.jpg', 'photo-mate-LadyBird.jpg'];

let redis: PrivateRedis;
let h: Harness;
let jobs: ReturnType<typeof jobEvents>;
beforeAll(async () => {
  // A redis-server of the test's own (the shared one is never restarted), keeping an append-only
  // file as docker-compose.yml's does; the app queues on it, a worker process works.
  redis = await privateRedis();
  h = await startHarness({ redis: true, env: { REDIS_URL: redis.url } });
  jobs = jobEvents(h.worker!.queue);
});
afterAll(async () => {
  if (h) h.fake.onEvent = undefined;
  await h?.close();
  await redis?.remove();
});

describe('Redis restarts while a product job is mid-image (BullMQ)', () => {
  it('the job goes on and completes once Redis is back; webhooks refused meanwhile are taken on redelivery; every image replaced once, every original kept', async () => {
    expect(h.app.queue.kind).toBe('bullmq');
    const shop = h.fake.addShop('redis-restart');
    await h.install(shop);
    await h.app.app.shops.updateSettings(shop, { enabled: true, quality: 75 });
    const originals = PHOTOS.map((n) => readFileSync(new URL(n, CORPUS)));
    const moments: string[] = [];
    h.fake.onEvent = async (event) => {
      if (event.shop !== shop || event.kind !== 'upload') return;
      // The first image's compressed bytes are at Shopify, not yet put in place: Redis goes away…
      if (event.filename === 'redis-0.jpg' && !moments.includes('stopped')) {
        await redis.stop();
        moments.push('stopped');
      }
      // … and is back when the second image is at the same point; the job ran on without it.
      if (event.filename === 'redis-1.jpg' && !moments.includes('started')) {
        await redis.start();
        moments.push('started');
      }
    };
    const product = await h.fake.createProduct(shop, {
      title: 'Redis',
      images: originals.map((bytes, i) => ({ bytes, filename: `redis-${i}.jpg` })),
    });
    const mine = () => h.fake.deliveries.filter((d) => d.body.includes(product.id));
    const jobId = webhookJobId(mine()[0]!.webhookId);
    const end = await jobs.finished(jobId);
    expect(moments).toEqual(['stopped', 'started']);
    expect(end.type, JSON.stringify(end)).toBe('completed');
    // The worker really lost Redis on the way.
    expect(jobs.events.some((e) => e.type === 'error')).toBe(true);

    // Each replacement makes Shopify send products/update (the create, then one per image). One sent
    // while Redis was down could not be queued: the app answered 5xx, which makes Shopify deliver it
    // again; redelivered once the app's queue connection is back, it is taken.
    while (mine().length < 1 + PHOTOS.length) await h.fake.changed();
    h.fake.onEvent = undefined;
    await until(
      () =>
        h.app.queue.ping().then(
          () => true,
          () => false,
        ),
      "the app's queue reconnected",
    );
    for (const delivery of mine()) {
      if (delivery.status !== 200) {
        expect(delivery.status).toBeGreaterThanOrEqual(500);
        expect((await h.fake.redeliver(delivery)).status).toBe(200);
      }
      const done = await jobs.finished(webhookJobId(delivery.webhookId));
      expect(done.type, JSON.stringify(done)).toBe('completed');
    }
    expect(await h.app.queue.failed()).toEqual([]);
    await expectIntact(
      h,
      shop,
      product.mediaIds.map((id, i) => ({ id, original: originals[i]!, replaced: true })),
    );
  }, 180_000);
});
