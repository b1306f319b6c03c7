import { readFileSync } from 'node:fs';
import {
  checkRgb,
  KERNEL,
  type PreparedReference,
  packSubScores,
  padToMinimum,
  prepareReference,
  type RgbImage,
  type RowSampling,
  SRGB_TO_LINEAR,
  scaleCount,
  scoreFromSubScores,
  ssimulacra2 as ssimulacra2Scalar,
  toLinear,
  weighted,
} from './ssimulacra2.ts';

/**
 * SSIMULACRA2 with its pixel work in WebAssembly SIMD (assembly/ssimulacra2.ts, compiled into
 * ssimulacra2.wasm beside this file): the score quality "auto" and the metric pool compute. The
 * TypeScript implementation (ssimulacra2.ts) is the reference it is tested against (simd.test.ts:
 * scores within 0.15 on photos, screenshots, graphics and transparent images from 8 to 2048 px; at
 * most 0.131 apart over the corpus, README.quality.md) and the path for images over SIMD_MAX_PIXELS. The two
 * differ only in rounding: here every operation is in 32-bit floats, four pixels at a time.
 */

/** The part of the WebAssembly JS API used here (Node's type declarations do not include it). */
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
}
const { WebAssembly: wasmApi } = globalThis as unknown as { WebAssembly: WasmApi };

interface Exports {
  memory: { buffer: ArrayBuffer };
  init(k0: number, k1: number, k2: number, k3: number, k4: number): number;
  alloc(bytes: number): number;
  release(ptr: number): void;
  prepare(
    lin: number,
    bytes: boolean,
    width: number,
    height: number,
    wants: number,
    band: number,
    every: number,
    minHeight: number,
  ): number;
  scaleCountOf(ref: number): number;
  sampledScalesOf(ref: number): number;
  releaseReference(ref: number): void;
  score(
    ref: number,
    lin: number,
    bytes: boolean,
    width: number,
    height: number,
    wants: number,
    out: number,
  ): void;
}

/**
 * Images up to this many pixels are scored in WebAssembly; larger ones by the TypeScript code. A
 * wasm32 memory ends at 4 GiB and never shrinks: a prepared reference holds up to ~48 bytes a pixel
 * (XYB planes, blurred means and squares over the scales) and a score ~30 more, so a metric thread
 * that keeps two references of this size (worker.ts: more than two only while together they are no
 * larger than one 2048 × 2048 one) and scores a third image stays under 2.2 GiB.
 */
export const SIMD_MAX_PIXELS = 4096 * 4096;

export function simdFits(width: number, height: number): boolean {
  return width * height <= SIMD_MAX_PIXELS;
}

interface Instance {
  x: Exports;
  wants: number;
  out: number;
}

let current: Instance | undefined;
/** Bumped when an instance is dropped after a failure: references from before are then invalid. */
let generation = 0;

function instance(): Instance {
  if (!current) {
    const module = new wasmApi.Module(readFileSync(new URL('./ssimulacra2.wasm', import.meta.url)));
    const x = new wasmApi.Instance(module, {
      env: {
        abort(_message: number, _file: number, line: number, column: number) {
          throw new Error(`SSIMULACRA2 (WebAssembly) stopped at ${line}:${column} (out of memory?)`);
        },
      },
    }).exports as unknown as Exports;
    const lut = x.init(KERNEL[4]!, KERNEL[5]!, KERNEL[6]!, KERNEL[7]!, KERNEL[8]!);
    new Float32Array(x.memory.buffer, lut, 256).set(SRGB_TO_LINEAR);
    current = { x, wants: x.alloc(18), out: x.alloc(108 * 8) };
  }
  return current;
}

/** Run `work` on the instance; after any failure the instance (its memory maybe inconsistent) is dropped. */
function using<T>(work: (i: Instance) => T): T {
  const i = instance();
  try {
    return work(i);
  } catch (error) {
    current = undefined;
    generation++;
    throw error;
  }
}

/** A reference prepared in WebAssembly memory; free it with `releaseReferenceSimd` (or let it be collected). */
export interface SimdReference {
  readonly simd: true;
  readonly width: number;
  readonly height: number;
  /** Scales computed (as `scaleCount` of the padded size). */
  readonly scales: number;
  handle: number;
  readonly generation: number;
}

const collected = new FinalizationRegistry<{ handle: number; generation: number }>((held) => {
  if (held.generation === generation && current) current.x.releaseReference(held.handle);
});

/** Copy the image's linear input (8-bit RGB, or linear planes for transparent images) into wasm memory. */
function input(i: Instance, image: RgbImage): { ptr: number; bytes: boolean; width: number; height: number } {
  const padded = padToMinimum(image);
  const { width, height } = padded;
  const n = width * height;
  if (padded.rgba && padded.background) {
    const ptr = i.x.alloc(n * 12);
    // Composited straight into the module's memory: no planes on the JS heap to fill and copy.
    const view = new Float32Array(i.x.memory.buffer, ptr, n * 3);
    toLinear(padded, [view.subarray(0, n), view.subarray(n, 2 * n), view.subarray(2 * n)]);
    return { ptr, bytes: false, width, height };
  }
  const ptr = i.x.alloc(n * 3);
  new Uint8Array(i.x.memory.buffer, ptr, n * 3).set(padded.data);
  return { ptr, bytes: true, width, height };
}

function setWants(i: Instance, scales: number, want: (c: number, scale: number) => number): void {
  const wants = new Uint8Array(i.x.memory.buffer, i.wants, 18);
  wants.fill(0);
  for (let scale = 0; scale < scales; scale++)
    for (let c = 0; c < 3; c++) wants[scale * 3 + c] = want(c, scale);
}

function wantBits(c: number, scale: number, scales: number): number {
  const w = weighted(c, scale, scales);
  return (w.ssim ? 1 : 0) | (w.edge ? 2 : 0);
}

export function prepareReferenceSimd(reference: RgbImage, sampling?: RowSampling): SimdReference {
  checkRgb('reference', reference);
  return using((i) => {
    const image = input(i, reference);
    const scales = scaleCount(image.width, image.height);
    setWants(i, scales, (c, scale) => wantBits(c, scale, scales));
    let handle: number;
    try {
      handle = i.x.prepare(
        image.ptr,
        image.bytes,
        image.width,
        image.height,
        i.wants,
        sampling?.band ?? 0,
        sampling?.every ?? 1,
        sampling?.minHeight ?? 0,
      );
    } finally {
      i.x.release(image.ptr);
    }
    const ref: SimdReference = {
      simd: true,
      width: reference.width,
      height: reference.height,
      scales: i.x.scaleCountOf(handle),
      handle,
      generation,
    };
    collected.register(ref, { handle, generation }, ref);
    return ref;
  });
}

/** False once the reference was released, or its module dropped after a failure: prepare it again. */
export function simdReferenceLive(ref: SimdReference): boolean {
  return ref.handle !== 0 && ref.generation === generation && current !== undefined;
}

/** How many of the reference's scales are row-sampled (see RowSampling). */
export function sampledScalesSimd(ref: SimdReference): number {
  return using((i) => i.x.sampledScalesOf(ref.handle));
}

/** Bytes of this thread's WebAssembly memory (it grows to the largest need and stays there). */
export function simdMemoryBytes(): number {
  return current?.x.memory.buffer.byteLength ?? 0;
}

export function releaseReferenceSimd(ref: SimdReference): void {
  if (!ref.handle) return;
  collected.unregister(ref);
  if (ref.generation === generation && current) current.x.releaseReference(ref.handle);
  ref.handle = 0;
}

/** The 108 sub-scores, as `subScores` in ssimulacra2.ts computes them (to float rounding). */
export function subScoresSimd(
  reference: RgbImage | SimdReference,
  distorted: RgbImage,
  weightedOnly = false,
): Float64Array {
  if (reference.width !== distorted.width || reference.height !== distorted.height) {
    throw new RangeError(
      `SSIMULACRA2 needs images of the same size: reference ${reference.width}×${reference.height}, distorted ${distorted.width}×${distorted.height}`,
    );
  }
  checkRgb('distorted', distorted);
  const prepared = 'simd' in reference ? reference : prepareReferenceSimd(reference);
  if (!prepared.handle || prepared.generation !== generation) {
    throw new Error('SSIMULACRA2: this prepared reference was released');
  }
  try {
    return using((i) => {
      const image = input(i, distorted);
      const scales = prepared.scales;
      setWants(i, scales, (c, scale) => (weightedOnly ? wantBits(c, scale, scales) : 3));
      try {
        i.x.score(prepared.handle, image.ptr, image.bytes, image.width, image.height, i.wants, i.out);
      } finally {
        i.x.release(image.ptr);
      }
      const norms = new Float64Array(i.x.memory.buffer, i.out, 108);
      return packSubScores(norms.subarray(0, 36), norms.subarray(36), scales);
    });
  } finally {
    if (prepared !== reference) releaseReferenceSimd(prepared);
  }
}

/** SSIMULACRA2 of `distorted` against `reference` (see `ssimulacra2` in ssimulacra2.ts). */
export function ssimulacra2Simd(reference: RgbImage | SimdReference, distorted: RgbImage): number {
  return scoreFromSubScores(subScoresSimd(reference, distorted, true));
}

/**
 * SSIMULACRA2 of `distorted` against `reference` (same size, 8-bit sRGB): in WebAssembly when the
 * image fits (SIMD_MAX_PIXELS), else by the TypeScript implementation. Synchronous and CPU-bound
 * (about 25 ms for a 1680×1050 pair in WebAssembly): servers should call `scoreAsync`.
 */
export function ssimulacra2(
  reference: RgbImage | PreparedReference | SimdReference,
  distorted: RgbImage,
): number {
  if ('simd' in reference) return ssimulacra2Simd(reference, distorted);
  if (!('scales' in reference) && simdFits(reference.width, reference.height))
    return ssimulacra2Simd(reference, distorted);
  return ssimulacra2Scalar(reference, distorted);
}

/** A prepared reference for `ssimulacra2`: in WebAssembly memory when the image fits. */
export function prepare(reference: RgbImage, sampling?: RowSampling): PreparedReference | SimdReference {
  return simdFits(reference.width, reference.height)
    ? prepareReferenceSimd(reference, sampling)
    : prepareReference(reference, sampling);
}

/** Whether a reference from `prepare` can still be scored against (see `simdReferenceLive`). */
export function preparedLive(reference: PreparedReference | SimdReference): boolean {
  return !('simd' in reference) || simdReferenceLive(reference);
}

/** Free what `prepare` holds now rather than when it is collected. */
export function releasePrepared(reference: PreparedReference | SimdReference): void {
  if ('simd' in reference) releaseReferenceSimd(reference);
}
