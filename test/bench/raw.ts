import { applyEncoder, DEFAULT_LIMITS, openSource } from '@compresso/engine';
import type { OutputFormat } from '@compresso/schema';
import sharp, { type Sharp } from 'sharp';
import type { CorpusImage } from './corpus.ts';

/**
 * What the engine lays transparent pixels over when writing JPEG (optimize.ts JPEG_BACKGROUND, not
 * exported from the package): without it libvips keeps the stored colour, usually black.
 */
export const JPEG_BACKGROUND = '#ffffff';

/**
 * The engine's work done with sharp alone: the same decode options, orientation, resize and encoder
 * options (applyEncoder is the engine's own single place where encoder options are chosen), without
 * validation, limits checks, header probe, semaphore or result bookkeeping. Engine ÷ raw is then the
 * engine's own overhead.
 */
async function pipelineFor(image: CorpusImage, maxDimension: number): Promise<Sharp> {
  let p: Sharp;
  if (image.heic) {
    // sharp cannot decode HEVC at all; both sides pay for the same WebAssembly decode, so the
    // engine's decoder is reused here and the ratio still isolates the engine's overhead.
    const source = await openSource(image.bytes, DEFAULT_LIMITS);
    p = source.pipeline({ firstFrameOnly: true });
  } else {
    p = sharp(image.bytes, {
      limitInputPixels: DEFAULT_LIMITS.maxPixels,
      failOn: 'warning',
      sequentialRead: true,
    });
  }
  return p
    .autoOrient()
    .resize({ width: maxDimension, height: maxDimension, fit: 'inside', withoutEnlargement: true });
}

export async function rawEncode(
  image: CorpusImage,
  format: OutputFormat,
  quality: number,
  maxDimension: number,
): Promise<Buffer> {
  if (format === 'png') {
    // Palette and lossless, the smaller kept. The engine also scores a smaller palette against its
    // quality bar and may fall back to lossless: that metric check is engine work, which the
    // engine ÷ raw ratio for PNG therefore includes.
    const [palette, lossless] = await Promise.all([
      pipelineFor(image, maxDimension).then((p) => applyEncoder(p, { format, quality }).toBuffer()),
      quality >= 100
        ? undefined
        : pipelineFor(image, maxDimension).then((p) =>
            applyEncoder(p, { format, quality, lossless: true }).toBuffer(),
          ),
    ]);
    return lossless && lossless.length < palette.length ? lossless : palette;
  }
  let p = await pipelineFor(image, maxDimension);
  if (format === 'jpeg' && image.hasAlpha) p = p.flatten({ background: JPEG_BACKGROUND });
  return applyEncoder(p, { format, quality }).toBuffer();
}
