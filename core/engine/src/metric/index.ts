import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import sharp, { type Sharp } from 'sharp';
import { ssimulacra2 } from './simd.ts';
import type { RgbImage } from './ssimulacra2.ts';
import type { ScoreTask } from './worker.ts';

export { type RgbImage, ssimulacra2 };

/**
 * Metric threads. A 2048-px score keeps one core busy (~50–100 ms in WebAssembly, 1–2 s in the
 * TypeScript implementation used above SIMD_MAX_PIXELS) and holds ~150 MB of float planes,
 * so on small machines one thread (the other core keeps encoding), never more than two: more would
 * only take cores away from libvips and multiply memory. Tasks beyond this wait in piscina's queue.
 */
export const METRIC_THREADS = Math.max(1, Math.min(2, availableParallelism() - 1));

/** An idle metric thread exits after this, handing back its heap. */
const IDLE_TIMEOUT_MS = 10_000;

let pool: Piscina<ScoreTask, number> | undefined;

/**
 * Created on the first score, not at import (most processes never ask for "auto"); minThreads 0 so an
 * idle pool holds no thread and never keeps the process alive.
 */
function metricPool(): Piscina<ScoreTask, number> {
  pool ??= new Piscina<ScoreTask, number>({
    filename: new URL('./worker.ts', import.meta.url).href,
    minThreads: 0,
    maxThreads: METRIC_THREADS,
    idleTimeout: IDLE_TIMEOUT_MS,
    concurrentTasksPerWorker: 1,
  });
  return pool;
}

/**
 * Each reference object gets an id; the worker thread keeps the reference-side work for the last ids
 * it saw, so scoring many candidates against one reference object pays for it once. Pixels must not
 * be changed in place between calls with the same object (RgbImage is treated as immutable).
 */
export interface ScoreOptions {
  /**
   * An estimate instead of the exact score: on images of AUTO_ROW_SAMPLING.minHeight rows or more,
   * the scales of that height or more are scored on a quarter of their rows (ssimulacra2.ts
   * RowSampling), about half the CPU of a score; the estimate was within 0.3 of the exact score on
   * the corpus (README.quality.md). Smaller images are scored exactly either way.
   */
  sampled?: boolean;
}

const referenceIds = new WeakMap<RgbImage, number>();
let nextReferenceId = 1;

/**
 * `bytes` in shared memory: itself when it is there already, else a copy. A metric task posts its
 * pixels to a thread, and a typed array over an ordinary ArrayBuffer is copied twice on the way
 * (serialised here, deserialised there: 12–35 ms for the 9–21 MB of a 3-megapixel image, 2026-11-27),
 * where one over a SharedArrayBuffer is not copied at all. The auto search posts the same reference
 * with every candidate, so `decodeToRgbs` decodes into shared memory from the start.
 */
export function sharedBytes(bytes: Uint8Array): Uint8Array {
  if (bytes.buffer instanceof SharedArrayBuffer) return bytes;
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.length));
  shared.set(bytes);
  return shared;
}

/** Shared copies of images passed in ordinary memory, kept while the image lives (a reference is posted again with every score). */
const sharedImages = new WeakMap<RgbImage, RgbImage>();

function shared(image: RgbImage): RgbImage {
  if (
    image.data.buffer instanceof SharedArrayBuffer &&
    (!image.rgba || image.rgba.buffer instanceof SharedArrayBuffer)
  )
    return image;
  let copy = sharedImages.get(image);
  if (!copy) {
    copy = {
      ...image,
      data: sharedBytes(image.data),
      ...(image.rgba ? { rgba: sharedBytes(image.rgba) } : {}),
    };
    sharedImages.set(image, copy);
  }
  return copy;
}

/**
 * SSIMULACRA2 computed in a worker thread, so the event loop is never blocked by the metric. The
 * pixels reach the thread in shared memory (`sharedBytes`): images decoded by `decodeToRgb(s)` are
 * there already, others are copied once. Callers such as the auto-quality search keep using the
 * same reference for several scores; the pixels must not change while a score runs.
 */
export async function scoreAsync(
  reference: RgbImage,
  distorted: RgbImage,
  { sampled = false }: ScoreOptions = {},
): Promise<number> {
  if (reference.width !== distorted.width || reference.height !== distorted.height) {
    throw new RangeError(
      `SSIMULACRA2 needs images of the same size: reference ${reference.width}×${reference.height}, distorted ${distorted.width}×${distorted.height}`,
    );
  }
  return metricPool().run({
    referenceId: idOf(reference),
    reference: shared(reference),
    distorted: shared(distorted),
    sampled,
  });
}

function idOf(reference: RgbImage): number {
  let referenceId = referenceIds.get(reference);
  if (referenceId === undefined) {
    referenceId = nextReferenceId++;
    referenceIds.set(reference, referenceId);
  }
  return referenceId;
}

/**
 * The reference side of the metric (colour conversion, scales, blurred means and squares: about 40 %
 * of a score) computed now in a metric thread and kept there, so it runs while the caller encodes its
 * first candidate and the score that follows only does the distorted side. With one metric thread
 * (two cores or fewer) that score is sure to find it; with two it may land on the other thread, which
 * then prepares it again (correct, only slower).
 */
export async function prepareAsync(
  reference: RgbImage,
  { sampled = false }: ScoreOptions = {},
): Promise<void> {
  await metricPool().run({ referenceId: idOf(reference), reference: shared(reference), sampled });
}

/** Stop the metric threads (tests, graceful shutdown). A later score creates a new pool. */
export async function closeMetricPool(): Promise<void> {
  const current = pool;
  pool = undefined;
  if (current) await current.destroy();
}

/**
 * Backgrounds for transparent images, as the reference tool does it: a transparent image is judged
 * laid over a dark grey (10 %) and a light grey (90 %), and the worse of the two scores counts, so an
 * error hidden by one background is caught by the other.
 */
export const ALPHA_BACKGROUNDS = [
  { r: 26, g: 26, b: 26 },
  { r: 230, g: 230, b: 230 },
] as const;

export interface DecodeToRgbOptions {
  /** What transparent pixels are laid over (sRGB, 0–255). Default: mid grey (128). */
  background?: { r: number; g: number; b: number };
}

/**
 * Pixels as the metric takes them (a pipeline passed in is consumed): 8-bit sRGB RGB, first frame only, alpha composited onto
 * `background` (in sRGB, as browsers composite). Callers that care about transparency should score
 * against each of `ALPHA_BACKGROUNDS` and keep the minimum (see `scoreImages`).
 *
 * A transparent image also keeps its RGBA pixels and the background (`rgba`, `background`), so the
 * metric composites in floating point as the reference tool does; `data` is that composite rounded.
 * The pixels are in shared memory (`sharedBytes`), so a metric thread reads them without a copy.
 */
export async function decodeToRgb(
  input: Uint8Array | Sharp,
  options: DecodeToRgbOptions = {},
): Promise<RgbImage> {
  const [image] = await decodeToRgbs(input, [options.background ?? { r: 128, g: 128, b: 128 }]);
  return image!;
}

/**
 * `decodeToRgb` over several backgrounds from one decode (a transparent candidate is scored over
 * each of ALPHA_BACKGROUNDS: decoding it once per background cost a second AVIF decode, 55–67 ms at
 * 2048 × 1148). One image per background, in order; an opaque input gives the same image for each.
 */
export async function decodeToRgbs(
  input: Uint8Array | Sharp,
  backgrounds: readonly { r: number; g: number; b: number }[],
): Promise<RgbImage[]> {
  const pipeline = input instanceof Uint8Array ? sharp(input) : input;
  // One decode: sRGB keeps an alpha channel where the input has one (4 channels) and gives 3
  // otherwise (a separate metadata() call first cost an extra libvips call per candidate).
  const { data, info } = await pipeline.toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  if (info.channels === 4) {
    const rgba = sharedBytes(data);
    const images = backgrounds.map((background, i) =>
      i === 0 ? composite(rgba, info.width, info.height, background) : undefined,
    );
    // An alpha channel opaque everywhere shows no background: one image serves them all (and is
    // scored once, see compare.ts).
    if (!images[0]!.rgba) return backgrounds.map(() => images[0]!);
    return backgrounds.map(
      (background, i) => images[i] ?? composite(rgba, info.width, info.height, background),
    );
  }
  if (info.channels !== 3) throw new Error(`expected 3 or 4 channels after decoding, got ${info.channels}`);
  const image: RgbImage = {
    width: info.width,
    height: info.height,
    data: sharedBytes(data),
  };
  return backgrounds.map(() => image);
}

/** RGBA laid over `background` (in sRGB, as browsers composite), keeping the RGBA for the metric. */
function composite(
  rgba: Uint8Array,
  width: number,
  height: number,
  background: { r: number; g: number; b: number },
): RgbImage {
  const n = width * height;
  const rgb = new Uint8Array(new SharedArrayBuffer(n * 3));
  let transparent = false;
  for (let i = 0, j = 0, k = 0; i < n; i++, j += 4, k += 3) {
    const a = rgba[j + 3]!;
    if (a === 255) {
      rgb[k] = rgba[j]!;
      rgb[k + 1] = rgba[j + 1]!;
      rgb[k + 2] = rgba[j + 2]!;
    } else {
      transparent = true;
      const t = a / 255;
      rgb[k] = Math.round(t * rgba[j]! + (1 - t) * background.r);
      rgb[k + 1] = Math.round(t * rgba[j + 1]! + (1 - t) * background.g);
      rgb[k + 2] = Math.round(t * rgba[j + 2]! + (1 - t) * background.b);
    }
  }
  const image: RgbImage = { width, height, data: rgb };
  // An alpha channel that is opaque everywhere changes nothing; the metric then takes the fast path.
  return transparent ? { ...image, rgba, background: { ...background } } : image;
}
