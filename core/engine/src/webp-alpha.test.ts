import sharp from 'sharp';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createEngine } from './engine.ts';
import { closeMetricPool } from './metric/index.ts';
import type { AutoEncoder } from './optimize.ts';
import { corpus } from './test-support/corpus.ts';
import * as alphaModule from './webp-alpha.ts';
import { webpAlpha, webpChunks, withWebpAlpha } from './webp-alpha.ts';

// Counts the splices optimize.ts makes, so the byte-equality below is known to cover them.
vi.mock('./webp-alpha.ts', async (importOriginal) => {
  const actual = await importOriginal<typeof import('./webp-alpha.ts')>();
  return { ...actual, withWebpAlpha: vi.fn(actual.withWebpAlpha) };
});

afterAll(() => closeMetricPool());

const ids = (file: Uint8Array) => webpChunks(file)?.map((c) => c.id);

describe('the alpha chunk of a lossy WebP', () => {
  it('is the same at every quality, and splicing it gives the full encode to the byte', async () => {
    const { data, info } = await sharp(corpus('icon-oxygen-konqueror.png'))
      .ensureAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    const rgba = () => sharp(data, { raw: { width: info.width, height: info.height, channels: 4 } });
    const first = await rgba().webp({ quality: 30 }).toBuffer();
    expect(ids(first)).toEqual(['VP8X', 'ALPH', 'VP8 ']);
    const known = webpAlpha(first)!;
    for (const quality of [5, 55, 80, 100]) {
      const full = await rgba().webp({ quality }).toBuffer();
      const draft = await rgba().webp({ quality, alphaQuality: 0 }).toBuffer();
      expect(draft.length, `Q ${quality}`).toBeLessThan(full.length);
      expect(Buffer.compare(withWebpAlpha(draft, known)!, full), `Q ${quality}`).toBe(0);
    }
  });

  it('is not spliced into what is not a single-frame lossy WebP with alpha and the same canvas', async () => {
    const icon = corpus('icon-oxygen-konqueror.png');
    const known = webpAlpha(await sharp(icon).webp().toBuffer())!;
    // Opaque: no VP8X, no ALPH.
    const opaque = await sharp(icon).flatten().webp().toBuffer();
    expect(webpAlpha(opaque)).toBeUndefined();
    expect(withWebpAlpha(opaque, known)).toBeUndefined();
    // Lossless: the alpha is inside the VP8L bitstream.
    expect(withWebpAlpha(await sharp(icon).webp({ lossless: true }).toBuffer(), known)).toBeUndefined();
    // Another canvas size.
    expect(withWebpAlpha(await sharp(icon).resize(128).webp().toBuffer(), known)).toBeUndefined();
    // Not a WebP, or one cut short or padded.
    const good = await sharp(icon).webp({ quality: 50 }).toBuffer();
    expect(withWebpAlpha(good, known)).toBeInstanceOf(Buffer);
    expect(webpChunks(await sharp(icon).png().toBuffer())).toBeUndefined();
    expect(webpChunks(good.subarray(0, good.length - 3))).toBeUndefined();
    expect(webpChunks(Buffer.concat([good, Buffer.alloc(2)]))).toBeUndefined();
    // An animation keeps its frames' own alpha.
    const frames = [
      await sharp(icon).resize(64).png().toBuffer(),
      await sharp(icon).resize(64).flip().png().toBuffer(),
    ];
    const animated = await sharp(frames, { join: { animated: true } })
      .webp({ loop: 0, delay: [100, 100] })
      .toBuffer();
    expect(ids(animated)).toContain('ANMF');
    expect(webpAlpha(animated)).toBeUndefined();
  });

  it('is spliced by the engine into every lossy WebP after the first of one image, to the same bytes', async () => {
    const spliced = vi.mocked(alphaModule.withWebpAlpha);
    const qualities = [35, 60, 80, 92];
    let outputs: Buffer[] = [];
    const everyQuality: AutoEncoder = async (_source, _options, _format, encodeAtQuality) => {
      outputs = [];
      for (const q of qualities) outputs.push(Buffer.from((await encodeAtQuality(q)).data));
      return { encoded: await encodeAtQuality(qualities[0]!), steps: qualities.length };
    };
    const auto = createEngine({ concurrency: 1, auto: everyQuality });
    const fixed = createEngine({ concurrency: 1 });
    // With metadata kept the file carries ICCP and EXIF chunks around the alpha and the colour.
    const withMetadata = await sharp(corpus('icon-oxygen-folder-red.png'))
      .withIccProfile('p3')
      .withExif({ IFD0: { Copyright: 'Compresso test' } })
      .png()
      .toBuffer();
    const cases = [
      ['konqueror', corpus('icon-oxygen-konqueror.png'), true],
      ['Debian logo', corpus('graphic-debian-emerald-logo.png'), true],
      ['folder icon with ICC and EXIF, kept', withMetadata, false],
    ] as const;
    for (const [name, input, strip_exif] of cases) {
      const options = { output_format: 'webp', max_dimension: 384, strip_exif } as const;
      const before = spliced.mock.results.filter((r) => r.value instanceof Buffer).length;
      await auto.optimize(input, { ...options, quality: 'auto' });
      const after = spliced.mock.results.filter((r) => r.value instanceof Buffer).length;
      // Every encode after the first is spliced (the last repeats the first quality).
      expect(after - before, name).toBe(qualities.length);
      for (const [i, q] of qualities.entries()) {
        const { data } = await fixed.optimize(input, { ...options, quality: q });
        expect(Buffer.compare(outputs[i]!, data), `${name} Q ${q}`).toBe(0);
      }
      if (!strip_exif) expect(ids(outputs[1]!)).toEqual(['VP8X', 'ICCP', 'ALPH', 'VP8 ', 'EXIF']);
    }
  });
});
