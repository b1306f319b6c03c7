import sharp, { type OutputInfo } from 'sharp';
import { describe, expect, it } from 'vitest';
import { applyEncoder } from './encode.ts';
import { decodeToRgb, type RgbImage, ssimulacra2 } from './metric/index.ts';
import { DEFAULT_SCALE_QUALITY, encoderQuality, scoreForQuality } from './quality.ts';
import { corpus } from './test-support/corpus.ts';

/**
 * The scale's promise, measured rather than restated: the same Compresso quality gives the same
 * SSIMULACRA2 in every lossy format. Three real photos at 512 px keep it to a few seconds; the full
 * calibration (2048 px, every corpus photo) is test/bench/calibrate.ts.
 */
const PHOTOS = ['photo-skimage-chelsea.png', 'photo-mate-LadyBird.jpg', 'photo-skimage-coffee.png'];
const SIZE = 512;
/**
 * Calibration holds the means within ±2 points at 2048 px over the corpus; three small photos are a
 * noisier sample (one photo's own curve moves a format's mean by a point), hence ±2.5 here. Measured
 * with the calibrated curves: JPEG 79.5, WebP 80.5, AVIF 78.6; sharp's unmapped defaults (WebP 80,
 * AVIF 50) put AVIF 7.3 points under JPEG.
 */
const TOLERANCE = 2.5;

const LOSSY = ['jpeg', 'webp', 'avif'] as const;

async function loadPhotos(): Promise<{ raw: Buffer; info: OutputInfo; reference: RgbImage }[]> {
  return Promise.all(
    PHOTOS.map(async (name) => {
      const { data: raw, info } = await sharp(corpus(name))
        .resize(SIZE, SIZE, { fit: 'inside' })
        .removeAlpha()
        .raw()
        .toBuffer({ resolveWithObject: true });
      return { raw, info, reference: { width: info.width, height: info.height, data: new Uint8Array(raw) } };
    }),
  );
}

/** Encodes through the engine's own encoder settings (applyEncoder), then scores against the photo. */
async function meanScore(
  photos: Awaited<ReturnType<typeof loadPhotos>>,
  format: (typeof LOSSY)[number],
  quality: number,
): Promise<number> {
  let sum = 0;
  for (const { raw, info, reference } of photos) {
    const pipeline = sharp(raw, { raw: { width: info.width, height: info.height, channels: 3 } });
    const bytes = await applyEncoder(pipeline, { format, quality }).toBuffer();
    sum += ssimulacra2(reference, await decodeToRgb(bytes));
  }
  return sum / photos.length;
}

describe('the one quality scale', () => {
  it('maps every quality to an encoder quality in range, never decreasing', () => {
    for (const format of LOSSY) {
      let previous = 0;
      for (let q = 1; q <= 100; q++) {
        const e = encoderQuality(format, q);
        expect(Number.isInteger(e), `${format} q${q} → ${e}`).toBe(true);
        expect(e).toBeGreaterThanOrEqual(1);
        expect(e).toBeLessThanOrEqual(100);
        expect(e, `${format} q${q}`).toBeGreaterThanOrEqual(previous);
        previous = e;
      }
    }
    // JPEG is the scale's anchor: Compresso Q is mozjpeg's own quality.
    for (const q of [1, 40, 80, 100]) expect(encoderQuality('jpeg', q)).toBe(q);
  });

  it('scoreForQuality rises with quality and stays on the SSIMULACRA2 scale', () => {
    let previous = Number.NEGATIVE_INFINITY;
    for (let q = 1; q <= 100; q++) {
      const s = scoreForQuality(q);
      expect(s).toBeGreaterThan(previous);
      expect(s).toBeLessThanOrEqual(100);
      previous = s;
    }
    // The default names "very high" quality on the metric's published scale (70 high, 90 lossless).
    const atDefault = scoreForQuality(DEFAULT_SCALE_QUALITY);
    expect(atDefault).toBeGreaterThan(70);
    expect(atDefault).toBeLessThan(90);
  });

  it('gives JPEG, WebP and AVIF the same score at the default quality on photos', async () => {
    const photos = await loadPhotos();
    const scores: Record<string, number> = {};
    for (const format of LOSSY) scores[format] = await meanScore(photos, format, DEFAULT_SCALE_QUALITY);
    const values = Object.values(scores);
    const spread = Math.max(...values) - Math.min(...values);
    expect(
      spread,
      `mean SSIMULACRA2 at Q${DEFAULT_SCALE_QUALITY}: ${JSON.stringify(scores)}`,
    ).toBeLessThanOrEqual(2 * TOLERANCE);
    for (const format of LOSSY) {
      expect(
        Math.abs(scores[format]! - scores.jpeg!),
        `${format} vs jpeg: ${JSON.stringify(scores)}`,
      ).toBeLessThanOrEqual(TOLERANCE);
    }
  }, 30_000);

  it('orders qualities the same way in every format: higher Q, higher score', async () => {
    const photos = (await loadPhotos()).slice(0, 1);
    for (const format of ['webp', 'avif'] as const) {
      const low = await meanScore(photos, format, 50);
      const high = await meanScore(photos, format, 90);
      expect(high, `${format}: Q50 ${low.toFixed(1)}, Q90 ${high.toFixed(1)}`).toBeGreaterThan(low + 5);
    }
  }, 30_000);
});
