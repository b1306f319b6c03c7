import { prepare, preparedLive, releasePrepared, type SimdReference, ssimulacra2 } from './simd.ts';
import { AUTO_ROW_SAMPLING, type PreparedReference, type RgbImage } from './ssimulacra2.ts';

export interface ScoreTask {
  /** Same id, same reference pixels: lets the thread reuse the prepared reference. */
  referenceId: number;
  reference: RgbImage;
  /** Absent: only prepare the reference (and keep it), so a later score finds it ready. */
  distorted?: RgbImage;
  /** Score with AUTO_ROW_SAMPLING (an estimate, see ssimulacra2.ts RowSampling). */
  sampled?: boolean;
}

/**
 * Prepared references this thread keeps, most recently used last. A search scores 2–7 candidates
 * against one reference in a row, and a transparent image has two references (one per background,
 * compare.ts). Each holds ~35 float planes' worth (≈ 120 MB at 2048 × 1280). In WebAssembly
 * (simd.ts) the planes live in the module's memory, which grows to the thread's largest need and is
 * handed back only when the thread exits (after IDLE_TIMEOUT_MS idle, index.ts): SIMD_MAX_PIXELS
 * bounds that.
 *
 * The thread keeps KEEP_MIN references of any size (two searches of opaque images interleaved, as
 * always) and up to KEEP_MAX while their pixels together stay within KEEP_PIXELS. Until 2026-11-28
 * it kept two whatever their size: two transparent images searched side by side (four references)
 * evicted each other on every score, so each score prepared its reference again (two 256-px icons
 * into WebP: 18 preparations for their 16 scores, where 4 would do). More than two are kept only
 * while together they hold no more pixels than one 2048 × 2048 reference (four of 1024 × 1024): a
 * thread keeps a finished search's references until they are pushed out, and its memory never
 * shrinks, so a larger bound would keep a third 2048-px reference (~130 MB) after every run of large
 * autos. With this one, large images are kept exactly as before (two), and what the smaller ones
 * keep is less than two large references already take.
 */
export const KEEP_MIN = 2;
export const KEEP_MAX = 4;
export const KEEP_PIXELS = 2048 * 2048;
const prepared = new Map<string, PreparedReference | SimdReference>();
let preparations = 0;

/** What this thread holds and has done (tests): kept references, and how many were prepared. */
export function cacheStats(): { kept: number; keptPixels: number; preparations: number } {
  return { kept: prepared.size, keptPixels: keptPixels(), preparations };
}

function keptPixels(): number {
  let pixels = 0;
  for (const ref of prepared.values()) pixels += ref.width * ref.height;
  return pixels;
}

/**
 * Piscina entry: one SSIMULACRA2 score, computed off the main thread — in WebAssembly SIMD
 * (simd.ts) up to SIMD_MAX_PIXELS, by the TypeScript implementation above that.
 */
export default function score(task: ScoreTask): number {
  const key = `${task.referenceId}${task.sampled ? ':sampled' : ''}`;
  let ref = prepared.get(key);
  if (ref) prepared.delete(key);
  // A failure in the WebAssembly module drops it with every reference it held: those are prepared again.
  if (!ref || !preparedLive(ref)) {
    ref = prepare(task.reference, task.sampled ? AUTO_ROW_SAMPLING : undefined);
    preparations++;
  }
  prepared.set(key, ref);
  while (prepared.size > KEEP_MIN && (prepared.size > KEEP_MAX || keptPixels() > KEEP_PIXELS)) {
    const [oldest, evicted] = prepared.entries().next().value!;
    prepared.delete(oldest);
    releasePrepared(evicted);
  }
  if (!task.distorted) return Number.NaN;
  return ssimulacra2(ref, task.distorted);
}
