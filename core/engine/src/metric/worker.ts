import { type RgbImage, ssimulacra2 } from './ssimulacra2.ts';

export interface ScoreTask {
  reference: RgbImage;
  distorted: RgbImage;
}

/** Piscina entry: one SSIMULACRA2 score, computed off the main thread. */
export default function score(task: ScoreTask): number {
  return ssimulacra2(task.reference, task.distorted);
}
