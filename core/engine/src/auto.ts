import type { CompressOptions, OutputFormat } from '@compresso/schema';
import { backgroundsFor, decodeReferences, scoreEncoded } from './metric/compare.ts';
import { type AutoEncoder, prepare } from './optimize.ts';
import { DEFAULT_SCALE_QUALITY } from './quality.ts';

type Encoded = Awaited<ReturnType<Parameters<AutoEncoder>[3]>>;

/**
 * SSIMULACRA2 each format aims for under quality "auto": the mean score the fixed default (Q=80 on
 * Compresso's scale) reaches on the corpus photos in that format (test/bench/calibrate.ts). Every
 * image is brought to the target instead of every image getting the same encoder setting: easy
 * images stop earlier (fewer bytes), hard ones get more, and the mean stays where the default is.
 */
export const AUTO_TARGET: Readonly<Record<'jpeg' | 'webp' | 'avif', number>> = {
  jpeg: 77,
  webp: 77,
  avif: 77,
};

/**
 * The floor: no "auto" output scores below this. It is the target itself — the search only accepts
 * candidates at or above it — except when a format cannot reach it even at AUTO_MAX_Q, where the
 * best candidate is returned (its score in `info.score` says so).
 */
export const AUTO_FLOOR = Math.min(...Object.values(AUTO_TARGET));

/** The search range on Compresso's scale. Below 30 no photo reaches the target in any format. */
export const AUTO_MIN_Q = 30;
export const AUTO_MAX_Q = 98;
/** Stop bisecting when the bracket is this narrow (one or two quality steps cost few bytes). */
const AUTO_RESOLUTION = 2;

/**
 * PNG under "auto": no search. The palette-or-lossless decision in the encoder already keeps a
 * palette only when it scores at the threshold for the requested quality (see optimize.ts), so the
 * default quality is used and that score is reported. GIF: fixed, its palette quality is not what
 * limits it.
 */
const FIXED_FORMATS = new Set<OutputFormat>(['png', 'gif']);

/**
 * Quality "auto": bisection over Compresso quality for the smallest output whose SSIMULACRA2
 * against the resized source stays at the format's target. The reference is decoded and resized
 * once; each step is one encode and one score (5–6 steps over 30–98 at a resolution of 2).
 */
export function createAutoEncoder(
  targets: Partial<Record<'jpeg' | 'webp' | 'avif', number>> = {},
): AutoEncoder {
  const target = { ...AUTO_TARGET, ...targets };
  return async (source, options: CompressOptions, format: OutputFormat, encodeAtQuality) => {
    if (FIXED_FORMATS.has(format)) {
      const encoded = await encodeAtQuality(DEFAULT_SCALE_QUALITY);
      return { encoded, ...(encoded.score !== undefined ? { score: encoded.score } : {}) };
    }
    const goal = target[format as 'jpeg' | 'webp' | 'avif'];
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
    // Smallest q in [lo, hi] that reaches the goal; the default is probed first because most photos
    // land near it, which halves the bracket at once.
    let lo = AUTO_MIN_Q;
    let hi = AUTO_MAX_Q;
    const first = await at(DEFAULT_SCALE_QUALITY);
    if (first.score >= goal) hi = DEFAULT_SCALE_QUALITY;
    else lo = DEFAULT_SCALE_QUALITY + 1;
    while (hi - lo > AUTO_RESOLUTION) {
      const mid = Math.floor((lo + hi) / 2);
      if ((await at(mid)).score >= goal) hi = mid;
      else lo = mid + 1;
    }
    const passing = [...tried.values()].filter((t) => t.score >= goal);
    if (passing.length === 0) {
      // Not even the top of the range reaches the goal: the best this format can do.
      const top = await at(AUTO_MAX_Q);
      return { encoded: top.encoded, score: top.score };
    }
    // Bytes are not strictly monotonic in quality; of everything that passed, keep the smallest.
    const best = passing.reduce((a, b) => (b.encoded.data.length < a.encoded.data.length ? b : a));
    return { encoded: best.encoded, score: best.score };
  };
}
