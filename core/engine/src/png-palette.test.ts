import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine } from './engine.ts';
import { closeMetricPool, decodeToRgb, ssimulacra2 } from './metric/index.ts';
import { scoreForQuality } from './quality.ts';
import { corpus } from './test-support/corpus.ts';

const engine = createEngine();
// A 451×300 photo stored as PNG: its palette is always smaller than lossless, so the score decides.
const photo = corpus('photo-skimage-chelsea.png');

afterAll(() => closeMetricPool());

describe('PNG: palette only where it keeps the requested quality', () => {
  it('keeps the palette at a middling quality, and the palette clears the bar', async () => {
    const { data, info } = await engine.optimize(photo, { quality: 60 });
    expect((await sharp(data).metadata()).isPalette).toBe(true);
    const score = ssimulacra2(await decodeToRgb(photo), await decodeToRgb(data));
    expect(score).toBeGreaterThanOrEqual(scoreForQuality(60));
    // The score measured for the decision is the one reported.
    expect(info.score).toBeCloseTo(score, 1);
  });

  it('falls back to lossless when the palette would look worse than the quality asked for', async () => {
    const { data, info } = await engine.optimize(photo, { quality: 90 });
    const meta = await sharp(data).metadata();
    expect(meta.isPalette).toBe(false);
    expect(info.score).toBe(100);
    // Lossless: the very same pixels.
    const [a, b] = await Promise.all([sharp(photo).raw().toBuffer(), sharp(data).raw().toBuffer()]);
    expect(Buffer.compare(a, b)).toBe(0);
  });

  it('keeps a palette for a flat graphic even at a high quality', async () => {
    const { data } = await engine.optimize(corpus('graphic-skimage-logo.png'), { quality: 90 });
    expect((await sharp(data).metadata()).isPalette).toBe(true);
  });
});
