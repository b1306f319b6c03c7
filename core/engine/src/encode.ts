import type { OutputFormat } from '@compresso/schema';
import type { Sharp } from 'sharp';
import { encoderQuality } from './quality.ts';

/**
 * AVIF effort. sharp's default (4) runs ≈ 0.18 images/s at 2048 px on 2 cores; effort 2 keeps bytes
 * within a few percent at equal quality while running several times faster (figures: engine README).
 */
export const AVIF_EFFORT = 2;
/** WebP method 4 is libwebp's own default balance; 6 costs ~2× time for ~1–2% bytes. */
export const WEBP_EFFORT = 4;
export const PNG_PALETTE_EFFORT = 7;

export interface EncodeSettings {
  format: OutputFormat;
  /** Compresso quality, 1–100. */
  quality: number;
  /** PNG only: write a lossless (truecolour) PNG instead of a quantised palette. */
  lossless?: boolean;
}

/** Attach the encoder for `settings` to a pipeline. One place where every encoder option is chosen. */
export function applyEncoder(pipeline: Sharp, settings: EncodeSettings): Sharp {
  const q = encoderQuality(settings.format, settings.quality);
  switch (settings.format) {
    case 'jpeg':
      // mozjpeg: trellis quantisation, progressive scans, its own quant tables: 14–16% smaller than
      // libjpeg-turbo at equal SSIMULACRA2 on photos (field notes).
      return pipeline.jpeg({ quality: q, mozjpeg: true });
    case 'webp':
      return pipeline.webp({ quality: q, effort: WEBP_EFFORT });
    case 'avif':
      return pipeline.avif({ quality: q, effort: AVIF_EFFORT, chromaSubsampling: '4:2:0' });
    case 'png':
      if (settings.lossless)
        return pipeline.png({ compressionLevel: 9, adaptiveFiltering: true, palette: false });
      return pipeline.png({ palette: true, quality: q, effort: PNG_PALETTE_EFFORT, compressionLevel: 9 });
    case 'gif':
      // Lower quality lets neighbouring frames reuse pixels and palettes within a small error.
      return pipeline.gif({
        effort: 7,
        interFrameMaxError: q >= 90 ? 0 : Math.round((90 - q) / 8),
        interPaletteMaxError: q >= 90 ? 3 : 3 + Math.round((90 - q) / 4),
      });
  }
}
