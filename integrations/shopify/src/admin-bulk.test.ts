import { Compresso } from '@compresso/client';
import { fixtureImage } from '@compresso/integration-kit/testing';
import type { QueueEvent } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BULK_JOBS } from './bulk.ts';
import { type Harness, sessionToken, startHarness } from './test-harness.ts';

/**
 * The bulk admin API (admin-bulk.ts) in the app as it runs (in-process worker, the fake Shopify,
 * the real /api/v1 server): the estimate, a run started, paused and resumed to completion while the
 * products/update webhooks its own replacements cause arrive (the same ledger: nothing compressed
 * twice), a failed image with its product and reason and the retry, a cancel, and the refusals.
 */
let h: Harness;
let shop: string;
const events: QueueEvent[] = [];
const mediaIds: string[] = [];
const titles = new Map<string, string>();

beforeAll(async () => {
  h = await startHarness();
  h.app.queue.on((event) => events.push(event));
  shop = h.fake.addShop('bulk-admin');
  // The catalog exists before the install (no webhooks for it): the bulk run is what optimizes it.
  for (let p = 0; p < 6; p++) {
    const images = await Promise.all(
      [0, 1].map(async (k) => {
        const image = await fixtureImage(300 + p * 2 + k, k === 1 ? 'png' : 'jpeg', 160);
        return { bytes: image.bytes, filename: image.filename };
      }),
    );
    const product = await h.fake.createProduct(shop, { title: `Chair ${p}`, images });
    mediaIds.push(...product.mediaIds);
    for (const id of product.mediaIds) titles.set(id, `Chair ${p}`);
  }
  await h.install(shop);
  await h.app.app.shops.updateSettings(shop, { quality: 75 });
});
afterAll(async () => {
  await h?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: JSON answers, checked by the assertions
async function api(path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${h.appUrl}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${sessionToken(shop)}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: await res.json() };
}

/** Resolves once `done()` holds, checked on every queue event and every change at the fake. */
async function until(done: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let turn = 0; turn < 10_000; turn++) {
    if (await done()) return;
    await Promise.race([
      new Promise<void>((resolve) => {
        const stop = h.app.queue.on(() => {
          stop();
          resolve();
        });
      }),
      h.fake.changed(),
    ]);
  }
  throw new Error(`never: ${what}`);
}

const finished = (name: string) =>
  events.filter((e) => (e.type === 'completed' || e.type === 'failed') && e.name === name).length;
/** Every job added so far has ended (the self-caused webhooks' jobs included). */
const idle = () => {
  const active = new Set<string>();
  for (const e of events) {
    if (e.type === 'active') active.add(e.id);
    if (e.type === 'completed' || (e.type === 'failed' && !e.willRetry)) active.delete(e.id);
  }
  return active.size === 0;
};

describe('bulk optimize through the admin API', () => {
  it('estimates, runs (paused and resumed) beside the webhooks its replacements cause, lists a failure with its reason, retries it, and refuses what does not apply', async () => {
    expect(await api('/api/admin/bulk')).toEqual({ status: 200, json: { run: null, failures: [] } });
    const usage = new Compresso((await h.app.app.shops.key(shop))!, { baseUrl: h.compresso.url });

    // The estimate: a sample through /api/v1/info (here the whole catalog), nothing written.
    const estimate = await api('/api/admin/bulk/estimate', {});
    expect(estimate.status).toBe(200);
    expect(estimate.json).toMatchObject({ sampled: 12, total_images: 12 });
    expect(estimate.json.estimated_percent).toBeGreaterThan(10);
    expect(estimate.json.estimated_bytes_saved).toBeGreaterThan(0);
    // An image of the sample the CDN answers with an error page: left out and counted, not a 500.
    h.fake.cdnFaults.set(mediaIds[0]!, 'not-image');
    const partial = await api('/api/admin/bulk/estimate', {});
    h.fake.cdnFaults.delete(mediaIds[0]!);
    expect(partial.status).toBe(200);
    expect(partial.json).toMatchObject({ sampled: 11, unreadable: 1, total_images: 12 });
    expect(mediaIds.every((id) => h.fake.file(id)!.version === 1)).toBe(true);
    const usedBefore = (await usage.usage()).used;

    // Shopify will refuse the new file of one image: it fails with the reason, the original stays.
    const rejected = mediaIds[5]!;
    h.fake.failNextUpdate.add(rejected);
    h.fake.holdProcessing = true;
    const started = await api('/api/admin/bulk/start', {});
    expect(started.status).toBe(202);
    expect(started.json.run).toMatchObject({
      state: 'running',
      done: 0,
      bytes_saved: 0,
      waiting_until: null,
    });
    const runId = started.json.run.id as string;
    await until(
      () => mediaIds.some((id) => h.fake.file(id)!.status === 'PROCESSING'),
      'a replacement in flight',
    );

    // Paused with images in hand: they finish, no other is started; one run per shop.
    const paused = await api('/api/admin/bulk/pause', {});
    expect(paused).toMatchObject({ status: 200, json: { run: { id: runId, state: 'paused' } } });
    expect(await api('/api/admin/bulk/start', {})).toMatchObject({
      status: 200,
      json: { run: { id: runId } },
    });
    h.fake.holdProcessing = false;
    await h.fake.finishProcessing();
    await until(() => finished(BULK_JOBS.drive) === 1, 'the driver stopped');
    const halfway = (await api('/api/admin/bulk')).json.run;
    expect(halfway.state).toBe('paused');
    expect(halfway.done).toBeLessThan(12);

    expect((await api('/api/admin/bulk/resume', {})).json.run.state).toBe('running');
    await until(() => finished(BULK_JOBS.drive) === 2, 'the resumed run ended');
    await until(idle, 'the self-caused webhooks handled');
    const done = await api('/api/admin/bulk');
    expect(done.json.run).toMatchObject({
      id: runId,
      state: 'completed',
      total: 12,
      done: 12,
      failed: 1,
      eta_seconds: null,
    });
    expect(done.json.run.optimized + done.json.run.skipped).toBe(11);
    expect(done.json.run.images_per_minute).toBeGreaterThan(0);
    expect(done.json.failures).toEqual([
      {
        asset_id: rejected,
        product_title: titles.get(rejected),
        filename: expect.stringMatching(/\.png$/),
        code: 'REJECTED',
        reason: expect.stringContaining('could not process'),
      },
    ]);
    // The replacements' own products/update webhooks came in meanwhile (same ledger): each image
    // compressed once, replaced at most once.
    expect(h.fake.deliveries.filter((d) => d.topic === 'products/update').length).toBeGreaterThan(0);
    expect((await usage.usage()).used - usedBefore - 1).toBe(12);
    const ledger = h.app.app.worker!.optimizer.ledger;
    const totals = await ledger.totals(shop);
    expect(done.json.run).toMatchObject({
      optimized: totals.states.optimized,
      bytes_before: totals.bytesBefore,
      bytes_after: totals.bytesAfter,
      bytes_saved: totals.bytesBefore - totals.bytesAfter,
    });
    for (const id of mediaIds) {
      const state = (await ledger.get(shop, id))!.state;
      expect(h.fake.file(id)!.version, id).toBe(state === 'optimized' ? 2 : 1);
    }

    // The retry button: the failed image again; the run's counts follow the ledger.
    expect((await api('/api/admin/bulk/retry', { asset_ids: ['not-a-gid'] })).status).toBe(400);
    const retry = await api('/api/admin/bulk/retry', {});
    expect(retry.status).toBe(202);
    await until(() => finished(BULK_JOBS.retry) === 1, 'the retry ran');
    await until(idle, 'the retry’s webhooks handled');
    const after = await api('/api/admin/bulk');
    expect(after.json.failures).toEqual([]);
    const totalsAfter = await ledger.totals(shop);
    expect(after.json.run).toMatchObject({
      failed: 0,
      optimized: totalsAfter.states.optimized,
      bytes_before: totalsAfter.bytesBefore,
      bytes_after: totalsAfter.bytesAfter,
    });
    expect(h.fake.file(rejected)!.version).toBe(2);

    // What does not apply to a completed run is 409 with a stable code.
    expect(await api('/api/admin/bulk/resume', {})).toMatchObject({
      status: 409,
      json: { error: { code: 'RUN_STATE' } },
    });
    expect(await api('/api/admin/bulk/cancel', {})).toMatchObject({
      status: 409,
      json: { error: { code: 'RUN_STATE' } },
    });

    // A second run, held on its first image's download, is cancelled: it stays cancelled.
    h.fake.cdnFaults.set(mediaIds[0]!, 'error');
    const second = await api('/api/admin/bulk/start', {});
    expect(second.status).toBe(202);
    expect(second.json.run.id).not.toBe(runId);
    expect((await api('/api/admin/bulk/cancel', {})).json.run.state).toBe('cancelled');
    h.fake.cdnFaults.delete(mediaIds[0]!);
    await until(() => finished(BULK_JOBS.drive) === 3, 'the cancelled run’s driver stopped');
    expect((await api('/api/admin/bulk')).json.run).toMatchObject({
      id: second.json.run.id,
      state: 'cancelled',
    });
    expect(await api('/api/admin/bulk/resume', {})).toMatchObject({ status: 409 });
  });

  it('answers nothing without a session token', async () => {
    const res = await fetch(`${h.appUrl}/api/admin/bulk`, { redirect: 'manual' });
    expect(res.status).toBeGreaterThanOrEqual(300);
    await res.arrayBuffer();
  });
});
