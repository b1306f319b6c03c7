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
 * Prepared references this thread keeps. A search scores 5–7 candidates against one reference in a
 * row; two entries cover two searches interleaved on one thread. Each holds ~35 float planes'
 * worth (≈ 120 MB at 2048 × 1280), so no more. In WebAssembly (simd.ts) the planes live in the
 * module's memory, which grows to the thread's largest need and is handed back only when the thread
 * exits (after IDLE_TIMEOUT_MS idle, index.ts): SIMD_MAX_PIXELS bounds that.
 */
const KEEP = 2;
const prepared = new Map<string, PreparedReference | SimdReference>();

/**
 * Piscina entry: one SSIMULACRA2 score, computed off the main thread — in WebAssembly SIMD
 * (simd.ts) up to SIMD_MAX_PIXELS, by the TypeScript implementation above that.
 */
export default function score(task: ScoreTask): number {
  const key = `${task.referenceId}${task.sampled ? ':sampled' : ''}`;
  let ref = prepared.get(key);
  if (ref) prepared.delete(key);
  // A failure in the WebAssembly module drops it with every reference it held: those are prepared again.
  if (!ref || !preparedLive(ref)) ref = prepare(task.reference, task.sampled ? AUTO_ROW_SAMPLING : undefined);
  prepared.set(key, ref);
  while (prepared.size > KEEP) {
    const [oldest, evicted] = prepared.entries().next().value!;
    prepared.delete(oldest);
    releasePrepared(evicted);
  }
  if (!task.distorted) return Number.NaN;
  return ssimulacra2(ref, task.distorted);
}
