import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { corpus } from '../test-support/corpus.ts';
import { ALPHA_BACKGROUNDS, decodeToRgbs, type RgbImage } from './index.ts';
import { ssimulacra2 } from './simd.ts';
import score, {
  COLLECT_AFTER_BYTES,
  cacheStats,
  collectionCount,
  KEEP_MAX,
  KEEP_MIN,
  KEEP_PIXELS,
  resetPeakLive,
} from './worker.ts';

/**
 * The metric thread's cache of prepared references (worker.ts), exercised in this thread: the
 * worker's entry is a plain function, and the cache is module state, as it is in a metric thread.
 */

/** A transparent icon over the two backgrounds the engine judges transparency on, and a WebP of it. */
async function transparentPair(name: string): Promise<{ references: RgbImage[]; candidates: RgbImage[] }> {
  const source = corpus(name);
  const references = await decodeToRgbs(source, ALPHA_BACKGROUNDS);
  const candidates = await decodeToRgbs(
    await sharp(source).webp({ quality: 60 }).toBuffer(),
    ALPHA_BACKGROUNDS,
  );
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
    // Flat references (the cache counts pixels, the content does not matter here).
    const rect = (width: number, height: number, value: number): RgbImage => ({
      width,
      height,
      data: new Uint8Array(width * height * 3).fill(value),
    });
    const flat = (side: number, value: number) => rect(side, side, value);
    let id = 9_100_000;
    const prepareAll = (references: RgbImage[]) =>
      references.map((reference) => {
        const referenceId = id++;
        score({ referenceId, reference });
        return { referenceId, reference };
      });
    const scoreAgainst = ({ referenceId, reference }: { referenceId: number; reference: RgbImage }) => {
      const before = cacheStats().preparations;
      score({ referenceId, reference, distorted: reference });
      return cacheStats().preparations - before;
    };
    // Four of 1000 × 1000 fit KEEP_PIXELS: all four are kept; a fifth pushes the oldest out.
    expect(4 * 1000 * 1000).toBeLessThanOrEqual(KEEP_PIXELS);
    const small = prepareAll([10, 60, 110, 160, 210].map((v) => flat(1000, v)));
    expect(cacheStats().kept).toBe(KEEP_MAX);
    expect(scoreAgainst(small[1]!)).toBe(0);
    expect(scoreAgainst(small[4]!)).toBe(0);
    expect(scoreAgainst(small[0]!)).toBe(1);
    // Three of 1200 × 1200 do not fit: only the last two are kept, as before the cache grew.
    expect(3 * 1200 * 1200).toBeGreaterThan(KEEP_PIXELS);
    const mid = prepareAll([20, 120, 220].map((v) => flat(1200, v)));
    expect(cacheStats().kept).toBe(KEEP_MIN);
    expect(cacheStats().keptPixels).toBe(2 * 1200 * 1200);
    expect(scoreAgainst(mid[2]!)).toBe(0);
    expect(scoreAgainst(mid[1]!)).toBe(0);
    expect(scoreAgainst(mid[0]!)).toBe(1);
    // Two of any size are always kept (two opaque searches interleaved).
    const huge = prepareAll([40, 200].map((v) => rect(3000, 2000, v)));
    expect(cacheStats().kept).toBe(2);
    expect(scoreAgainst(huge[0]!)).toBe(0);
    expect(scoreAgainst(huge[1]!)).toBe(0);
  });

  it('lets the oldest reference go before preparing a large new one, never after', () => {
    let id = 9_200_000;
    const big = (value: number): RgbImage => ({
      width: 2500,
      height: 1000,
      data: new Uint8Array(2500 * 1000 * 3).fill(value),
    });
    // Four large references in turn, as two transparent searches side by side; two of them already
    // hold more than KEEP_PIXELS, so only KEEP_MIN are kept.
    expect(2 * 2500 * 1000).toBeGreaterThan(KEEP_PIXELS);
    const references = [30, 90, 150, 210].map((v) => ({ referenceId: id++, reference: big(v) }));
    resetPeakLive();
    for (const task of references) score(task);
    expect(cacheStats().kept).toBe(KEEP_MIN);
    expect(cacheStats().preparations).toBeGreaterThan(0);
    // Prepared after the oldest went: two live at most (prepared first, three were).
    expect(cacheStats().peakLive).toBe(KEEP_MIN);
  });
});

describe('metric thread garbage collection', () => {
  it('collects once the shared pixels sent to it since the last collection reach COLLECT_AFTER_BYTES', () => {
    // About 2 MiB of shared pixels a task (reference and candidate): a collection every 32 tasks.
    const rect = (value: number): RgbImage => ({
      width: 512,
      height: 683,
      data: new Uint8Array(new SharedArrayBuffer(512 * 683 * 3)).fill(value),
    });
    const reference = rect(120);
    const candidate = rect(124);
    const perTask = 2 * reference.data.byteLength;
    const tasks = Math.ceil(COLLECT_AFTER_BYTES / perTask);
    const before = collectionCount();
    // Finish whatever count this thread had towards a collection, then count from zero.
    let id = 9_200_000;
    while (collectionCount() === before) score({ referenceId: id, reference, distorted: candidate });
    const start = collectionCount();
    for (let i = 0; i < tasks - 1; i++) score({ referenceId: id, reference, distorted: candidate });
    expect(collectionCount()).toBe(start);
    score({ referenceId: id++, reference, distorted: candidate });
    expect(collectionCount()).toBe(start + 1);
  });
});
