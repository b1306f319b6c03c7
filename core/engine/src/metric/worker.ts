import { type PreparedReference, prepareReference, type RgbImage, ssimulacra2 } from './ssimulacra2.ts';

export interface ScoreTask {
  /** Same id, same reference pixels: lets the thread reuse the prepared reference. */
  referenceId: number;
  reference: RgbImage;
  /** Absent: only prepare the reference (and keep it), so a later score finds it ready. */
  distorted?: RgbImage;
}

/**
 * Prepared references this thread keeps. A search scores 5–7 candidates against one reference in a
 * row; two entries cover two searches interleaved on one thread. Each holds ~35 float planes'
 * worth (≈ 120 MB at 2048 × 1280), so no more.
 */
const KEEP = 2;
const prepared = new Map<number, PreparedReference>();

/** Piscina entry: one SSIMULACRA2 score, computed off the main thread. */
export default function score(task: ScoreTask): number {
  let ref = prepared.get(task.referenceId);
  if (ref) prepared.delete(task.referenceId);
  else ref = prepareReference(task.reference);
  prepared.set(task.referenceId, ref);
  while (prepared.size > KEEP) prepared.delete(prepared.keys().next().value!);
  return task.distorted ? ssimulacra2(ref, task.distorted) : Number.NaN;
}
