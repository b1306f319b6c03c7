import { readFileSync } from 'node:fs';
import type { QueueEvent } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, type Harness, sessionToken, startHarness } from './test-harness.ts';
import { webhookJobId } from './webhooks.ts';

const CORPUS = new URL('../../../../shared/corpus/', import.meta.url);

let h: Harness;
let shop: string;
const events: QueueEvent[] = [];
beforeAll(async () => {
  h = await startHarness();
  h.app.queue.on((e) => events.push(e));
  shop = h.fake.addShop('admin-page');
  await h.install(shop);
});
afterAll(async () => {
  await h?.close();
});

function api(path: string, init: RequestInit = {}, token = sessionToken(shop)) {
  return fetch(`${h.appUrl}${path}`, {
    ...init,
    redirect: 'manual',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers },
  });
}

function finished(id: string): Promise<void> {
  const done = (e: QueueEvent) => e.type === 'completed' && e.id === id;
  if (events.some(done)) return Promise.resolve();
  return new Promise((resolve) => {
    const stop = h.app.queue.on((e) => {
      if (done(e)) {
        stop();
        resolve();
      }
    });
  });
}

describe('the embedded admin (session-token API and page)', () => {
  it('answers nothing without a valid session token', async () => {
    const forged = await api('/api/admin/status', {}, sessionToken(shop, 'not-the-app-secret-0123456789'));
    expect(forged.status).toBe(401);
    const none = await fetch(`${h.appUrl}/api/admin/status`, { redirect: 'manual' });
    expect(none.status).not.toBe(200);
    expect(await none.text()).not.toContain('"connected"');
  });

  it('shows the connection and settings, and saves settings (bad ones refused naming the field)', async () => {
    const status = (await (await api('/api/admin/status')).json()) as {
      shop: string;
      connected: boolean;
      key_source: string;
      settings: { quality: unknown };
    };
    expect(status).toMatchObject({
      shop,
      connected: true,
      key_source: 'provisioned',
      settings: { quality: 'auto' },
    });

    const bad = await api('/api/admin/settings', { method: 'POST', body: JSON.stringify({ quality: 0 }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { details: { field: string }[] } }).error.details[0]?.field).toBe(
      'quality',
    );
    const ok = await api('/api/admin/settings', {
      method: 'POST',
      body: JSON.stringify({ quality: 75, maxDimension: 1600 }),
    });
    expect(ok.status).toBe(200);
    expect((await h.app.app.shops.find(shop))?.settings).toMatchObject({ quality: 75, maxDimension: 1600 });
  });

  it('lists the last optimized image with its savings, and its restore button puts the original back', async () => {
    const original = readFileSync(new URL('photo-skimage-rocket.jpg', CORPUS));
    const product = await h.fake.createProduct(shop, {
      title: 'Rocket',
      images: [{ bytes: original, filename: 'rocket.jpg' }],
    });
    const created = h.fake.deliveries.find((d) => d.body.includes(product.id))!;
    await finished(webhookJobId(created.webhookId));
    const id = product.mediaIds[0]!;
    expect(h.fake.file(id)!.bytes.length).toBeLessThan(original.length);

    const status = (await (await api('/api/admin/status')).json()) as {
      recent: { id: string; before: number; after: number; saved_percent: number }[];
    };
    expect(status.recent[0]).toMatchObject({ id, before: original.length });
    expect(status.recent[0]!.saved_percent).toBeGreaterThan(0);

    const bad = await api('/api/admin/restore', {
      method: 'POST',
      body: JSON.stringify({ asset_ids: ['x'] }),
    });
    expect(bad.status).toBe(400);
    const res = await api('/api/admin/restore', {
      method: 'POST',
      body: JSON.stringify({ asset_ids: [id] }),
    });
    expect(res.status).toBe(202);
    const { job_id } = (await res.json()) as { job_id: string };
    await finished(job_id);
    expect(h.fake.file(id)!.bytes.equals(original)).toBe(true);
    const job = (await (await api(`/api/admin/jobs/${job_id}`)).json()) as { state: string };
    expect(job.state).toBe('completed');
    // Another shop's token does not see this shop's job.
    const other = h.fake.addShop('admin-other');
    await h.install(other);
    expect((await api(`/api/admin/jobs/${job_id}`, {}, sessionToken(other))).status).toBe(404);
  }, 240_000);

  it('connects a merchant’s own key once the API accepts it; a refused or malformed key is 400 naming the field', async () => {
    const { proAccount } = await import('@compresso/server/testing');
    const own = await proAccount(h.compresso.db, 'merchant@example.com');
    const malformed = await api('/api/admin/key', { method: 'POST', body: JSON.stringify({ key: 'hello' }) });
    expect(malformed.status).toBe(400);
    const refused = await api('/api/admin/key', {
      method: 'POST',
      body: JSON.stringify({ key: `cmp_live_${'x'.repeat(43)}` }),
    });
    expect(refused.status).toBe(400);
    expect(
      ((await refused.json()) as { error: { details: { field: string }[] } }).error.details[0]?.field,
    ).toBe('key');
    const before = await h.app.app.shops.key(shop);
    expect(before).not.toBe(own.key);
    const ok = await api('/api/admin/key', { method: 'POST', body: JSON.stringify({ key: own.key }) });
    expect(ok.status).toBe(200);
    expect(await h.app.app.shops.key(shop)).toBe(own.key);
    expect((await h.app.app.shops.find(shop))?.keySource).toBe('merchant');
  });

  it('serves the page with the app’s key for App Bridge', async () => {
    const page = await fetch(`${h.appUrl}/`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain(`<meta name="shopify-api-key" content="${API_KEY}">`);
    expect(html).toContain('app-bridge.js');
  });
});
