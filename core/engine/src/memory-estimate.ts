import { type CompressOptions, defaultOutputFormat, type OutputFormat } from '@compresso/schema';
import sharp from 'sharp';
import { AUTO_FIXED_FORMATS } from './auto.ts';
import type { MemoryClaim } from './byte-semaphore.ts';
import { detectFormat } from './detect.ts';
import { heicDimensions } from './heic.ts';
import type { EngineLimits } from './limits.ts';
import { backgroundsFor } from './metric/compare.ts';
import { METRIC_THREADS } from './metric/index.ts';
import { KEEP_MIN, KEEP_PIXELS } from './metric/keep.ts';

const MiB = 1024 * 1024;

/**
 * Native memory one job holds besides its pixels: the input buffer's copies, libvips' region
 * buffers and thread stacks, the encoder's own state. Measured: a 800×600 JPEG re-encode peaks at
 * about 1 MiB over an idle process, a 1024-px AVIF from a 2560-px JPEG at 31 MiB.
 */
const BASE_BYTES = 16 * MiB;

/**
 * Bytes each output pixel costs the encoder at its peak, for an opaque and a transparent input.
 * Decoding streams (sequentialRead, JPEG shrink-on-load), but every encoder here takes the whole
 * resized frame and builds its own planes. Measured with test/bench/memory-per-pixel.ts (one job in
 * a fresh process after a warm-up, peak RSS over the RSS before it, `npm start`'s allocator settings;
 * results/memory-per-pixel.json, 2026-11-28, and two runs before it, not kept): a 1680 × 1050 photo held
 * 7.0–8.2 B a pixel into JPEG, 5.2–7.2 into WebP, 36.4–36.7 into AVIF; transparent graphics at 2048
 * px 7.5–10.9 into JPEG (which writes no alpha plane), 25.5–33.7 into WebP (libwebp compresses the
 * alpha plane on its own, losslessly), 28.9–38.0 into AVIF. Each figure here is the largest
 * measured, rounded up. PNG writes a palette
 * and a lossless candidate at once (not measured by that script: the older figure, twice with alpha).
 */
const ENCODE_BYTES_PER_PIXEL: Record<OutputFormat, { opaque: number; alpha: number }> = {
  avif: { opaque: 38, alpha: 38 },
  webp: { opaque: 8, alpha: 36 },
  jpeg: { opaque: 8, alpha: 12 },
  png: { opaque: 12, alpha: 24 },
  gif: { opaque: 12, alpha: 24 },
};

/**
 * A HEVC HEIC is decoded whole in a WebAssembly worker (its heap, the RGBA result and sharp's copy
 * of it): ≈ 40 B per input pixel measured (73 MiB for 1680×1050, 420–580 MB for 12 MP).
 */
const HEIC_DECODE_BYTES_PER_PIXEL = 36;

/**
 * Quality "auto" besides the encoder, per output pixel: the decoded reference, the metric's prepared
 * reference (its XYB planes and their blurred means and variances, over five scales) and the
 * candidate being scored (decoded, converted and blurred the same way). A transparent image into
 * WebP or AVIF is judged over two backgrounds (metric/compare.ts): a second prepared reference and a
 * second candidate. Measured with test/bench/memory-per-pixel.ts (above; images of 0.7 megapixels
 * and more, smaller ones fit the base): auto in all held 66–90 B a pixel into JPEG and WebP and
 * 102–125 into AVIF on opaque images, 78–84 on transparent ones into JPEG, and 139–162 on
 * transparent graphics at 2048 px into WebP and AVIF: 58–87 over the encoder for one reference,
 * 103–126 for two. Until 2026-11-28 auto counted 32 B, and admitted two large
 * autos whose real peak was up to three times their estimate.
 *
 * Not counted per job: the candidates' decode buffers the process keeps between searches for the
 * next one (auto.ts, at most CANDIDATE_SCRATCH_BYTES, 32 MiB, since 2026-12-01): a process-wide
 * extra, like the metric thread's own memory (METRIC_CEILING_PER_PIXEL). A search may decode a
 * candidate into kept buffers up to twice their size (SharedScratch.MAX_OVERSIZE): at most 3 B a
 * pixel more for an opaque image, 10 for a transparent one over two backgrounds (RGBA and two RGB
 * planes), inside the room the figures above leave over what was measured (8 B and 29 B a pixel).
 */
const AUTO_REFERENCE_BYTES_PER_PIXEL = 95;
const AUTO_SECOND_BACKGROUND_BYTES_PER_PIXEL = 60;

/**
 * The part of auto's bytes a metric thread holds for one search alone, per output pixel, at least:
 * its prepared reference(s) and the candidate being scored. Measured in one process (2026-11-28,
 * the module's memory read as resident set growth over prepare and score): 57.6–64.0 B a pixel for
 * one reference (a 2048-px photo, row-sampled and exact), 102.0–104.5 for two (the transparent Arc
 * graphic at 2048 px). The lower figures, rounded down: this part is what jobs running together may
 * share, so it must not be over-counted.
 */
export const METRIC_HELD_PER_PIXEL = { one: 55, two: 100 } as const;

/**
 * The most one metric thread holds, per pixel of the largest image searched: it keeps at most
 * KEEP_MIN prepared references of any size, or more while together they hold no more pixels than
 * KEEP_PIXELS (metric/keep.ts), lets the oldest go before preparing a new one, and scores one
 * candidate at a time. Measured with test/bench/memory-per-pixel.ts --metric-thread (the thread's
 * entry over two or three large transparent images' references in turn, as searches side by side
 * ask of it, so each score prepares its reference again; results/memory-metric-thread.md): 108.6–123.2 B
 * a pixel of the largest image, 99.9–101.7 with photos. Counted over at least KEEP_PIXELS / KEEP_MIN
 * pixels (four small references). Until the thread let the oldest go first, it read 129.6–141.2.
 */
export const METRIC_CEILING_PER_PIXEL = 140;

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
  return (await estimateOptimizeClaim(bytes, options, limits)).bytes;
}

/**
 * `estimateOptimizeBytes` with, for quality "auto", the part of those bytes the metric threads hold
 * (`shared`): searches running side by side share the metric threads, which hold at most their
 * ceiling (METRIC_CEILING_PER_PIXEL per thread) however many searches ask of them, so two large
 * transparent autos count for less together than apart (ByteSemaphore's `heldTogether`). Measured
 * (test/bench/memory-per-pixel.ts --pairs, results/memory-pairs.md): two transparent 2048 × 1148
 * graphics into WebP held 450 MiB at their peak together (392 MiB for one alone), counted 754 MiB
 * together and 888 apart; the ten pairs held 0.49–0.72 of what they are counted together.
 */
export async function estimateOptimizeClaim(
  bytes: Uint8Array,
  options: CompressOptions,
  limits: EngineLimits,
): Promise<MemoryClaim> {
  const base = { bytes: BASE_BYTES };
  let detected: ReturnType<typeof detectFormat>;
  try {
    detected = detectFormat(bytes);
  } catch {
    return base;
  }
  let width: number;
  let height: number;
  let frames = 1;
  let hasAlpha = false;
  let decodeBytes = 0;
  if (detected.hevc) {
    const size = heicDimensions(bytes);
    if (!size) return base;
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
      return base;
    }
  }
  if (!(width > 0 && height > 0)) return base;
  if (width * height > limits.maxPixels || width * height * frames > limits.maxTotalPixels) return base;
  const format = options.output_format ?? defaultOutputFormat(detected.format);
  const outPixels = fitInside(width, height, options.max_dimension);
  const outFrames = format === 'gif' || format === 'webp' ? Math.min(frames, MAX_COUNTED_FRAMES) : 1;
  const encode = ENCODE_BYTES_PER_PIXEL[format][hasAlpha ? 'alpha' : 'opaque'];
  // PNG and GIF under "auto" take no search; a search judges over the backgrounds the metric uses
  // (one, or two for a transparent image into WebP or AVIF).
  const searched = options.quality === 'auto' && !AUTO_FIXED_FORMATS.has(format);
  const references = backgroundsFor(hasAlpha, format).length;
  const auto = searched
    ? AUTO_REFERENCE_BYTES_PER_PIXEL + (references - 1) * AUTO_SECOND_BACKGROUND_BYTES_PER_PIXEL
    : 0;
  // Auto judges the first frame alone; the encoder holds every frame.
  const total = Math.ceil(BASE_BYTES + decodeBytes + outPixels * (outFrames * encode + auto));
  if (!searched) return { bytes: total };
  return {
    bytes: total,
    shared: {
      bytes: Math.floor(outPixels * METRIC_HELD_PER_PIXEL[references > 1 ? 'two' : 'one']),
      ceiling: Math.ceil(
        METRIC_THREADS * METRIC_CEILING_PER_PIXEL * Math.max(outPixels, KEEP_PIXELS / KEEP_MIN),
      ),
    },
  };
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
