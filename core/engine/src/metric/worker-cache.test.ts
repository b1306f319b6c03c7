import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { corpus } from '../test-support/corpus.ts';
import { decodeToRgbs, type RgbImage } from './index.ts';
import { ssimulacra2 } from './simd.ts';
import score, { cacheStats, KEEP_MAX, KEEP_MIN, KEEP_PIXELS } from './worker.ts';

/**
 * The metric thread's cache of prepared references (worker.ts), exercised in this thread: the
 * worker's entry is a plain function, and the cache is module state, as it is in a metric thread.
 */

/** A transparent icon over the two backgrounds the engine judges transparency on, and a WebP of it. */
async function transparentPair(name: string): Promise<{ references: RgbImage[]; candidates: RgbImage[] }> {
  const backgrounds = [
    { r: 26, g: 26, b: 26 },
    { r: 230, g: 230, b: 230 },
  ];
  const source = corpus(name);
  const references = await decodeToRgbs(source, backgrounds);
  const candidates = await decodeToRgbs(await sharp(source).webp({ quality: 60 }).toBuffer(), backgrounds);
  return { references, candidates };
}

describe('metric thread reference cache', () => {
  it('keeps the four references of two transparent images searched side by side', async () => {
    const a = await transparentPair('icon-oxygen-folder-red.png');
    const b = await transparentPair('icon-oxygen-konqueror.png');
    // Two transparent images, two backgrounds each: four distinct references.
    expect(new Set([...a.references, ...b.references]).size).toBe(4);
    const before = cacheStats().preparations;
    // Two searches interleaved, as two auto requests in flight: each scores its pair per candidate.
    let id = 9_000_000;
    const ids = new Map<RgbImage, number>();
    const task = (reference: RgbImage, distorted: RgbImage) => {
      if (!ids.has(reference)) ids.set(reference, id++);
      return { referenceId: ids.get(reference)!, reference, distorted };
    };
    const scores: number[] = [];
    for (let round = 0; round < 3; round++)
      for (const pair of [a, b])
        for (let i = 0; i < 2; i++) scores.push(score(task(pair.references[i]!, pair.candidates[i]!)));
    // Each reference prepared once for 12 scores (with two kept, every score prepared one again).
    expect(cacheStats().preparations - before).toBe(4);
    expect(cacheStats().kept).toBe(4);
    // The cached references score exactly as fresh ones do.
    expect(scores[0]).toBeCloseTo(ssimulacra2(a.references[0]!, a.candidates[0]!), 6);
    expect(scores[3]).toBeCloseTo(ssimulacra2(b.references[1]!, b.candidates[1]!), 6);
  });

  it('keeps more than two only while their pixels fit KEEP_PIXELS, and never fewer than two', () => {
    expect(KEEP_MIN).toBe(2);
    expect(KEEP_MAX).toBe(4);
    // Large flat references (the cache counts pixels, the content does not matter here): three
    // of 1500 × 1500 fit KEEP_PIXELS, a fourth does not.
    const side = 1500;
    const flat = (value: number): RgbImage => ({
      width: side,
      height: side,
      data: new Uint8Array(side * side * 3).fill(value),
    });
    expect(3 * side * side).toBeLessThanOrEqual(KEEP_PIXELS);
    expect(4 * side * side).toBeGreaterThan(KEEP_PIXELS);
    const references = [10, 80, 150, 220].map(flat);
    references.forEach((reference, i) => {
      score({ referenceId: 9_100_000 + i, reference });
    });
    const stats = cacheStats();
    expect(stats.kept).toBeLessThanOrEqual(KEEP_MAX);
    expect(stats.keptPixels).toBeLessThanOrEqual(KEEP_PIXELS);
    // The newest is kept: scoring against it prepares nothing.
    const before = stats.preparations;
    score({ referenceId: 9_100_003, reference: references[3]!, distorted: references[3]! });
    expect(cacheStats().preparations).toBe(before);
    // The oldest was evicted: it is prepared again.
    score({ referenceId: 9_100_000, reference: references[0]!, distorted: references[0]! });
    expect(cacheStats().preparations).toBe(before + 1);
    // Two references of any size are always kept (two opaque searches interleaved).
    const huge = (value: number): RgbImage => ({
      width: 3000,
      height: 2000,
      data: new Uint8Array(3000 * 2000 * 3).fill(value),
    });
    const [h1, h2] = [huge(40), huge(200)];
    score({ referenceId: 9_200_000, reference: h1! });
    score({ referenceId: 9_200_001, reference: h2! });
    expect(cacheStats().kept).toBe(2);
    const again = cacheStats().preparations;
    score({ referenceId: 9_200_000, reference: h1!, distorted: h1! });
    score({ referenceId: 9_200_001, reference: h2!, distorted: h2! });
    expect(cacheStats().preparations).toBe(again);
  });
});
