import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { KEEP_MAX, KEEP_MIN, KEEP_PIXELS } from './keep.ts';
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

/** How many prepared references this thread keeps (keep.ts). */
export { KEEP_MAX, KEEP_MIN, KEEP_PIXELS } from './keep.ts';

const prepared = new Map<string, PreparedReference | SimdReference>();
let preparations = 0;
let peakLive = 0;

/**
 * What this thread holds and has done (tests): kept references, how many were prepared, and the
 * most that were live at once (those kept and the one being prepared).
 */
export function cacheStats(): { kept: number; keptPixels: number; preparations: number; peakLive: number } {
  return { kept: prepared.size, keptPixels: keptPixels(), preparations, peakLive };
}

function keptPixels(): number {
  let pixels = 0;
  for (const ref of prepared.values()) pixels += ref.width * ref.height;
  return pixels;
}

/**
 * The pixels of every task arrive in shared memory (index.ts `sharedBytes`), and this thread's
 * handles on them keep that memory alive until this thread collects its garbage. Its own heap is a
 * few megabytes, so V8 saw no reason to: the memory of every reference and candidate it had been
 * sent stayed resident long after the search that made it ended. Measured (2026-11-28), a process
 * running a transparent 2048-px graphic and a 2048-px photo through WebP auto, one after the other,
 * grew by ~72 MiB a round (447 → 1 001 MiB RSS over 10 rounds, 1.2 GiB with the main thread's
 * garbage collected after every round), and the soak with large autos in its mix peaked at
 * 1.4–1.5 GiB at 256 and 512 MiB alike (results/soak-large-auto-*.md). So the thread collects once
 * the shared pixels it has been sent since its last collection add up to COLLECT_AFTER_BYTES (a full
 * collection of its small heap: 8–14 ms measured). `gc` is reached as V8 offers it to a new
 * context once --expose-gc is set (a V8 flag, process-wide; the main thread's global is unchanged).
 */
export const COLLECT_AFTER_BYTES = 64 * 1024 * 1024;
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;
let sentSinceCollect = 0;
let collections = 0;

function sharedBytesOf(image: RgbImage | undefined): number {
  return image ? image.data.byteLength + (image.rgba?.byteLength ?? 0) : 0;
}

/** How often this thread has collected its garbage (tests). */
export function collectionCount(): number {
  return collections;
}

/** Start counting `peakLive` afresh (tests). */
export function resetPeakLive(): void {
  peakLive = 0;
}

/**
 * Let the oldest references go until one of `pixels` can join them within the keep rule (keep.ts),
 * before it is prepared: until 2026-11-28 (eleventh pass) it was prepared first, so a thread
 * replacing a reference held one more than it keeps while preparing it (memory-estimate.ts counts
 * what a metric thread can hold).
 */
function makeRoomFor(pixels: number): void {
  while (
    prepared.size + 1 > KEEP_MIN &&
    (prepared.size + 1 > KEEP_MAX || keptPixels() + pixels > KEEP_PIXELS)
  ) {
    const [oldest, evicted] = prepared.entries().next().value!;
    prepared.delete(oldest);
    releasePrepared(evicted);
  }
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
    makeRoomFor(task.reference.width * task.reference.height);
    peakLive = Math.max(peakLive, prepared.size + 1);
    ref = prepare(task.reference, task.sampled ? AUTO_ROW_SAMPLING : undefined);
    preparations++;
  }
  prepared.set(key, ref);
  const result = task.distorted ? ssimulacra2(ref, task.distorted) : Number.NaN;
  sentSinceCollect += sharedBytesOf(task.reference) + sharedBytesOf(task.distorted);
  if (sentSinceCollect >= COLLECT_AFTER_BYTES) {
    sentSinceCollect = 0;
    collections++;
    collect();
  }
  return result;
}
