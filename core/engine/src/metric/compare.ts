import type { OutputFormat } from '@compresso/schema';
import type { Sharp } from 'sharp';
import {
  ALPHA_BACKGROUNDS,
  decodeToRgbs,
  prepareAsync,
  type RgbImage,
  type ScoreOptions,
  type SharedScratch,
  scoreAsync,
} from './index.ts';

type Rgb = { r: number; g: number; b: number };

export interface Reference {
  background: Rgb;
  image: RgbImage;
}

/**
 * What transparent pixels are judged over. Opaque: nothing shows through, any background will do.
 * Transparent, into a format with alpha: dark and light grey, the worse score counts (as the
 * reference tool does). Into JPEG: the engine flattens onto white (optimize.ts JPEG_BACKGROUND), so
 * the reference is judged on white too — the metric then measures compression, not the lost
 * transparency.
 */
export function backgroundsFor(hasAlpha: boolean, format: OutputFormat): Rgb[] {
  if (!hasAlpha) return [{ r: 128, g: 128, b: 128 }];
  if (format === 'jpeg') return [{ r: 255, g: 255, b: 255 }];
  return ALPHA_BACKGROUNDS.map((b) => ({ ...b }));
}

/** The reference decoded once and laid over each background; `pipeline` gives the first-frame pipeline. */
export async function decodeReferences(pipeline: () => Sharp, backgrounds: Rgb[]): Promise<Reference[]> {
  const images = await decodeToRgbs(pipeline(), backgrounds);
  return backgrounds.map((background, i) => ({ background, image: images[i]! }));
}

/**
 * SSIMULACRA2 of encoded bytes against the reference(s), in the metric worker pool: the worst one.
 * With `scratch`, the candidate's pixels go into its buffers and are handed back once scored (a
 * search scoring candidate after candidate reuses the same memory).
 */
export async function scoreEncoded(
  references: Reference[],
  data: Uint8Array,
  options: ScoreOptions = {},
  scratch?: SharedScratch,
): Promise<number> {
  const candidates = await decodeToRgbs(
    data,
    references.map((r) => r.background),
    scratch,
  );
  // Where neither side shows its background (no transparent pixel), every background gives the
  // same pair: it is scored once.
  const pairs = references
    .map(({ image }, i) => ({ reference: image, candidate: candidates[i]! }))
    .filter(
      (pair, i, all) =>
        all.findIndex((p) => p.reference === pair.reference && p.candidate === pair.candidate) === i,
    );
  const scores = await Promise.all(
    pairs.map(({ reference, candidate }) => scoreAsync(reference, candidate, options)),
  );
  scratch?.give(candidates);
  return Math.min(...scores);
}

/** Start the reference side of the metric for every background (see `prepareAsync`). */
export function prepareReferences(references: Reference[], options: ScoreOptions = {}): Promise<void> {
  const distinct = [...new Set(references.map((r) => r.image))];
  return Promise.all(distinct.map((image) => prepareAsync(image, options))).then(() => undefined);
}
