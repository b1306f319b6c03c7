import { type CompressOptions, defaultOutputFormat, type OutputFormat } from '@compresso/schema';
import sharp from 'sharp';
import { detectFormat } from './detect.ts';
import { heicDimensions } from './heic.ts';
import type { EngineLimits } from './limits.ts';

const MiB = 1024 * 1024;

/**
 * Native memory one job holds besides its pixels: the input buffer's copies, libvips' region
 * buffers and thread stacks, the encoder's own state. Measured: a 800×600 JPEG re-encode peaks at
 * about 1 MiB over an idle process, a 1024-px AVIF from a 2560-px JPEG at 31 MiB.
 */
const BASE_BYTES = 16 * MiB;

/**
 * Bytes each output pixel costs the encoder at its peak. Decoding streams (sequentialRead, JPEG
 * shrink-on-load), but every encoder here takes the whole resized frame and builds its own planes:
 * measured peaks of one job over an idle process (MALLOC_ARENA_MAX=2, 12 MP JPEG in) were 29 MiB to
 * 2048-px WebP (≈ 6 B/px over the base), 74 MiB to 2048-px AVIF (≈ 24 B/px), 74 MiB to 12 MP JPEG.
 * AVIF (aom) is the dearest; PNG writes a palette and a lossless candidate at once.
 */
const ENCODE_BYTES_PER_PIXEL: Record<OutputFormat, number> = {
  avif: 24,
  webp: 6,
  jpeg: 6,
  png: 12,
  gif: 12,
};

/**
 * A HEVC HEIC is decoded whole in a WebAssembly worker (its heap, the RGBA result and sharp's copy
 * of it): ≈ 40 B per input pixel measured (73 MiB for 1680×1050, 420–580 MB for 12 MP).
 */
const HEIC_DECODE_BYTES_PER_PIXEL = 36;

/**
 * Alpha doubles what the encoders hold (a separate plane, compressed on its own): a 2140×1200 alpha
 * PNG to WebP peaked at 77 MiB against ≈ 30 MiB for an opaque frame of that size.
 */
const ALPHA_FACTOR = 2;

/** Quality "auto" keeps two candidates and the SSIMULACRA2 planes of reference and candidate. */
const AUTO_BYTES_PER_PIXEL = 32;

/** Animated outputs hold every frame; past this many the estimate stops growing (the pixel limits bound the rest). */
const MAX_COUNTED_FRAMES = 16;

function fitInside(width: number, height: number, max: number | undefined): number {
  if (max === undefined || (width <= max && height <= max)) return width * height;
  const scale = max / Math.max(width, height);
  return Math.max(1, Math.round(width * scale)) * Math.max(1, Math.round(height * scale));
}

/**
 * The native memory one optimize() is expected to hold at its peak, from the header alone (no pixel
 * decoded): what admission by memory counts. An input whose header cannot be read, or that is over
 * the pixel limits, costs the base: it is refused at once inside, holding next to nothing — and
 * must not wait for the whole budget as a 40000×40000 header would if counted by its pixels.
 */
export async function estimateOptimizeBytes(
  bytes: Uint8Array,
  options: CompressOptions,
  limits: EngineLimits,
): Promise<number> {
  let detected: ReturnType<typeof detectFormat>;
  try {
    detected = detectFormat(bytes);
  } catch {
    return BASE_BYTES;
  }
  let width: number;
  let height: number;
  let frames = 1;
  let hasAlpha = false;
  let decodeBytes = 0;
  if (detected.hevc) {
    const size = heicDimensions(bytes);
    if (!size) return BASE_BYTES;
    ({ width, height } = size);
    decodeBytes = width * height * HEIC_DECODE_BYTES_PER_PIXEL;
  } else {
    try {
      const m = await sharp(bytes, { limitInputPixels: false }).metadata();
      frames = Math.max(1, m.pages ?? 1);
      width = m.width;
      height = frames > 1 ? (m.pageHeight ?? m.height) : m.height;
      hasAlpha = m.hasAlpha ?? false;
    } catch {
      return BASE_BYTES;
    }
  }
  if (!(width > 0 && height > 0)) return BASE_BYTES;
  if (width * height > limits.maxPixels || width * height * frames > limits.maxTotalPixels) return BASE_BYTES;
  const format = options.output_format ?? defaultOutputFormat(detected.format);
  const outPixels = fitInside(width, height, options.max_dimension);
  const outFrames = format === 'gif' || format === 'webp' ? Math.min(frames, MAX_COUNTED_FRAMES) : 1;
  const perPixel =
    ENCODE_BYTES_PER_PIXEL[format] * (hasAlpha ? ALPHA_FACTOR : 1) +
    (options.quality === 'auto' ? AUTO_BYTES_PER_PIXEL : 0);
  return Math.ceil(BASE_BYTES + decodeBytes + outPixels * outFrames * perPixel);
}

/**
 * inspect() reads headers, but may decode a HEVC HEIC whose container leaves a question open: such
 * an input is counted for that decode, any other for the base.
 */
export function estimateInspectBytes(bytes: Uint8Array, limits: EngineLimits): number {
  try {
    if (!detectFormat(bytes).hevc) return BASE_BYTES;
  } catch {
    return BASE_BYTES;
  }
  const size = heicDimensions(bytes);
  if (!size || size.width * size.height > limits.maxPixels) return BASE_BYTES;
  return BASE_BYTES + size.width * size.height * HEIC_DECODE_BYTES_PER_PIXEL;
}
