/// <reference lib="dom" />
import { readFileSync } from 'node:fs';
import { manualClock } from '@compresso/integration-kit/testing';
import type { QueueEvent } from '@compresso/runtime';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, sessionToken, startHarness } from './test-harness.ts';
import { webhookJobId } from './webhooks.ts';
import type { ProductJobResult } from './worker.ts';

const CORPUS = new URL('../../../../shared/corpus/', import.meta.url);
const MIDNIGHT = Date.parse('2026-11-27T00:00:00.000Z');

// One virtual clock for the worker and the Compresso server's quota day: a second before midnight,
// so the quota's reset is a second away (the follow-up job's delay in the queue is real time).
const clock = manualClock(MIDNIGHT - 1000);
let h: Harness;
const events: QueueEvent[] = [];
beforeAll(async () => {
  // One job at a time: the self-caused webhooks' jobs run after the one under test, not beside it.
  h = await startHarness({ clock, dailyLimit: 2, overrides: { workerConcurrency: 1 } });
  h.app.queue.on((event) => events.push(event));
});
afterAll(async () => {
  await h?.close();
});

type Waiting = {
  count: number;
  until: string | null;
  images?: { id: string; product_id: string; until: string }[];
};

/** The embedded admin's JSON, asked as the page does. */
async function adminApi<T>(shop: string, path: string): Promise<T> {
  const res = await fetch(`${h.appUrl}${path}`, {
    headers: { authorization: `Bearer ${sessionToken(shop)}` },
  });
  expect(res.status).toBe(200);
  return res.json() as Promise<T>;
}

/**
 * The dashboard's overview as a merchant sees it, in real Chromium: App Bridge (Shopify's CDN) is
 * replaced by a stand-in whose idToken() hands the page a real session token.
 */
async function overviewText(shop: string): Promise<string> {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const context = await browser.newContext();
    const token = sessionToken(shop);
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url === 'https://cdn.shopify.com/shopifycloud/app-bridge.js')
        return route.fulfill({
          contentType: 'text/javascript',
          body: `window.shopify = { config: { shop: ${JSON.stringify(shop)} }, idToken: async () => ${JSON.stringify(token)} };
customElements.define('ui-nav-menu', class extends HTMLElement {});`,
        });
      return url.startsWith('http://127.0.0.1:') ? route.continue() : route.abort();
    });
    const page = await context.newPage();
    const host = Buffer.from(`admin.shopify.com/store/${shop}`).toString('base64url');
    await page.goto(`${h.appUrl}/?embedded=1&shop=${shop}&host=${host}`);
    await page.waitForFunction(() => document.body.dataset.ready !== undefined);
    return (await page.textContent('body')) ?? '';
  } finally {
    await browser.close();
  }
}

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

describe('the Compresso quota runs out during auto-compression', () => {
  it('the rest wait for the reset in a delayed job, nothing failed or lost, and go through by themselves', async () => {
    const shop = h.fake.addShop('quota');
    await h.install(shop);
    await h.app.app.shops.updateSettings(shop, { enabled: true, quality: 75 });
    const originals = [
      'photo-mate-LadyBird.jpg',
      'photo-mate-Dune.jpg',
      'photo-mate-TwoWings.jpg',
      'photo-skimage-hubble_deep_field.jpg',
    ].map((n) => readFileSync(new URL(n, CORPUS)));
    const product = await h.fake.createProduct(shop, {
      title: 'Quota',
      images: originals.map((bytes, i) => ({ bytes, filename: `quota-${i}.jpg` })),
    });
    const done = product.mediaIds.slice(0, 2);
    const rest = product.mediaIds.slice(2);
    const created = h.fake.deliveries.find((d) => d.body.includes(product.id))!;
    const createdJob = webhookJobId(created.webhookId);
    const end = await finished(createdJob);
    expect(end.type).toBe('completed');

    // The day's two compressions went to the first two images; the others wait for midnight.
    const job = await h.app.queue.getJob<unknown, ProductJobResult>(createdJob);
    expect(job?.result?.outcomes.map((o) => o.outcome.kind)).toEqual(['optimized', 'optimized', 'quota']);
    const waiting = job?.result?.waiting;
    expect(waiting).toMatchObject({ until: MIDNIGHT, assetIds: rest });
    const followUp = await h.app.queue.getJob(waiting!.jobId);
    expect(followUp?.state).toBe('delayed');
    const ledger = h.app.app.worker!.optimizer.ledger;
    for (const [i, id] of rest.entries()) {
      expect((await ledger.get(shop, id))?.state ?? 'not yet seen').not.toBe('failed');
      expect(h.fake.file(id)?.version).toBe(1);
      expect(h.fake.file(id)?.bytes.equals(originals[i + 2]!)).toBe(true);
    }
    for (const id of done) expect((await ledger.get(shop, id))?.state).toBe('optimized');
    // The admin shows them as waiting, with the time of the reset.
    const before = (await adminApi<{ waiting: Waiting }>(shop, '/api/admin/status')).waiting;
    expect(before).toMatchObject({ count: rest.length, until: new Date(MIDNIGHT).toISOString() });
    expect(before.images!.map((w) => w.id).sort()).toEqual([...rest].sort());
    expect(before.images!.every((w) => w.product_id === product.id)).toBe(true);
    const overview = await adminApi<{ waiting: Waiting }>(shop, '/api/admin/overview');
    expect(overview.waiting).toEqual({ count: rest.length, until: new Date(MIDNIGHT).toISOString() });
    const shown = await overviewText(shop);
    expect(shown).toContain(`${rest.length} images wait for the quota to reset`);
    expect(shown).toMatch(/after the reset at \S.*; nothing is lost/);

    // Midnight on the shared clock; the follow-up starts by itself when its delay is over.
    clock.advance(MIDNIGHT - clock.now() + 1);
    // The follow-up may have run a moment before the clock's midnight (its delay is real time) and met
    // the quota again: then it queued the next link of its chain. The chain ends with the reset.
    let id = waiting!.jobId;
    let resumed = await finished(id);
    for (let next = waiting; resumed.type === 'completed'; ) {
      next = (await h.app.queue.getJob<unknown, ProductJobResult>(id))?.result?.waiting;
      if (!next) break;
      id = next.jobId;
      resumed = await finished(id);
    }
    expect(resumed, JSON.stringify(events.filter((e) => e.type === 'failed'))).toMatchObject({
      type: 'completed',
    });
    for (const [i, id] of rest.entries()) {
      const record = await ledger.get(shop, id);
      expect(record?.state, record?.lastError ?? '').toBe('optimized');
      expect(h.fake.file(id)!.bytes.length).toBeLessThan(originals[i + 2]!.length);
    }
    // Their turn came: nothing waits any more.
    expect((await adminApi<{ waiting: Waiting }>(shop, '/api/admin/status')).waiting).toEqual({
      count: 0,
      until: null,
      images: [],
    });
    // No job failed for good on the way (the quota is not a failure).
    expect(events.filter((e) => e.type === 'failed' && !e.willRetry)).toEqual([]);
  }, 120_000);
});
