import { Compresso } from '@compresso/client';
import {
  type FakeProvider,
  fakeOpenAi,
  proAccount,
  startTestServer,
  type TestServer,
} from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AltTemplateError,
  checkAltTemplate,
  createAltText,
  fitAltText,
  renderAltTemplate,
} from './alt-text.ts';
import { PlatformError } from './platform-error.ts';
import { kitSql } from './sql.ts';
import { type Backend, testBackends } from './test-support.ts';
import { fixtureImage } from './testing/fixtures.ts';
import { createMemoryPlatform, type MemoryPlatform } from './testing/memory-platform.ts';

const SITE = 'alt.example';

/** A small catalog: two products (a shirt with 3 images, a mug with 2), one image with the merchant's alt text. */
async function catalog(): Promise<{ platform: MemoryPlatform; ids: string[] }> {
  const platform = createMemoryPlatform();
  platform.addSite(SITE, 'Alt Store');
  const image = await fixtureImage(1, 'small-jpeg', 48);
  const shirt = { title: 'Linen Shirt', vendor: 'Acme', productType: 'Shirts' };
  const mug = { title: 'Stoneware Mug', vendor: 'Kiln & Co', productType: '' };
  const ids = [
    platform.addAsset(SITE, { ...image, filename: 'shirt-1.jpg', parentId: 'p1', context: shirt }),
    platform.addAsset(SITE, {
      ...image,
      filename: 'shirt-2.jpg',
      parentId: 'p1',
      context: shirt,
      altText: 'Back of the shirt, merchant wrote this',
    }),
    platform.addAsset(SITE, {
      ...image,
      filename: 'shirt-3.jpg',
      parentId: 'p1',
      context: shirt,
      altText: '  ',
    }),
    platform.addAsset(SITE, { ...image, filename: 'mug-1.jpg', parentId: 'p2', context: mug }),
    platform.addAsset(SITE, { ...image, filename: 'mug-2.jpg', parentId: 'p2', context: mug }),
  ];
  return { platform, ids };
}

const altOf = async (platform: MemoryPlatform, id: string) =>
  (await platform.port.getAsset!(SITE, id)).altText;

describe('alt text templates', () => {
  const context = {
    siteName: 'Alt Store',
    title: 'Linen Shirt',
    vendor: 'Acme',
    productType: 'Shirts',
    variant: 'Blue / M',
    position: 2,
  };

  it('fills every placeholder from the context', () => {
    expect(
      renderAltTemplate(
        '{product_title} ({variant}) by {vendor}, {product_type} – {shop_name} #{n}',
        context,
        512,
      ),
    ).toBe('Linen Shirt (Blue / M) by Acme, Shirts – Alt Store #2');
  });

  it('drops what a missing value leaves behind', () => {
    const bare = { title: 'Linen Shirt' };
    expect(renderAltTemplate('{product_title} - {variant}', bare, 512)).toBe('Linen Shirt');
    expect(renderAltTemplate('{product_title} by {vendor}', bare, 512)).toBe('Linen Shirt');
    expect(renderAltTemplate('{vendor} | {product_title} | {variant} | {shop_name}', bare, 512)).toBe(
      'Linen Shirt',
    );
    expect(renderAltTemplate('{product_title} ({variant})', bare, 512)).toBe('Linen Shirt');
    expect(renderAltTemplate('{variant}', bare, 512)).toBe('');
    expect(renderAltTemplate('{product_title} - {variant} ({n})', { ...bare, position: 3 }, 512)).toBe(
      'Linen Shirt (3)',
    );
    expect(renderAltTemplate('{product_title} ({variant}, {n})', { ...bare, position: 3 }, 512)).toBe(
      'Linen Shirt (3)',
    );
    expect(renderAltTemplate('{product_title} ({n}, {variant})', { ...bare, position: 3 }, 512)).toBe(
      'Linen Shirt (3)',
    );
  });

  it('refuses unknown placeholders and stray braces, naming them', () => {
    expect(checkAltTemplate('{product_title} {colour} {n}')).toEqual([
      expect.stringMatching(/unknown placeholder \{colour\}.*\{product_title\}, \{vendor\}/),
    ]);
    expect(checkAltTemplate('{product_title')).toEqual(['a { or } without its pair']);
    expect(checkAltTemplate('  ')).toEqual(['the template is empty']);
    expect(() => renderAltTemplate('{title}', context, 512)).toThrow(AltTemplateError);
  });

  it("keeps within the platform's limit (Shopify: 512), cut on a word boundary", () => {
    const title = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' '); // ~ 800 characters
    const text = renderAltTemplate('{product_title}', { title }, 512);
    expect(text.length).toBeLessThanOrEqual(512);
    expect(text.length).toBeGreaterThan(500);
    expect(title.startsWith(text)).toBe(true);
    expect(title[text.length]).toBe(' '); // the cut fell between two words
    expect(fitAltText(`${'a'.repeat(600)}`, 512)).toHaveLength(512); // one long word: cut inside it
    expect(fitAltText('Shirt, blue, cotton', 14)).toBe('Shirt, blue');
  });
});

function describeBatches(backend: Backend): void {
  describe(`alt text batches: ${backend.name}`, () => {
    it('previews on the real images, applies to the missing ones only, and undo puts back exactly what was there', async () => {
      const db = await backend.open();
      try {
        const { platform, ids } = await catalog();
        const alt = createAltText({ db, port: platform.port });
        const request = {
          mode: 'template' as const,
          template: '{product_title} by {vendor}, image {n}',
          scope: 'missing' as const,
        };

        const preview = await alt.preview(SITE, request);
        expect(preview.source).toBe('template');
        expect(preview.message).toBeNull();
        expect(preview.items.map((i) => [i.filename, i.current, i.proposed, i.productTitle])).toEqual([
          ['shirt-1.jpg', null, 'Linen Shirt by Acme, image 1', 'Linen Shirt'],
          ['shirt-3.jpg', '  ', 'Linen Shirt by Acme, image 3', 'Linen Shirt'],
          ['mug-1.jpg', null, 'Stoneware Mug by Kiln & Co, image 1', 'Stoneware Mug'],
          ['mug-2.jpg', null, 'Stoneware Mug by Kiln & Co, image 2', 'Stoneware Mug'],
        ]);
        // A preview writes nothing.
        expect(platform.stats.alt).toBe(0);
        expect((await alt.preview(SITE, { ...request, limit: 2 })).items).toHaveLength(2);

        const batch = await alt.createBatch(SITE, request);
        expect(batch).toMatchObject({ state: 'queued', mode: 'template', scope: 'missing', changed: 0 });
        expect((await alt.activeBatch(SITE))?.id).toBe(batch.id);
        const done = await alt.runBatch(SITE, batch.id);
        expect(done).toMatchObject({ state: 'done', changed: 4, failed: 0, undoneAt: null });
        expect(await altOf(platform, ids[0]!)).toBe('Linen Shirt by Acme, image 1');
        expect(await altOf(platform, ids[1]!)).toBe('Back of the shirt, merchant wrote this');
        expect(await altOf(platform, ids[4]!)).toBe('Stoneware Mug by Kiln & Co, image 2');
        // Run again (a retried job): nothing written twice, the count stays.
        const writes = platform.stats.alt;
        expect((await alt.runBatch(SITE, batch.id)).changed).toBe(4);
        expect(platform.stats.alt).toBe(writes);

        // Every change is in the ledger with the text it replaced.
        const rows = await kitSql(db).all(
          'SELECT asset_id, alt_before, alt_after FROM kit_alt_changes WHERE batch_id = ? ORDER BY asset_id',
          [batch.id],
        );
        expect(rows).toHaveLength(4);
        expect(rows.find((r) => r.asset_id === ids[2])?.alt_before).toBe('  ');

        const undo = await alt.undoBatch(SITE, batch.id);
        expect(undo).toMatchObject({ restored: 4, kept: 0, failed: 0 });
        expect(undo.batch.undoneAt).not.toBeNull();
        expect(await Promise.all(ids.map((id) => altOf(platform, id)))).toEqual([
          null,
          'Back of the shirt, merchant wrote this',
          '  ',
          null,
          null,
        ]);
        expect((await alt.listBatches(SITE)).map((b) => [b.id, b.changed, b.undoneAt !== null])).toEqual([
          [batch.id, 4, true],
        ]);
        // An undone batch does not run again.
        expect((await alt.runBatch(SITE, batch.id)).changed).toBe(4);
        expect(await altOf(platform, ids[0]!)).toBeNull();
      } finally {
        await db.close();
      }
    });

    it('applies to all; undo keeps an image the merchant edited since, and restores the rest', async () => {
      const db = await backend.open();
      try {
        const { platform, ids } = await catalog();
        const alt = createAltText({ db, port: platform.port });
        const batch = await alt.createBatch(SITE, {
          mode: 'template',
          template: '{product_title}',
          scope: 'all',
        });
        expect((await alt.runBatch(SITE, batch.id)).changed).toBe(5);
        expect(await altOf(platform, ids[1]!)).toBe('Linen Shirt');
        await platform.port.setAltText(SITE, ids[3]!, 'The merchant, after the batch');
        const undo = await alt.undoBatch(SITE, batch.id);
        expect(undo).toMatchObject({ restored: 4, kept: 1 });
        expect(await altOf(platform, ids[1]!)).toBe('Back of the shirt, merchant wrote this');
        expect(await altOf(platform, ids[3]!)).toBe('The merchant, after the batch');
      } finally {
        await db.close();
      }
    });

    it('a platform failure mid-batch: the job run again finishes it, each image written once; a refused image is counted failed', async () => {
      const db = await backend.open();
      try {
        const { platform, ids } = await catalog();
        const alt = createAltText({ db, port: platform.port });
        const batch = await alt.createBatch(SITE, {
          mode: 'template',
          template: '{product_title}',
          scope: 'all',
        });
        // The first write goes through; the second fails as Shopify being unavailable does (the job's
        // retry); the third reaches the platform but the answer is lost (a timeout after the write).
        let writes = 0;
        const setAltText = platform.port.setAltText.bind(platform.port);
        platform.port.setAltText = async (...args) => {
          if (++writes === 2) throw new PlatformError('UNAVAILABLE', 'Shopify answered 503');
          if (writes === 3) {
            await setAltText(...args);
            throw new PlatformError('UNAVAILABLE', 'timed out after the write');
          }
          return setAltText(...args);
        };
        await expect(alt.runBatch(SITE, batch.id)).rejects.toThrow(/503/);
        expect(await alt.getBatch(SITE, batch.id)).toMatchObject({
          state: 'running',
          lastError: expect.stringMatching(/503/),
        });
        await expect(alt.runBatch(SITE, batch.id)).rejects.toThrow(/timed out/);
        // The run again: a non-retryable refusal of one image is counted, the rest are written.
        platform.failNext(SITE, 'alt', new PlatformError('INVALID', 'fileUpdate: refused'));
        const done = await alt.runBatch(SITE, batch.id);
        expect(done).toMatchObject({ state: 'done', changed: 4, failed: 1 });
        expect(platform.stats.alt).toBe(4); // 1 before the failures, 1 whose answer was lost, 2 after: none twice
        const undo = await alt.undoBatch(SITE, batch.id);
        expect(undo).toMatchObject({ restored: 4, failed: 0 });
        expect(await Promise.all(ids.map((id) => altOf(platform, id)))).toEqual([
          null,
          'Back of the shirt, merchant wrote this',
          '  ',
          null,
          null,
        ]);
      } finally {
        await db.close();
      }
    });

    it('auto: a new image without alt text gets it once; one with alt text, or undone, is left alone', async () => {
      const db = await backend.open();
      try {
        const { platform, ids } = await catalog();
        const alt = createAltText({ db, port: platform.port });
        const written = await alt.autoAltText(SITE, ids[3]!, {
          mode: 'template',
          template: '{product_title}',
        });
        expect(written).toMatchObject({ kind: 'written', text: 'Stoneware Mug', source: 'template' });
        expect(await altOf(platform, ids[3]!)).toBe('Stoneware Mug');
        expect(await alt.autoAltText(SITE, ids[1]!, { mode: 'template' })).toEqual({
          kind: 'skipped',
          reason: 'has_alt',
        });
        // A day's automatic writes are one batch (scope auto), listed and undone together; after that
        // the images are not written again.
        expect(await alt.autoAltText(SITE, ids[0]!, { mode: 'template' })).toMatchObject({ kind: 'written' });
        const autos = await alt.listBatches(SITE);
        expect(autos).toHaveLength(1);
        expect(autos[0]).toMatchObject({ scope: 'auto', changed: 2, state: 'done' });
        expect(await alt.activeBatch(SITE)).toBeUndefined();
        expect(await alt.undoBatch(SITE, autos[0]!.id)).toMatchObject({ restored: 2 });
        expect(await altOf(platform, ids[3]!)).toBeNull();
        expect(await altOf(platform, ids[0]!)).toBeNull();
        expect(await alt.autoAltText(SITE, ids[3]!, { mode: 'template' })).toEqual({
          kind: 'skipped',
          reason: 'written_before',
        });
        // Shopify unavailable at the write: no trace left, so the image's next event writes it.
        platform.failNext(SITE, 'alt', new PlatformError('UNAVAILABLE', 'Shopify answered 503'));
        await expect(alt.autoAltText(SITE, ids[4]!, { mode: 'template' })).rejects.toThrow(/503/);
        expect(await alt.listBatches(SITE)).toHaveLength(1);
        expect(await alt.autoAltText(SITE, ids[4]!, { mode: 'template' })).toMatchObject({ kind: 'written' });
        expect(await altOf(platform, ids[4]!)).toBe('Stoneware Mug by Kiln & Co');
        // The day's batch was undone: a new one holds what came after.
        expect((await alt.listBatches(SITE)).map((b) => [b.changed, b.undoneAt === null])).toEqual([
          [1, true],
          [2, false],
        ]);
      } finally {
        await db.close();
      }
    });
  });
}

for (const backend of testBackends()) describeBatches(backend);

describe('AI-written alt text through /api/v1/alt-text', { timeout: 60_000 }, () => {
  const OPENAI_KEY = 'sk-test-kit-alt-0123456789';
  let fake: FakeProvider;
  let withAi: TestServer;
  let withoutAi: TestServer;
  let aiClient: Compresso;
  let plainClient: Compresso;
  const backend = testBackends()[0]!;
  beforeAll(async () => {
    fake = await fakeOpenAi({ apiKey: OPENAI_KEY });
    [withAi, withoutAi] = await Promise.all([
      startTestServer({
        dbPath: ':memory:',
        overrides: { logLevel: 'warn', openaiApiKey: OPENAI_KEY, openaiBaseUrl: fake.url },
      }),
      startTestServer({ dbPath: ':memory:', overrides: { logLevel: 'warn' } }),
    ]);
    aiClient = new Compresso((await proAccount(withAi.db, 'ai@example.com')).key, { baseUrl: withAi.url });
    plainClient = new Compresso((await proAccount(withoutAi.db, 'plain@example.com')).key, {
      baseUrl: withoutAi.url,
    });
  });
  afterAll(async () => {
    await Promise.all([withAi?.close(), withoutAi?.close(), fake?.close()]);
  });

  it("writes the vision model's text with the product's context; the batch writes what the preview showed, asking once", async () => {
    const db = await backend.open();
    try {
      const { platform, ids } = await catalog();
      const alt = createAltText({ db, port: platform.port, client: () => aiClient });
      const before = fake.requests.length;
      const preview = await alt.preview(SITE, { mode: 'ai', scope: 'missing', limit: 1 });
      expect(preview).toMatchObject({ source: 'ai', message: null });
      expect(preview.items[0]).toMatchObject({
        filename: 'shirt-1.jpg',
        proposed: 'A gradient from green to pink, with no other content.',
        source: 'ai',
      });
      const asked = fake.requests.slice(before);
      expect(asked).toHaveLength(1);
      expect(JSON.stringify(asked[0]!.json)).toContain('Linen Shirt');
      expect(JSON.stringify(asked[0]!.json)).toContain('Acme');

      const batch = await alt.createBatch(SITE, { mode: 'ai', scope: 'missing' });
      expect((await alt.runBatch(SITE, batch.id)).changed).toBe(4);
      expect(await altOf(platform, ids[0]!)).toBe('A gradient from green to pink, with no other content.');
      // The previewed image was answered again from the server's idempotency store: 3 new asks for 4 images.
      expect(fake.requests.length - before).toBe(4);
    } finally {
      await db.close();
    }
  });

  it('falls back to the template when the server has no AI, and says so (never its offline guess)', async () => {
    const db = await backend.open();
    try {
      const { platform, ids } = await catalog();
      const alt = createAltText({ db, port: platform.port, client: () => plainClient });
      const preview = await alt.preview(SITE, { mode: 'ai', template: '{product_title}', scope: 'missing' });
      expect(preview.source).toBe('template');
      expect(preview.message).toMatch(/not set up on the Compresso server.*template/);
      expect(preview.items.map((i) => [i.proposed, i.source])).toEqual([
        ['Linen Shirt', 'template'],
        ['Linen Shirt', 'template'],
        ['Stoneware Mug', 'template'],
        ['Stoneware Mug', 'template'],
      ]);
      const batch = await alt.createBatch(SITE, {
        mode: 'ai',
        template: '{product_title}',
        scope: 'missing',
      });
      const done = await alt.runBatch(SITE, batch.id);
      expect(done).toMatchObject({ changed: 4, message: expect.stringMatching(/not set up/) });
      expect(await altOf(platform, ids[3]!)).toBe('Stoneware Mug');
    } finally {
      await db.close();
    }
  });
});
