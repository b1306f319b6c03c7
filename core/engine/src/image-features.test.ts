import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { isSynthetic, measureFeatures } from './image-features.ts';
import { corpus } from './test-support/corpus.ts';

const raw = (width: number, height: number, pixel: (x: number, y: number) => [number, number, number]) => {
  const data = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) data.set(pixel(x, y), (y * width + x) * 3);
  return sharp(data, { raw: { width, height, channels: 3 } });
};

describe('image features', () => {
  it('counts colours, flat pairs, luma and colour edges exactly on a known image', async () => {
    // 8×8: left half black, right half red. 112 adjacent pairs, 8 of them across the border: a luma
    // step of 0.299 × 255 = 76.2 (> 32) and a colour step (> 24).
    const f = await measureFeatures(raw(8, 8, (x) => (x < 4 ? [0, 0, 0] : [255, 0, 0])));
    expect(f.colours).toBe(2);
    expect(f.flatShare).toBeCloseTo(104 / 112, 10);
    expect(f.edgeShare).toBeCloseTo(8 / 112, 10);
    expect(f.chromaEdgeShare).toBeCloseTo(8 / 112, 10);
    expect(f.meanGradient).toBeCloseTo((8 * 76.245) / 112, 6);
    // A luma step of exactly 32 is not an edge (the threshold is "more than 32").
    const grey = await measureFeatures(raw(2, 1, (x) => (x === 0 ? [100, 100, 100] : [132, 132, 132])));
    expect(grey.edgeShare).toBe(0);
    expect(grey.chromaEdgeShare).toBe(0);
    const over = await measureFeatures(raw(2, 1, (x) => (x === 0 ? [100, 100, 100] : [133, 133, 133])));
    expect(over.edgeShare).toBe(1);
  });

  it('measures each image afresh though its working memory is reused from call to call', async () => {
    const halves = () => raw(8, 8, (x) => (x < 4 ? [0, 0, 0] : [255, 0, 0]));
    const photo = () => sharp(corpus('photo-mate-Dune.jpg'));
    const photoFirst = await measureFeatures(photo());
    expect(photoFirst.colours).toBeGreaterThan(6_000);
    // The colours a call saw are forgotten: the same two colours count again, after a photo too.
    const first = await measureFeatures(halves());
    const again = await measureFeatures(halves());
    expect(again).toEqual(first);
    expect(again.colours).toBe(2);
    // A larger copy after a smaller one reads none of the smaller one's pixels.
    expect(await measureFeatures(photo())).toEqual(photoFirst);
  });

  it('tells photos from synthetic images on the corpus', async () => {
    for (const name of ['photo-mate-Dune.jpg', 'photo-skimage-chelsea.png'])
      expect(isSynthetic(await measureFeatures(sharp(corpus(name)))), name).toBe(false);
    for (const name of ['screenshot-gimp-assign-5.png', 'graphic-skimage-logo.png', 'chart-mpl-stem3d.png'])
      expect(isSynthetic(await measureFeatures(sharp(corpus(name)))), name).toBe(true);
  });
});
