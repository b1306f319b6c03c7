import type { OutputFormat } from '@compresso/schema';
import type { Sharp } from 'sharp';
import { encoderQuality } from './quality.ts';

/**
 * AVIF effort. Measured by test/bench/calibrate.ts --part efforts (2026-11-22; 4 photos at 2048 px,
 * quality 40–70, efforts interleaved in one run on the shared 2-core machine, load ≈ 9, so absolute
 * times are ~2× an idle machine's; the ratios are what count). Bytes at equal SSIMULACRA2 vs effort 4:
 *
 *   effort | encode (loaded) | time vs 4 | bytes vs 4 at equal score
 *      0   |     0.32 s      |   0.03    |  +34.9 %
 *      1   |     0.53 s      |   0.05    |  +27.8 %
 *      2   |     1.19 s      |   0.11    |  +30.6 %
 *      3   |     1.84 s      |   0.18    |  +12.9 %
 *      4   |    10.5 s       |   1       |    0     (sharp's default)
 *
 * No effort gives both ≥ 2 images/s and bytes within 5 % of effort 4: below 4 libaom drops tools and
 * the bytes jump. Effort 3 keeps most of AVIF's size advantage (+13 %) at 5.7× the speed of 4;
 * effort 1 would reach ~3.8 images/s on 2 cores (unloaded: more) but gives back +28 %, most of what
 * AVIF gains over WebP. Bytes are why one picks AVIF, so 3.
 */
export const AVIF_EFFORT = 3;
/** WebP method 4 is libwebp's own default balance; 6 costs ~2× time for ~1–2% bytes. */
export const WEBP_EFFORT = 4;
export const PNG_PALETTE_EFFORT = 7;

export type ChromaSubsampling = '4:2:0' | '4:4:4';

export interface EncodeSettings {
  format: OutputFormat;
  /** Compresso quality, 1–100. */
  quality: number;
  /**
   * PNG: a lossless (truecolour) PNG instead of a quantised palette. WebP: lossless WebP (quality is
   * then ignored). Quality "auto" picks it for graphics and screenshots where it is smaller or where no
   * lossy quality reaches the floor.
   */
  lossless?: boolean;
  /**
   * JPEG and AVIF: chroma resolution. 4:2:0 (the default) halves colour resolution, which photos hide
   * and text, thin coloured lines and small images do not: quality "auto" switches to 4:4:4 there.
   */
  chromaSubsampling?: ChromaSubsampling;
  /**
   * WebP only: near-lossless (libwebp's pixel preprocessing, then lossless coding) at
   * NEAR_LOSSLESS_LEVEL. Smaller than lossless and far above any lossy quality on small images.
   */
  nearLossless?: boolean;
  /**
   * Lossy WebP only: write the alpha plane at quality 0 (cheap). For optimize.ts alone, which puts
   * the lossless alpha chunk of an earlier encode of the same pixels in its place (webp-alpha.ts):
   * the colour is coded the same either way.
   */
  draftAlpha?: boolean;
}

/**
 * libwebp near-lossless level (100 = lossless, lower = more preprocessing). At 60 a 176×110 photo
 * scored 93.0 by the reference SSIMULACRA2 tool at 22.8 KB (lossless 32 KB, lossy WebP at any quality
 * under 70 there).
 */
export const NEAR_LOSSLESS_LEVEL = 60;

/** Attach the encoder for `settings` to a pipeline. One place where every encoder option is chosen. */
export function applyEncoder(pipeline: Sharp, settings: EncodeSettings): Sharp {
  const q = encoderQuality(settings.format, settings.quality);
  switch (settings.format) {
    case 'jpeg':
      // mozjpeg: trellis quantisation, progressive scans, its own quant tables: 14–16% smaller than
      // libjpeg-turbo at equal SSIMULACRA2 on photos (field notes).
      return pipeline.jpeg({
        quality: q,
        mozjpeg: true,
        chromaSubsampling: settings.chromaSubsampling ?? '4:2:0',
      });
    case 'webp':
      if (settings.lossless) return pipeline.webp({ lossless: true, effort: WEBP_EFFORT });
      if (settings.nearLossless)
        return pipeline.webp({ nearLossless: true, quality: NEAR_LOSSLESS_LEVEL, effort: WEBP_EFFORT });
      return pipeline.webp({
        quality: q,
        effort: WEBP_EFFORT,
        ...(settings.draftAlpha ? { alphaQuality: 0 } : {}),
      });
    case 'avif':
      if (settings.lossless) return pipeline.avif({ lossless: true, effort: AVIF_EFFORT });
      return pipeline.avif({
        quality: q,
        effort: AVIF_EFFORT,
        chromaSubsampling: settings.chromaSubsampling ?? '4:2:0',
      });
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
