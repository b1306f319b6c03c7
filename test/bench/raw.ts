import { applyEncoder, DEFAULT_LIMITS, openSource } from '@compresso/engine';
import type { OutputFormat } from '@compresso/schema';
import sharp, { type Sharp } from 'sharp';
import type { CorpusImage } from './corpus.ts';

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
    // The engine writes the smaller of a palette PNG and a lossless one; so does this.
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
  const p = await pipelineFor(image, maxDimension);
  return applyEncoder(p, { format, quality }).toBuffer();
}
