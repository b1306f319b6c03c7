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
export function sharedBytes(bytes: Uint8Array, scratch?: SharedScratch): Uint8Array {
  if (bytes.buffer instanceof SharedArrayBuffer) return bytes;
  const shared = scratch ? scratch.take(bytes.length) : new Uint8Array(new SharedArrayBuffer(bytes.length));
  shared.set(bytes);
  return shared;
}

/**
 * Shared-memory buffers handed back after a score and reused for the next candidate's pixels. Fresh
 * memory costs its first touch (page faults): copying a 3-megapixel candidate's 9.4 MB into a new
 * SharedArrayBuffer took 35–70 ms here, into one already used 0.5 ms (2026-11-28) — more than the
 * JPEG decode itself. A free buffer at least as large as asked for and at most MAX_OVERSIZE times
 * as large serves (the smallest such, as a view of its first bytes), so one scratch serves searches
 * of other sizes without a small one holding a large buffer. It keeps at most MAX_FREE buffers and
 * `maxFreeBytes` of them; past that, the oldest goes to the garbage collector.
 */
export class SharedScratch {
  /** Two searches in flight, each with up to three buffers a candidate (RGBA and two backgrounds). */
  static readonly MAX_FREE = 6;
  static readonly MAX_OVERSIZE = 2;
  readonly #maxFreeBytes: number;
  #free: SharedArrayBuffer[] = [];

  constructor({ maxFreeBytes = Number.POSITIVE_INFINITY }: { maxFreeBytes?: number } = {}) {
    this.#maxFreeBytes = maxFreeBytes;
  }

  /** A buffer of `length` bytes: over the smallest free one that fits (see above), else new (contents undefined). */
  take(length: number): Uint8Array {
    let best = -1;
    this.#free.forEach((b, i) => {
      const fits = b.byteLength >= length && b.byteLength <= SharedScratch.MAX_OVERSIZE * length;
      if (fits && (best < 0 || b.byteLength < this.#free[best]!.byteLength)) best = i;
    });
    const buffer = best >= 0 ? this.#free.splice(best, 1)[0]! : new SharedArrayBuffer(length);
    return new Uint8Array(buffer, 0, length);
  }

  /** The images' pixel buffers may be reused: nothing reads these images any more. */
  give(images: readonly RgbImage[]): void {
    for (const image of images)
      for (const bytes of [image.data, image.rgba]) {
        const buffer = bytes?.buffer;
        if (!(buffer instanceof SharedArrayBuffer) || this.#free.includes(buffer)) continue;
        if (buffer.byteLength > this.#maxFreeBytes) continue;
        this.#free.push(buffer);
        while (this.#free.length > SharedScratch.MAX_FREE || this.freeBytes() > this.#maxFreeBytes)
          this.#free.shift();
      }
  }

  /** Bytes of the buffers held for reuse. */
  freeBytes(): number {
    return this.#free.reduce((sum, b) => sum + b.byteLength, 0);
  }
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
  scratch?: SharedScratch,
): Promise<RgbImage[]> {
  const pipeline = input instanceof Uint8Array ? sharp(input) : input;
  // One decode: sRGB keeps an alpha channel where the input has one (4 channels) and gives 3
  // otherwise (a separate metadata() call first cost an extra libvips call per candidate).
  const { data, info } = await pipeline.toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  if (info.channels === 4) {
    const rgba = sharedBytes(data, scratch);
    const images = composite(rgba, info.width, info.height, backgrounds, scratch);
    // An alpha channel opaque everywhere shows no background: one image serves them all (and is
    // scored once, see compare.ts).
    return images;
  }
  if (info.channels !== 3) throw new Error(`expected 3 or 4 channels after decoding, got ${info.channels}`);
  const image: RgbImage = {
    width: info.width,
    height: info.height,
    data: sharedBytes(data, scratch),
  };
  return backgrounds.map(() => image);
}

const blendTables = new Map<number, Uint8Array>();

/**
 * For a background value `bg` (0–255): entry (a << 8) | c is c at alpha a laid over bg, rounded,
 * round((a·c + (255 − a)·bg) / 255), in integers (never a tie: a multiple of 1/255 is never x.5), so
 * it equals the float blend rounded. A table lookup instead of a multiply and divide per channel:
 * 2.35-megapixel candidates of a transparent image took 40–65 ms per background to composite before.
 */
function blendTable(bg: number): Uint8Array {
  let table = blendTables.get(bg);
  if (!table) {
    table = new Uint8Array(65536);
    for (let a = 0; a < 256; a++)
      for (let c = 0; c < 256; c++)
        table[(a << 8) | c] = Math.floor(((a * c + (255 - a) * bg) * 2 + 255) / 510);
    blendTables.set(bg, table);
  }
  return table;
}

/**
 * RGBA laid over each background (in sRGB, as browsers composite), keeping the RGBA for the metric.
 * A background of whole 0–255 values goes through `blendTable`, any other through the float blend.
 * An alpha channel that is opaque everywhere changes nothing: one image (without `rgba`, so the metric
 * takes the fast path) is returned for every background.
 */
function composite(
  rgba: Uint8Array,
  width: number,
  height: number,
  backgrounds: readonly { r: number; g: number; b: number }[],
  scratch?: SharedScratch,
): RgbImage[] {
  const n = width * height;
  const output = () => (scratch ? scratch.take(n * 3) : new Uint8Array(new SharedArrayBuffer(n * 3)));
  let first = 0;
  while (first < n && rgba[first * 4 + 3] === 255) first++;
  if (first === n) {
    const rgb = output();
    for (let i = 0, j = 0, k = 0; i < n; i++, j += 4, k += 3) {
      rgb[k] = rgba[j]!;
      rgb[k + 1] = rgba[j + 1]!;
      rgb[k + 2] = rgba[j + 2]!;
    }
    const image: RgbImage = { width, height, data: rgb };
    return backgrounds.map(() => image);
  }
  return backgrounds.map((background) => {
    const rgb = output();
    const { r, g, b } = background;
    if (![r, g, b].every((v) => Number.isInteger(v) && v >= 0 && v <= 255)) {
      for (let i = 0, j = 0, k = 0; i < n; i++, j += 4, k += 3) {
        const t = rgba[j + 3]! / 255;
        rgb[k] = Math.round(t * rgba[j]! + (1 - t) * r);
        rgb[k + 1] = Math.round(t * rgba[j + 1]! + (1 - t) * g);
        rgb[k + 2] = Math.round(t * rgba[j + 2]! + (1 - t) * b);
      }
      return { width, height, data: rgb, rgba, background: { ...background } };
    }
    const tr = blendTable(r);
    const tg = blendTable(g);
    const tb = blendTable(b);
    for (let i = 0, j = 0, k = 0; i < n; i++, j += 4, k += 3) {
      const a = rgba[j + 3]! << 8;
      rgb[k] = tr[a | rgba[j]!]!;
      rgb[k + 1] = tg[a | rgba[j + 1]!]!;
      rgb[k + 2] = tb[a | rgba[j + 2]!]!;
    }
    return { width, height, data: rgb, rgba, background: { ...background } };
  });
}
