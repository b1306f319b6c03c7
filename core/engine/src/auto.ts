import type { CompressOptions, OutputFormat } from '@compresso/schema';
import { backgroundsFor, decodeReferences, scoreEncoded } from './metric/compare.ts';
import { type AutoEncoder, prepare } from './optimize.ts';
import { DEFAULT_SCALE_QUALITY } from './quality.ts';

type Encoded = Awaited<ReturnType<Parameters<AutoEncoder>[3]>>;

/**
 * What quality "auto" aims for, per format: the smallest output whose SSIMULACRA2 reaches `target`,
 * searched over Compresso quality up to `maxQ`.
 *
 * Chosen from the simulation in test/bench/calibrate.ts (auto vs fixed on the 14 calibration photos
 * at 2048 px, 2026-11-22; test/bench/results/calibration.json → autoSimulation). The target sits at
 * the fixed default's mean (Q=80 gives 75.9 in every format) and the cap keeps hard photos (a Hubble
 * deep field, a noisy rocket launch) from buying their last points at 2–3× the bytes: a per-image
 * target spends bytes where they are dearest, so without the cap auto is *larger* than the fixed
 * default at an equal mean score. Measured through the engine (calibrate.ts --part auto-real, same
 * photos): total bytes vs the fixed default JPEG 0.924 at mean 75.7 (fixed 75.9), WebP 1.002 at 74.8
 * (75.7), AVIF 0.981 at 75.5 (75.5); worst photo 70.2 / 70.8 / 73.6 instead of 61.5 / 67.8 / 66.8.
 * Not the 25 % saving hoped for: per-image quality choice cannot buy that at an equal mean on photos
 * (engine README.quality.md explains why).
 */
export const AUTO_SETTINGS: Readonly<Record<'jpeg' | 'webp' | 'avif', { target: number; maxQ: number }>> = {
  jpeg: { target: 76, maxQ: 90 },
  webp: { target: 75, maxQ: 85 },
  avif: { target: 75, maxQ: 85 },
};

/** Back-compat view of the targets alone. */
export const AUTO_TARGET: Readonly<Record<'jpeg' | 'webp' | 'avif', number>> = {
  jpeg: AUTO_SETTINGS.jpeg.target,
  webp: AUTO_SETTINGS.webp.target,
  avif: AUTO_SETTINGS.avif.target,
};

/**
 * The floor: no "auto" output scores below 70 ("high quality" on the published scale). When the
 * capped search cannot reach the target and the cap scores under the floor, the search goes on above
 * the cap, up to AUTO_MAX_Q, for the smallest output at the floor. Only an image no quality of the
 * format can bring to 70 ends below it (then the best candidate is returned, its score in
 * `info.score` says so).
 */
export const AUTO_FLOOR = 70;

/** The search range on Compresso's scale. */
export const AUTO_MIN_Q = 30;
export const AUTO_MAX_Q = 98;
/**
 * Bisect to the exact Q (bracket width 0). Encoders have steps: mozjpeg on a 2048-px photo went from
 * 75.9 at Q71 to 76.3 at Q72 and 79.8 at Q74 — a bracket of 2 returned Q74 for a target of 76, 7 %
 * more bytes than Q72, for one encode saved.
 */
const AUTO_RESOLUTION = 0;

/**
 * PNG under "auto": no search. The palette-or-lossless decision in the encoder already keeps a
 * palette only when it scores at the threshold for the requested quality (see optimize.ts), so the
 * default quality is used and that score is reported. GIF: fixed, its palette quality is not what
 * limits it.
 */
const FIXED_FORMATS = new Set<OutputFormat>(['png', 'gif']);

/**
 * Quality "auto": bisection over Compresso quality for the smallest output whose SSIMULACRA2
 * against the resized source reaches the format's target (AUTO_SETTINGS), capped, with a floor
 * (AUTO_FLOOR). The reference is decoded and resized once (and prepared once in the metric worker);
 * each step is one encode and one score: 5–7 steps, a few more when the floor search runs.
 */
export function createAutoEncoder(
  settings: Partial<Record<'jpeg' | 'webp' | 'avif', { target: number; maxQ: number }>> = {},
): AutoEncoder {
  const all = { ...AUTO_SETTINGS, ...settings };
  return async (source, options: CompressOptions, format: OutputFormat, encodeAtQuality) => {
    if (FIXED_FORMATS.has(format)) {
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
      while (hi - lo > AUTO_RESOLUTION) {
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
    if (found) return { encoded: found.encoded, score: found.score };
    // The cap did not reach the target: the cap's own output, if it clears the floor.
    const cap = tried.get(maxQ);
    if (cap && cap.score >= AUTO_FLOOR) return { encoded: cap.encoded, score: cap.score };
    // Even the cap is under the floor: look above it for the floor.
    await search(maxQ, AUTO_MAX_Q, AUTO_FLOOR, Math.min(AUTO_MAX_Q, maxQ + 4));
    const floor = smallestReaching(AUTO_FLOOR);
    if (floor) return { encoded: floor.encoded, score: floor.score };
    const best = [...tried.values()].reduce((a, b) => (b.score > a.score ? b : a));
    return { encoded: best.encoded, score: best.score };
  };
}
