import { describe, expect, it } from 'vitest';
import { costPacer, noPacer, type Pacer } from '../pacer.ts';
import { isPlatformError, type PlatformErrorCode } from '../platform-error.ts';
import type { AssetContext, PlatformPort } from '../port.ts';
import { type FixtureImage, fixtureImage } from './fixtures.ts';
import { type ManualClock, manualClock } from './manual-clock.ts';

/** An image the battery asks the harness to put on a fresh site, with what the platform should know around it. */
export interface SeedImage extends FixtureImage {
  altText: string | null;
  context: AssetContext;
}

export interface PortSetup {
  images: SeedImage[];
  /** The pacer the adapter must call around each request. */
  pacer: Pacer;
  /** The clock the adapter (and a fake platform's bucket) must wait on. */
  clock: ManualClock;
  /** When given, the platform throttles with a leaky bucket of this size and restore rate. */
  bucket?: { size: number; restorePerSecond: number };
}

export interface PortHarness {
  port: PlatformPort;
  site: string;
  /** The seeded images' ids, in the order of `images`. */
  ids: string[];
  /** An id of the platform's form that names no asset. */
  missingId: string;
  /** THROTTLED refusals the platform has answered so far. */
  throttled(): number;
  close(): Promise<void>;
}

export type PortHarnessFactory = (setup: PortSetup) => Promise<PortHarness>;

async function seedImages(n: number): Promise<SeedImage[]> {
  const images: SeedImage[] = [];
  for (let i = 0; i < n; i++) {
    const image = await fixtureImage(i + 1, i % 3 === 2 ? 'png' : 'jpeg', 48);
    images.push({
      ...image,
      altText: i === 0 ? 'A red chair' : null,
      context: { title: `Product ${i + 1}`, vendor: 'Acme', productType: 'Chair', position: 1 },
    });
  }
  return images;
}

async function codeOf(
  work: Promise<unknown>,
): Promise<PlatformErrorCode | 'no error' | 'not a PlatformError'> {
  try {
    await work;
    return 'no error';
  } catch (error) {
    return isPlatformError(error) ? error.code : 'not a PlatformError';
  }
}

/**
 * What every adapter of the platform port must do, run against a fresh site the harness seeds: the
 * in-memory reference platform passes it, and so must the Shopify adapter over its fake Admin API.
 */
export function describePlatformPortBattery(name: string, factory: PortHarnessFactory): void {
  const withHarness =
    (
      n: number,
      test: (h: PortHarness, images: SeedImage[], clock: ManualClock) => Promise<void>,
      extra = {},
    ) =>
    async () => {
      const images = await seedImages(n);
      const clock = manualClock();
      const harness = await factory({ images, pacer: noPacer, clock, ...extra });
      try {
        await test(harness, images, clock);
      } finally {
        await harness.close();
      }
    };

  describe(`platform port battery: ${name}`, () => {
    it(
      'lists every asset once across pages, and a cursor resumes where it was issued',
      withHarness(7, async ({ port, site, ids }) => {
        const seen: string[] = [];
        const cursors: (string | null)[] = [];
        let cursor: string | null = null;
        do {
          const page = await port.listAssets(site, { cursor, limit: 3 });
          expect(page.assets.length).toBeGreaterThan(0);
          expect(page.assets.length).toBeLessThanOrEqual(3);
          seen.push(...page.assets.map((a) => a.id));
          cursor = page.cursor;
          cursors.push(cursor);
        } while (cursor);
        expect(seen.toSorted()).toEqual(ids.toSorted());
        expect(new Set(seen).size).toBe(seen.length);
        // A cursor kept (in a run's row) and used again later gives the rest, not the whole list.
        const resumed: string[] = [];
        cursor = cursors[0]!;
        while (cursor) {
          const page = await port.listAssets(site, { cursor, limit: 3 });
          resumed.push(...page.assets.map((a) => a.id));
          cursor = page.cursor;
        }
        expect(resumed).toEqual(seen.slice(seen.length - resumed.length));
        expect(resumed.length).toBe(seen.length - 3);
        expect(await codeOf(port.listAssets(site, { cursor: 'not-a-cursor-of-yours' }))).toBe('INVALID');
        if (port.countAssets) expect(await port.countAssets(site)).toBe(ids.length);
      }),
    );

    it(
      'fetches the exact bytes with their facts',
      withHarness(3, async ({ port, site, ids }, images) => {
        for (const [i, id] of ids.entries()) {
          const { asset, bytes } = await port.fetchAsset(site, id);
          expect(Buffer.from(bytes).equals(Buffer.from(images[i]!.bytes))).toBe(true);
          expect(asset).toMatchObject({
            id,
            contentType: images[i]!.contentType,
            altText: images[i]!.altText,
          });
          if (asset.size !== undefined) expect(asset.size).toBe(images[i]!.bytes.byteLength);
          expect(asset.filename.split('.').pop()).toBe(images[i]!.filename.split('.').pop());
        }
      }),
    );

    it(
      'replaces bytes in place: same id, the new bytes served, the listing unchanged; another kind of file is refused',
      withHarness(3, async ({ port, site, ids }, images) => {
        const next = await fixtureImage(99, 'jpeg', 32);
        const replaced = await port.replaceAsset(site, ids[0]!, {
          bytes: next.bytes,
          contentType: 'image/jpeg',
          filename: images[0]!.filename,
        });
        expect(replaced.id).toBe(ids[0]);
        const { bytes } = await port.fetchAsset(site, ids[0]!);
        expect(Buffer.from(bytes).equals(Buffer.from(next.bytes))).toBe(true);
        const listed = (await port.listAssets(site, { limit: 50 })).assets.map((a) => a.id);
        expect(listed.toSorted()).toEqual(ids.toSorted());
        // A PNG in place of a JPEG would change the file's extension: refused, the file untouched.
        const png = await fixtureImage(98, 'png', 32);
        expect(
          await codeOf(
            port.replaceAsset(site, ids[0]!, {
              bytes: png.bytes,
              contentType: 'image/png',
              filename: 'x.png',
            }),
          ),
        ).toBe('INVALID');
        expect(
          Buffer.from((await port.fetchAsset(site, ids[0]!)).bytes).equals(Buffer.from(next.bytes)),
        ).toBe(true);
      }),
    );

    it(
      'sets and clears alt text, read back through fetch; longer than the limit is refused',
      withHarness(2, async ({ port, site, ids }) => {
        await port.setAltText(site, ids[1]!, 'Blue sofa, side view');
        expect((await port.fetchAsset(site, ids[1]!)).asset.altText).toBe('Blue sofa, side view');
        await port.setAltText(site, ids[1]!, null);
        expect((await port.fetchAsset(site, ids[1]!)).asset.altText ?? null).toBeNull();
        const long = 'x'.repeat(port.maxAltTextLength + 1);
        expect(await codeOf(port.setAltText(site, ids[1]!, long))).toBe('INVALID');
        await port.setAltText(site, ids[1]!, 'y'.repeat(port.maxAltTextLength));
        expect((await port.fetchAsset(site, ids[1]!)).asset.altText).toHaveLength(port.maxAltTextLength);
      }),
    );

    it(
      'gives the context the platform knows for an asset',
      withHarness(2, async ({ port, site, ids }, images) => {
        const context = await port.assetContext(site, ids[1]!);
        expect(context).toMatchObject({
          title: images[1]!.context.title,
          vendor: 'Acme',
          productType: 'Chair',
        });
        expect(typeof context.siteName).toBe('string');
      }),
    );

    it(
      'answers an unknown asset with NOT_FOUND, not retryable, for every operation',
      withHarness(1, async ({ port, site, missingId }, images) => {
        const replacement = {
          bytes: images[0]!.bytes,
          contentType: images[0]!.contentType,
          filename: images[0]!.filename,
        };
        for (const work of [
          port.fetchAsset(site, missingId),
          port.replaceAsset(site, missingId, replacement),
          port.setAltText(site, missingId, 'alt'),
          port.assetContext(site, missingId),
        ]) {
          let caught: unknown;
          await work.catch((error) => {
            caught = error;
          });
          expect(isPlatformError(caught) && caught.code).toBe('NOT_FOUND');
          expect(isPlatformError(caught) && caught.retryable).toBe(false);
        }
      }),
    );

    it('under a cost budget, a burst completes with no THROTTLED answer when paced, and completes anyway unpaced', async () => {
      const images = await seedImages(2);
      const bucket = { size: 20, restorePerSecond: 5 };
      for (const paced of [true, false]) {
        const clock = manualClock();
        const pacer = paced ? costPacer({ clock, reserve: 0.25 }) : noPacer;
        const harness = await factory({ images, pacer, clock, bucket });
        try {
          // Learn the bucket once (the first answer carries its status), then the burst.
          await harness.port.fetchAsset(harness.site, harness.ids[0]!);
          const before = harness.throttled();
          const fetched = await Promise.all(
            Array.from({ length: 40 }, (_, i) => harness.port.fetchAsset(harness.site, harness.ids[i % 2]!)),
          );
          expect(fetched).toHaveLength(40);
          if (paced) expect(harness.throttled() - before).toBe(0);
          else expect(harness.throttled() - before).toBeGreaterThan(0);
          // 40 fetches at one point each, 20 points and 5 a second: at least (40 - 20 · 0.75) / 5 s waited.
          expect(clock.slept).toBeGreaterThanOrEqual(paced ? 5000 : 1);
        } finally {
          await harness.close();
        }
      }
    });
  });
}
