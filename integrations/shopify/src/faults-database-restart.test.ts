import { readFileSync } from 'node:fs';
import type { QueueEvent } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectIntact, jobEvents, until } from './test-fault-checks.ts';
import { type Harness, startHarness } from './test-harness.ts';
import { type PrivatePostgres, privatePostgres } from './test-services.ts';
import { webhookJobId } from './webhooks.ts';

const CORPUS = new URL('../../../../shared/corpus/', import.meta.url);
const PHOTOS = ['photo-skimage-rocket.jpg', 'photo-mate-LadyBird.jpg'];

let pg: PrivatePostgres;
let h: Harness;
let jobs: ReturnType<typeof jobEvents>;
beforeAll(async () => {
  // The app on a PostgreSQL cluster of the test's own (the shared server is never restarted).
  pg = await privatePostgres();
  h = await startHarness({
    env: { DATABASE_URL: pg.url },
    overrides: { workerConcurrency: 1, jobBackoffMs: 100 },
  });
  jobs = jobEvents(h.app.queue);
});
afterAll(async () => {
  if (h) h.fake.onEvent = undefined;
  await h?.close();
  pg?.remove();
});

describe('PostgreSQL restarts while a product job is mid-image', () => {
  it('the attempt fails, the retry goes on; the replacement Shopify took is recognised, not done again; every image replaced once, every original kept', async () => {
    expect(h.app.db.kind).toBe('postgres');
    const shop = h.fake.addShop('db-restart');
    await h.install(shop);
    await h.app.app.shops.updateSettings(shop, { enabled: true, quality: 75 });
    const originals = PHOTOS.map((n) => readFileSync(new URL(n, CORPUS)));
    let stopped = false;
    let restarted = false;
    h.fake.onEvent = (event) => {
      // The first image's new file is uploaded and about to be put in place: the database goes away
      // (fast shutdown: every connection cut). Shopify takes the file; the worker cannot record it.
      if (event.shop === shop && event.kind === 'fileUpdate' && !stopped) {
        stopped = true;
        pg.stop();
      }
    };
    // The attempt fails (the ledger cannot be written); the database is back before the retry.
    const stopListening = h.app.queue.on((event: QueueEvent) => {
      if (event.type === 'failed' && stopped && !restarted) {
        restarted = true;
        pg.start(); // synchronous: returns once PostgreSQL accepts connections
      }
    });
    const product = await h.fake.createProduct(shop, {
      title: 'Database',
      images: originals.map((bytes, i) => ({ bytes, filename: `db-${i}.jpg` })),
    });
    const mine = () => h.fake.deliveries.filter((d) => d.body.includes(product.id));
    const jobId = webhookJobId(mine()[0]!.webhookId);
    const end = await jobs.finished(jobId);
    stopListening();
    h.fake.onEvent = undefined;
    expect(stopped && restarted).toBe(true);
    expect(end, JSON.stringify(jobs.events.filter((e) => e.type === 'failed'))).toMatchObject({
      type: 'completed',
      attempt: 2,
    });
    const first = jobs.events.find((e) => e.type === 'failed' && e.id === jobId);
    expect(first).toMatchObject({ attempt: 1, willRetry: true });
    expect((first as { error: string }).error).toMatch(/database/i);
    // The products/update sent while the database was down was answered 5xx (Shopify delivers it
    // again); redelivered, it is taken and finds nothing to do.
    while (mine().length < 1 + PHOTOS.length) await h.fake.changed();
    await until(
      () =>
        h.app.db.ping().then(
          () => true,
          () => false,
        ),
      'the app reaches the database',
    );
    for (const delivery of mine()) {
      if (delivery.status !== 200) expect((await h.fake.redeliver(delivery)).status).toBe(200);
      const done = await jobs.finished(webhookJobId(delivery.webhookId));
      expect(done.type, JSON.stringify(done)).toBe('completed');
    }
    // Whichever job met the first image again (the retry, or the products/update its replacement
    // caused) found Shopify serving the file it had put in place and recorded it: expectIntact checks
    // Shopify's version count, so a second replacement would show.
    await expectIntact(
      h,
      shop,
      product.mediaIds.map((id, i) => ({ id, original: originals[i]!, replaced: true })),
    );
  }, 180_000);
});
