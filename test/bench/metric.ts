import * as engine from '@compresso/engine';
import sharp, { type Sharp } from 'sharp';

/** 8-bit sRGB, RGB interleaved: what the engine's SSIMULACRA2 takes. */
export interface RgbImage {
  width: number;
  height: number;
  data: Uint8Array;
}

type Score = (reference: RgbImage, distorted: RgbImage) => Promise<number>;

/**
 * The engine's SSIMULACRA2 when the engine exports it. The bench is written against that API and
 * looks it up at run time, so it still runs (without scores) on a tree where the metric has not landed.
 */
function engineScore(): { score?: Score; note: string } {
  const api = engine as unknown as Record<string, unknown>;
  if (typeof api['scoreAsync'] === 'function') {
    const scoreAsync = api['scoreAsync'] as Score;
    return { score: (r, d) => scoreAsync(r, d), note: 'SSIMULACRA2 from @compresso/engine (scoreAsync)' };
  }
  if (typeof api['ssimulacra2'] === 'function') {
    const sync = api['ssimulacra2'] as (r: RgbImage, d: RgbImage) => number;
    return { score: async (r, d) => sync(r, d), note: 'SSIMULACRA2 from @compresso/engine (ssimulacra2)' };
  }
  return { note: '@compresso/engine exports no SSIMULACRA2 yet: scores are left empty' };
}

export const metric = engineScore();

/**
 * Pixels of an encoded image as the metric sees them. Transparent images are laid over white, the
 * way a browser page usually shows them, and the same is done to the reference so both sides match.
 */
export async function decodeRgb(input: Uint8Array | Sharp): Promise<RgbImage> {
  const pipeline = input instanceof Uint8Array ? sharp(input) : input;
  const { data, info } = await pipeline
    .flatten({ background: '#ffffff' })
    .toColourspace('srgb')
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  if (info.channels !== 3) throw new Error(`expected 3 channels after decoding, got ${info.channels}`);
  return {
    width: info.width,
    height: info.height,
    data: new Uint8Array(data.buffer, data.byteOffset, data.length),
  };
}

export async function scoreOutput(reference: RgbImage, output: Uint8Array): Promise<number | undefined> {
  if (!metric.score) return undefined;
  const distorted = await decodeRgb(output);
  if (distorted.width !== reference.width || distorted.height !== reference.height) {
    throw new Error(
      `output is ${distorted.width}×${distorted.height}, reference ${reference.width}×${reference.height}`,
    );
  }
  return metric.score(reference, distorted);
}
