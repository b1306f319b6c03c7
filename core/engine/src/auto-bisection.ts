import type { CompressOptions, OutputFormat } from '@compresso/schema';
import { AUTO_FIXED_FORMATS, AUTO_FLOOR, AUTO_MAX_Q, AUTO_MIN_Q, AUTO_SETTINGS } from './auto.ts';
import { backgroundsFor, decodeReferences, scoreEncoded } from './metric/compare.ts';
import { type AutoEncoder, prepare } from './optimize.ts';
import { DEFAULT_SCALE_QUALITY } from './quality.ts';

type Encoded = Awaited<ReturnType<Parameters<AutoEncoder>[3]>>;

/**
 * The exact bisection quality "auto" used before issue 11 (kept for the benchmark, which measures
 * the predictor of auto.ts against it on the same images in one run: `createEngine({ auto:
 * createBisectionAutoEncoder() })`). Quality only: no chroma or lossless choice, so it cannot keep
 * the floor on screenshots.
 *
 * Bisection over Compresso quality for the smallest output whose SSIMULACRA2
 * against the resized source reaches the format's target (AUTO_SETTINGS), capped, with a floor
 * (AUTO_FLOOR). The reference is decoded and resized once (and prepared once in the metric worker);
 * each step is one encode and one score: 5–7 steps, a few more when the floor search runs.
 */
export function createBisectionAutoEncoder(
  settings: Partial<Record<'jpeg' | 'webp' | 'avif', { target: number; maxQ: number }>> = {},
): AutoEncoder {
  const all = { ...AUTO_SETTINGS, ...settings };
  return async (source, options: CompressOptions, format: OutputFormat, encodeAtQuality) => {
    if (AUTO_FIXED_FORMATS.has(format)) {
      const encoded = await encodeAtQuality(DEFAULT_SCALE_QUALITY);
      return { encoded, ...(encoded.score !== undefined ? { score: encoded.score } : {}) };
    }
    const { target, maxQ } = all[format as 'jpeg' | 'webp' | 'avif'];
    // 'jpeg' never keeps animation frames, so this is the first frame, oriented and resized exactly
    // as the output will be.
    const references = await decodeReferences(
      () => prepare(source, { ...options, strip_exif: true }, 'jpeg'),
      backgroundsFor(source.hasAlpha, format),
    );
    const tried = new Map<number, { encoded: Encoded; score: number }>();
    const at = async (q: number) => {
      let hit = tried.get(q);
      if (!hit) {
        const encoded = await encodeAtQuality(q);
        hit = { encoded, score: await scoreEncoded(references, encoded.data) };
        tried.set(q, hit);
      }
      return hit;
    };
    /** Smallest q in [lo, hi] (to AUTO_RESOLUTION) whose score reaches `goal`, `first` probed first. */
    const search = async (lo: number, hi: number, goal: number, first: number) => {
      const probe = await at(first);
      if (probe.score >= goal) hi = first;
      else lo = first + 1;
      while (hi > lo) {
        const mid = Math.floor((lo + hi) / 2);
        if ((await at(mid)).score >= goal) hi = mid;
        else lo = mid + 1;
      }
      if (!tried.has(hi)) await at(hi);
    };
    const smallestReaching = (goal: number) => {
      const passing = [...tried.values()].filter((t) => t.score >= goal);
      // Bytes are not strictly monotonic in quality; of everything that passed, keep the smallest.
      return passing.length === 0
        ? undefined
        : passing.reduce((a, b) => (b.encoded.data.length < a.encoded.data.length ? b : a));
    };
    // Most photos land near the default, so it is probed first: that halves the bracket at once.
    await search(AUTO_MIN_Q, maxQ, target, Math.min(DEFAULT_SCALE_QUALITY, maxQ));
    const found = smallestReaching(target);
    if (found) return { encoded: found.encoded, score: found.score, steps: tried.size };
    // The cap did not reach the target: the cap's own output, if it clears the floor.
    const cap = tried.get(maxQ);
    if (cap && cap.score >= AUTO_FLOOR) return { encoded: cap.encoded, score: cap.score, steps: tried.size };
    // Even the cap is under the floor: look above it for the floor.
    await search(maxQ, AUTO_MAX_Q, AUTO_FLOOR, Math.min(AUTO_MAX_Q, maxQ + 4));
    const floor = smallestReaching(AUTO_FLOOR);
    if (floor) return { encoded: floor.encoded, score: floor.score, steps: tried.size };
    const best = [...tried.values()].reduce((a, b) => (b.score > a.score ? b : a));
    return { encoded: best.encoded, score: best.score, steps: tried.size };
  };
}
