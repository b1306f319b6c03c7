import { ALPHA_BACKGROUNDS, decodeToRgb, type RgbImage, scoreAsync } from '@compresso/engine';
import type { Sharp } from 'sharp';

type Rgb = { r: number; g: number; b: number };

/**
 * JPEG cannot keep transparency; the engine (and the ImageMagick reference) lays it over white, so a
 * JPEG of a transparent image is judged on white, as the engine's own metric/compare.ts does: the
 * score then measures the compression, not the transparency every JPEG loses.
 */
const WHITE: Rgb = { r: 255, g: 255, b: 255 };

/**
 * The reference for one image: the source after the engine's orientation and resize, decoded once per
 * background. An opaque image needs one; a transparent one is judged over each of the engine's
 * ALPHA_BACKGROUNDS (dark and light grey) and the worse score counts, as the engine's own auto
 * search does, so an error hidden by one background is caught by the other.
 */
export interface Reference {
  views: { background?: Rgb; image: RgbImage }[];
  /** White-backed view, for JPEG outputs of a transparent image. */
  onWhite?: RgbImage;
}

export async function referenceFrom(pipeline: () => Sharp, transparent: boolean): Promise<Reference> {
  if (!transparent) return { views: [{ image: await decodeToRgb(pipeline()) }] };
  const [onWhite, ...views] = await Promise.all(
    [WHITE, ...ALPHA_BACKGROUNDS].map(async (background) => ({
      background,
      image: await decodeToRgb(pipeline(), { background }),
    })),
  );
  return { views, onWhite: onWhite!.image };
}

/** SSIMULACRA2 of an encoded output against its reference (the minimum over backgrounds). */
export async function scoreOutput(reference: Reference, output: Uint8Array, format: string): Promise<number> {
  const views =
    format === 'jpeg' && reference.onWhite
      ? [{ background: WHITE, image: reference.onWhite }]
      : reference.views;
  const scores = await Promise.all(
    views.map(async ({ background, image }) => {
      const distorted = await decodeToRgb(output, background ? { background } : {});
      if (distorted.width !== image.width || distorted.height !== image.height) {
        throw new Error(
          `output is ${distorted.width}×${distorted.height}, reference ${image.width}×${image.height}`,
        );
      }
      return scoreAsync(image, distorted);
    }),
  );
  return Math.min(...scores);
}
