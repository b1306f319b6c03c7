import { createRequire } from 'node:module';
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { rgbaTiff } from './rgba-tiff.ts';

/**
 * Runs inside a piscina worker thread: heic-decode (libheif + libde265 compiled to WebAssembly) decodes
 * synchronously for ~1.6 s per 12 MP photo, so on the main thread it would stall every other request.
 * Plain data in, plain data out; errors are tagged with a code the main thread maps to a CompressoError.
 */

export interface HeicTask {
  bytes: Uint8Array;
  maxPixels: number;
  /**
   * The colour profile the decoded numbers are in (from the file's colr box), when not sRGB. The
   * pixels then come back as an uncompressed TIFF carrying it, so sharp converts them to sRGB.
   */
  icc?: Uint8Array;
}

export interface HeicDecoded {
  width: number;
  height: number;
  /** RGBA, 8 bits per channel; or, when `tiff` is true, a TIFF of those pixels with their ICC profile. */
  data: Uint8Array;
  tiff: boolean;
  /** False when the alpha channel is 255 everywhere (iPhone photos): the main thread then drops it. */
  hasAlpha: boolean;
}

interface HeicImage {
  width: number;
  height: number;
  decode(): Promise<{ width: number; height: number; data: Uint8ClampedArray }>;
}
type HeicAll = (input: { buffer: Uint8Array }) => Promise<HeicImage[] & { dispose(): void }>;

let decodeAll: HeicAll | undefined;

/** Custom properties do not survive the thread boundary; the code rides at the front of the message. */
export const CODE_SEPARATOR = ' :: ';
function tagged(code: string, message: string): Error {
  return new Error(`${code}${CODE_SEPARATOR}${message}`);
}

/**
 * libheif-js says why a file failed only through console.log (and then returns no image, which
 * heic-decode reports as "HEIF image not found"). From this worker that would print onto the host
 * process's stdout, and a library stays silent: the lines are kept and become the error's reason.
 * One task per worker at a time, so nothing else logs in between.
 */
async function quietly<T>(work: () => Promise<T>, reasons: string[]): Promise<T> {
  const log = console.log;
  console.log = (...args: unknown[]) => {
    reasons.push(args.map(String).join(' '));
  };
  try {
    return await work();
  } finally {
    console.log = log;
  }
}

function reason(said: string[], error: unknown): string {
  const line = said.at(-1)?.replace(/^Could not parse HEIF file\s*/, '');
  return (line || String(error)).slice(0, 300);
}

export default async function decodeHeicInWorker(task: HeicTask) {
  decodeAll ??= (createRequire(import.meta.url)('heic-decode') as { all: HeicAll }).all;
  const decode = decodeAll;
  let images: Awaited<ReturnType<HeicAll>>;
  const said: string[] = [];
  try {
    images = await quietly(() => decode({ buffer: task.bytes }), said);
  } catch (error) {
    throw tagged('CORRUPT_IMAGE', `the HEIC/HEIF image could not be read (${reason(said, error)})`);
  }
  try {
    const primary = images[0];
    if (!primary) throw tagged('CORRUPT_IMAGE', 'the HEIC/HEIF file holds no image');
    // Second line of defence after the main thread's header check: libheif knows the real size.
    if (primary.width * primary.height > task.maxPixels) {
      throw tagged('IMAGE_TOO_LARGE', `${primary.width}×${primary.height}`);
    }
    const { width, height, data } = await quietly(() => primary.decode(), said);
    let hasAlpha = false;
    for (let i = 3; i < data.length; i += 4) {
      if (data[i] !== 255) {
        hasAlpha = true;
        break;
      }
    }
    const rgba = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const out = task.icc ? rgbaTiff(width, height, rgba, task.icc) : rgba;
    const value: HeicDecoded = { width, height, data: out, hasAlpha, tiff: Boolean(task.icc) };
    // Transfer the pixel buffer instead of copying it: a 12 MP frame is 48 MB.
    return move({
      get [transferableSymbol]() {
        return [out.buffer];
      },
      get [valueSymbol]() {
        return value;
      },
    }) as unknown as HeicDecoded;
  } catch (error) {
    if (String((error as Error).message).includes(CODE_SEPARATOR)) throw error;
    throw tagged('CORRUPT_IMAGE', `the HEIC/HEIF image could not be decoded (${reason(said, error)})`);
  } finally {
    images.dispose();
  }
}
