import { randomUUID } from 'node:crypto';
import type { QueueEvent } from '@compresso/runtime';
import { type FakeProvider, fakeOpenAi, smallJpeg } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionToken, startHarness } from './test-harness.ts';
import { webhookJobId } from './webhooks.ts';

/**
 * The app under test, one shop installed, and what its queue reported. The shop's cost bucket is a
 * Plus-sized one: the adapter's product listing asks for ~520 points, and on the default bucket
 * (2000, 100 a second, half kept for the merchant's other apps) a batch listing right after a preview
 * waits seconds for the refill — as it should in a shop, but not in every test.
 */
async function setUp(options: Parameters<typeof startHarness>[0] = {}) {
  const h = await startHarness({
    fake: { bucket: { maximumAvailable: 20_000, restoreRate: 1000 } },
    ...options,
  });
  const events: QueueEvent[] = [];
  h.app.queue.on((e) => events.push(e));
  const shop = h.fake.addShop(`alt-${randomUUID().slice(0, 8)}`);
  await h.install(shop);
  const api = async (path: string, body?: unknown) => {
    const res = await fetch(`${h.appUrl}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      redirect: 'manual',
      headers: { authorization: `Bearer ${sessionToken(shop)}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return {
      status: res.status,
      body: (await res.json()) as Record<string, unknown> & {
        error?: { code: string; details?: { field: string }[] };
      },
    };
  };
  /** Resolves when the job completed; rejects on its last failure. */
  const finished = (id: string) =>
    new Promise<void>((resolve, reject) => {
      const check = (e: QueueEvent) => {
        if (!('id' in e) || e.id !== id) return false;
        if (e.type === 'completed') resolve();
        else if (e.type === 'failed' && !e.willRetry) reject(new Error(`job ${id} failed: ${e.error}`));
        else return false;
        return true;
      };
      if (events.some(check)) return;
      const stop = h.app.queue.on((e) => {
        if (check(e)) stop();
      });
    });
  /** A product as a merchant makes it; resolves once its products/create job is done. */
  const product = async (
    title: string,
    alts: (string | null)[],
    vendor = 'Acme',
    variants?: { title: string; images: number[] }[],
  ) => {
    const bytes = await smallJpeg();
    const made = await h.fake.createProduct(shop, {
      title,
      vendor,
      ...(variants ? { variants } : {}),
      images: alts.map((alt, i) => ({
        bytes,
        filename: `${title.slice(0, 12).replace(/\W/g, '-')}-${i + 1}.jpg`,
        alt,
      })),
    });
    const created = h.fake.deliveries.find((d) => d.topic === 'products/create' && d.body.includes(made.id));
    if (created) await finished(webhookJobId(created.webhookId));
    return made;
  };
  const altOf = (id: string) => h.fake.file(id)?.alt;
  return { h, shop, api, finished, product, altOf };
}

describe('alt text in the admin (template, apply, undo; auto on arrival)', { timeout: 60_000 }, () => {
  let t: Awaited<ReturnType<typeof setUp>>;
  beforeAll(async () => {
    t = await setUp();
  });
  afterAll(async () => {
    await t?.h.close();
  });

  it('previews a template on the real products, applies it to the images missing alt text only, and undo restores every previous text exactly', async () => {
    const shirt = await t.product('Linen Shirt', [null, 'Back view, by the merchant', null]);
    const mug = await t.product('Stoneware Mug', [null], 'Kiln & Co');
    // Auto alt text is off by default: nothing was written on arrival.
    expect([...shirt.mediaIds, ...mug.mediaIds].map(t.altOf)).toEqual([
      '',
      'Back view, by the merchant',
      '',
      '',
    ]);

    const request = {
      mode: 'template',
      template: '{product_title} by {vendor}, photo {n}',
      scope: 'missing',
    };
    const preview = await t.api('/api/admin/alt-text/preview', request);
    expect(preview.status).toBe(200);
    expect(preview.body).toMatchObject({ source: 'template', message: null });
    expect(preview.body.items).toEqual([
      expect.objectContaining({
        asset_id: shirt.mediaIds[0],
        product_title: 'Linen Shirt',
        filename: 'Linen-Shirt-1.jpg',
        current: null,
        proposed: 'Linen Shirt by Acme, photo 1',
      }),
      expect.objectContaining({ asset_id: shirt.mediaIds[2], proposed: 'Linen Shirt by Acme, photo 3' }),
      expect.objectContaining({ asset_id: mug.mediaIds[0], proposed: 'Stoneware Mug by Kiln & Co, photo 1' }),
    ]);
    expect(t.altOf(shirt.mediaIds[0]!)).toBe(''); // a preview writes nothing

    const applied = await t.api('/api/admin/alt-text/apply', request);
    expect(applied.status).toBe(202);
    const batchId = applied.body.batch_id as string;
    expect(batchId).toMatch(/^alt_/);
    await t.finished(applied.body.job_id as string);
    expect([...shirt.mediaIds, ...mug.mediaIds].map(t.altOf)).toEqual([
      'Linen Shirt by Acme, photo 1',
      'Back view, by the merchant',
      'Linen Shirt by Acme, photo 3',
      'Stoneware Mug by Kiln & Co, photo 1',
    ]);
    const listed = await t.api('/api/admin/alt-text/batches');
    expect(listed.body.batches).toEqual([
      expect.objectContaining({
        id: batchId,
        mode: 'template',
        scope: 'missing',
        changed: 3,
        undone: false,
        state: 'done',
      }),
    ]);
    expect(Number.isNaN(Date.parse((listed.body.batches as { created_at: string }[])[0]!.created_at))).toBe(
      false,
    );

    const undo = await t.api('/api/admin/alt-text/undo', { batch_id: batchId });
    expect(undo.status).toBe(202);
    await t.finished(undo.body.job_id as string);
    expect([...shirt.mediaIds, ...mug.mediaIds].map(t.altOf)).toEqual([
      '',
      'Back view, by the merchant',
      '',
      '',
    ]);
    expect((await t.api('/api/admin/alt-text/batches')).body.batches).toEqual([
      expect.objectContaining({ id: batchId, changed: 3, undone: true }),
    ]);
    expect((await t.api('/api/admin/alt-text/undo', { batch_id: batchId })).body.error?.code).toBe(
      'ALREADY_UNDONE',
    );
    expect((await t.api('/api/admin/alt-text/undo', { batch_id: 'alt_nosuchbatch' })).status).toBe(404);
  });

  it("fills {variant} from the variant that shows the image (none for a product's shared images)", async () => {
    const tee = await t.product('Cotton Tee', [null, null, null], 'Acme', [
      { title: 'Blue / M', images: [0] },
      { title: 'Red / M', images: [1] },
    ]);
    const preview = await t.api('/api/admin/alt-text/preview', {
      mode: 'template',
      template: '{product_title} - {variant} ({n})',
      scope: 'missing',
      limit: 50,
    });
    const proposed = (id: string) =>
      (preview.body.items as { asset_id: string; proposed: string }[]).find((i) => i.asset_id === id)
        ?.proposed;
    expect(tee.mediaIds.map(proposed)).toEqual([
      'Cotton Tee - Blue / M (1)',
      'Cotton Tee - Red / M (2)',
      'Cotton Tee (3)',
    ]);
  });

  it('refuses bad requests with 400 naming the field (unknown placeholder, mode, scope)', async () => {
    const bad = await t.api('/api/admin/alt-text/preview', {
      mode: 'template',
      template: '{title}',
      scope: 'missing',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error?.code).toBe('INVALID_REQUEST');
    expect(bad.body.error?.details?.map((d) => d.field)).toEqual(['template']);
    const worse = await t.api('/api/admin/alt-text/apply', { mode: 'poetry', scope: 'some' });
    expect(worse.body.error?.details?.map((d) => d.field).sort()).toEqual(['mode', 'scope']);
    expect((await t.api('/api/admin/alt-text/undo', {})).status).toBe(400);
  });

  it("keeps to Shopify's 512 characters, cut on a word boundary, written through fileUpdate", async () => {
    const title = Array.from({ length: 90 }, (_, i) => `Handmade${i}`).join(' '); // 90 words, ~ 900 characters
    const long = await t.product(title.slice(0, 255), [null]); // Shopify titles are up to 255; the template repeats it
    const request = {
      mode: 'template',
      template: '{product_title} – {product_title} – {product_title}',
      scope: 'missing',
    };
    const preview = await t.api('/api/admin/alt-text/preview', request);
    const item = (preview.body.items as { asset_id: string; proposed: string }[]).find(
      (i) => i.asset_id === long.mediaIds[0],
    )!;
    expect(item.proposed.length).toBeLessThanOrEqual(512);
    expect(item.proposed.length).toBeGreaterThan(480);
    const full = `${title.slice(0, 255)} – ${title.slice(0, 255)} – ${title.slice(0, 255)}`;
    expect(full.startsWith(item.proposed)).toBe(true);
    expect(full[item.proposed.length]).toBe(' ');
    const applied = await t.api('/api/admin/alt-text/apply', request);
    await t.finished(applied.body.job_id as string);
    expect(t.altOf(long.mediaIds[0]!)).toBe(item.proposed);
  });

  it("auto: a new product's images without alt text get it per the shop's setting; the merchant's own stays", async () => {
    const saved = await t.api('/api/admin/settings', {
      alt_text_mode: 'template',
      alt_text_template: '{product_title} from {shop_name}, image {n}',
    });
    expect(saved.status).toBe(200);
    expect(saved.body.settings).toMatchObject({ alt_text_mode: 'template' });
    const refused = await t.api('/api/admin/settings', { alt_text_template: '{colour}' });
    expect(refused.body.error?.details?.[0]?.field).toBe('alt_text_template');

    const lamp = await t.product('Brass Lamp', [null, 'Lamp switched on']);
    const shopName = (await t.api('/api/admin/status')).body.shop as string;
    expect(shopName).toBe(t.shop);
    expect(t.altOf(lamp.mediaIds[0]!)).toMatch(/^Brass Lamp from .+, image 1$/);
    expect(t.altOf(lamp.mediaIds[1]!)).toBe('Lamp switched on');
    const [auto] = (await t.api('/api/admin/alt-text/batches')).body.batches as {
      scope: string;
      changed: number;
    }[];
    expect(auto).toMatchObject({ scope: 'auto', changed: 1 });
    await t.api('/api/admin/settings', { alt_text_mode: 'off' });
  });

  it('AI asked of a server without AI: falls back to the template and says so, in the preview and on the batch', async () => {
    const vase = await t.product('Glass Vase', [null]);
    const preview = await t.api('/api/admin/alt-text/preview', {
      mode: 'ai',
      template: '{product_title} by {vendor}',
      scope: 'missing',
    });
    expect(preview.body).toMatchObject({
      source: 'template',
      message: expect.stringMatching(/AI alt text is not set up on the Compresso server.*template/),
    });
    const items = preview.body.items as { asset_id: string; proposed: string; source: string }[];
    expect(items.every((i) => i.source === 'template')).toBe(true);
    expect(items.find((i) => i.asset_id === vase.mediaIds[0])).toMatchObject({
      proposed: 'Glass Vase by Acme',
    });
    const applied = await t.api('/api/admin/alt-text/apply', {
      mode: 'ai',
      template: '{product_title}',
      scope: 'missing',
    });
    await t.finished(applied.body.job_id as string);
    expect(t.altOf(vase.mediaIds[0]!)).toBe('Glass Vase');
    const [newest] = (await t.api('/api/admin/alt-text/batches')).body.batches as unknown[];
    expect(newest).toMatchObject({
      id: applied.body.batch_id,
      mode: 'ai',
      changed: items.length,
      message: expect.stringMatching(/not set up/),
    });
  });
});

describe('AI alt text through the Compresso server (/api/v1/alt-text)', { timeout: 60_000 }, () => {
  const OPENAI_KEY = 'sk-test-shopify-alt-0123456789';
  let fake: FakeProvider;
  let t: Awaited<ReturnType<typeof setUp>>;
  beforeAll(async () => {
    fake = await fakeOpenAi({ apiKey: OPENAI_KEY });
    t = await setUp({ compresso: { openaiApiKey: OPENAI_KEY, openaiBaseUrl: fake.url } });
  });
  afterAll(async () => {
    await t?.h.close();
    await fake?.close();
  });

  it("writes the vision model's text with the product's context, and applies what the preview showed", async () => {
    const chair = await t.product('Walnut Chair', [null, null], 'Oak & Iron');
    const preview = await t.api('/api/admin/alt-text/preview', { mode: 'ai', scope: 'missing' });
    expect(preview.status).toBe(200);
    expect(preview.body).toMatchObject({ source: 'ai', message: null });
    expect(preview.body.items).toEqual([
      expect.objectContaining({
        asset_id: chair.mediaIds[0],
        product_title: 'Walnut Chair',
        proposed: 'A gradient from green to pink, with no other content.',
        source: 'ai',
      }),
      expect.objectContaining({ asset_id: chair.mediaIds[1], source: 'ai' }),
    ]);
    const asked = fake.requests.filter((r) => r.path === '/v1/chat/completions');
    expect(asked).toHaveLength(2);
    expect(JSON.stringify(asked[0]!.json)).toContain('Walnut Chair');
    expect(JSON.stringify(asked[0]!.json)).toContain('Oak & Iron');

    const applied = await t.api('/api/admin/alt-text/apply', { mode: 'ai', scope: 'missing' });
    await t.finished(applied.body.job_id as string);
    expect(chair.mediaIds.map(t.altOf)).toEqual([
      'A gradient from green to pink, with no other content.',
      'A gradient from green to pink, with no other content.',
    ]);
    // The batch got the previewed answers back from the server (same Idempotency-Key): no new asks.
    expect(fake.requests.filter((r) => r.path === '/v1/chat/completions')).toHaveLength(2);
    expect((await t.api('/api/admin/alt-text/batches')).body.batches).toEqual([
      expect.objectContaining({ mode: 'ai', changed: 2, message: null }),
    ]);
  });
});
