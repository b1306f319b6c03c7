import { ALPHA_BACKGROUNDS, decodeToRgb, type RgbImage, scoreAsync } from '@compresso/engine';
import type { Sharp } from 'sharp';

/**
 * The reference for one image: the source after the engine's orientation and resize, decoded once per
 * background. An opaque image needs one; a transparent one is judged over each of the engine's
 * ALPHA_BACKGROUNDS (dark and light grey) and the worse score counts, as the engine's own auto
 * search does, so an error hidden by one background is caught by the other.
 */
export interface Reference {
  transparent: boolean;
  views: RgbImage[];
}

export async function referenceFrom(pipeline: () => Sharp, transparent: boolean): Promise<Reference> {
  if (!transparent) return { transparent, views: [await decodeToRgb(pipeline())] };
  const views = await Promise.all(
    ALPHA_BACKGROUNDS.map((background) => decodeToRgb(pipeline(), { background })),
  );
  return { transparent, views };
}

/** SSIMULACRA2 of an encoded output against its reference (the minimum over backgrounds). */
export async function scoreOutput(reference: Reference, output: Uint8Array): Promise<number> {
  const scores = await Promise.all(
    reference.views.map(async (view, i) => {
      const background = reference.transparent ? ALPHA_BACKGROUNDS[i] : undefined;
      const distorted = await decodeToRgb(output, background ? { background } : {});
      if (distorted.width !== view.width || distorted.height !== view.height) {
        throw new Error(
          `output is ${distorted.width}×${distorted.height}, reference ${view.width}×${view.height}`,
        );
      }
      return scoreAsync(view, distorted);
    }),
  );
  return Math.min(...scores);
}
