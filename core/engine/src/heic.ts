import { availableParallelism } from 'node:os';
import { CompressoError } from '@compresso/schema';
import { Piscina } from 'piscina';
import { heicInputProfile } from './heic-colour.ts';
import { CODE_SEPARATOR, type HeicDecoded, type HeicTask } from './heic-worker.ts';
import type { EngineLimits } from './limits.ts';

export type { HeicDecoded };

/**
 * HEIC decodes at once. Each 12 MP decode holds up to ~580 MB and keeps one core busy for ~1.6 s
 * (field notes), so on small machines one at a time; more only queue behind the same cores and
 * multiply peak memory. Tasks beyond this wait in piscina's queue.
 */
export const HEIC_CONCURRENCY = Math.max(1, Math.min(2, Math.floor(availableParallelism() / 2)));

/** A worker idle this long exits, handing back the WebAssembly heap (hundreds of MB after a decode). */
const IDLE_TIMEOUT_MS = 15_000;

let pool: Piscina<HeicTask, HeicDecoded> | undefined;

/**
 * The pool is created on the first HEIC, not at import: most processes never see one, and the worker
 * loads a multi-megabyte WebAssembly module. minThreads 0 so an idle pool holds no thread and never
 * keeps the process alive.
 */
function heicPool(): Piscina<HeicTask, HeicDecoded> {
  pool ??= new Piscina<HeicTask, HeicDecoded>({
    filename: new URL('./heic-worker.ts', import.meta.url).href,
    minThreads: 0,
    maxThreads: HEIC_CONCURRENCY,
    idleTimeout: IDLE_TIMEOUT_MS,
    // The whole file is read into the worker's heap; JS heap stays small, the WASM heap is separate.
    concurrentTasksPerWorker: 1,
  });
  return pool;
}

/** Stop the HEIC workers (tests, graceful shutdown). A later HEIC creates a new pool. */
export async function closeHeicDecoder(): Promise<void> {
  const current = pool;
  pool = undefined;
  if (current) await current.destroy();
}

let inFlight = 0;
let submitted = 0;

/**
 * HEIC decodes running and waiting for a worker (all zero before the first HEIC), and how many were
 * ever handed to the pool (a refusal from the header never is).
 */
export function heicDecoderStats(): { running: number; waiting: number; threads: number; submitted: number } {
  const waiting = pool?.queueSize ?? 0;
  return { running: inFlight - waiting, waiting, threads: pool?.threads.length ?? 0, submitted };
}

function readUint32(bytes: Uint8Array, offset: number): number {
  return (
    ((bytes[offset]! << 24) | (bytes[offset + 1]! << 16) | (bytes[offset + 2]! << 8) | bytes[offset + 3]!) >>>
    0
  );
}

/** Walk ISO-BMFF boxes in [start, end), calling `visit(type, bodyStart, boxEnd)` for each. */
function eachBox(
  bytes: Uint8Array,
  start: number,
  end: number,
  visit: (type: string, body: number, boxEnd: number) => void,
): void {
  let at = start;
  while (at + 8 <= end) {
    let size = readUint32(bytes, at);
    const type = String.fromCharCode(bytes[at + 4]!, bytes[at + 5]!, bytes[at + 6]!, bytes[at + 7]!);
    let body = at + 8;
    if (size === 1) {
      if (at + 16 > end) return;
      // 64-bit size: a HEIC header box never needs more than 32 bits, so a high word means garbage.
      if (readUint32(bytes, at + 8) !== 0) return;
      size = readUint32(bytes, at + 12);
      body = at + 16;
    } else if (size === 0) size = end - at;
    if (size < body - at || at + size > end) return;
    visit(type, body, at + size);
    at += size;
  }
}

/**
 * The largest image size declared in the file's `ispe` (image spatial extent) properties, read from
 * the container without decoding anything. The primary image of a grid (iPhone photos are 512-px
 * tiles) declares the full size, so the largest one is the size that would be decoded.
 */
export function heicDimensions(bytes: Uint8Array): { width: number; height: number } | undefined {
  let best: { width: number; height: number } | undefined;
  eachBox(bytes, 0, bytes.length, (type, body, end) => {
    if (type !== 'meta') return;
    // meta is a full box: 4 bytes of version and flags before its children.
    eachBox(bytes, body + 4, end, (t2, b2, e2) => {
      if (t2 !== 'iprp') return;
      eachBox(bytes, b2, e2, (t3, b3, e3) => {
        if (t3 !== 'ipco') return;
        eachBox(bytes, b3, e3, (t4, b4, e4) => {
          if (t4 !== 'ispe' || b4 + 12 > e4) return;
          const width = readUint32(bytes, b4 + 4);
          const height = readUint32(bytes, b4 + 8);
          if (!best || width * height > best.width * best.height) best = { width, height };
        });
      });
    });
  });
  return best;
}

function readUint(bytes: Uint8Array, at: number, size: number): number {
  let value = 0;
  for (let i = 0; i < size; i++) value = value * 256 + bytes[at + i]!;
  return value;
}

export interface HeicMetadata {
  /** The EXIF item as a TIFF block ("MM"/"II" first), when the file has one. */
  exif?: Uint8Array;
  /** True when the file carries an XMP item (a "mime" item; HEIF uses no other kind in practice). */
  xmp: boolean;
}

/**
 * The EXIF and XMP items of a HEIF file, read from `iinf` (item types) and `iloc` (where items live)
 * without decoding. sharp cannot open HEVC HEIC at all, so this is how inspect() can still say that an
 * iPhone photo carries GPS.
 */
export function heicMetadata(bytes: Uint8Array): HeicMetadata {
  const types = new Map<number, string>();
  const places = new Map<number, { method: number; extents: [number, number][] }>();
  let idat: [number, number] | undefined;
  eachBox(bytes, 0, bytes.length, (type, body, end) => {
    if (type !== 'meta') return;
    eachBox(bytes, body + 4, end, (t, b, e) => {
      const version = bytes[b]!;
      if (t === 'idat') idat = [b, e];
      if (t === 'iinf') {
        const first = b + 4 + (version === 0 ? 2 : 4);
        eachBox(bytes, first, e, (t2, b2, e2) => {
          const v = bytes[b2]!;
          if (t2 !== 'infe' || v < 2 || b2 + 12 > e2) return;
          const idSize = v === 2 ? 2 : 4;
          const id = readUint(bytes, b2 + 4, idSize);
          const at = b2 + 4 + idSize + 2;
          types.set(id, String.fromCharCode(...bytes.subarray(at, at + 4)));
        });
      }
      if (t === 'iloc') {
        let at = b + 4;
        const offsetSize = bytes[at]! >> 4;
        const lengthSize = bytes[at]! & 15;
        const baseSize = bytes[at + 1]! >> 4;
        const indexSize = version >= 1 ? bytes[at + 1]! & 15 : 0;
        at += 2;
        const idSize = version < 2 ? 2 : 4;
        const count = readUint(bytes, at, idSize);
        at += idSize;
        for (let i = 0; i < count && at < e; i++) {
          const id = readUint(bytes, at, idSize);
          at += idSize;
          let method = 0;
          if (version >= 1) {
            method = readUint(bytes, at, 2) & 15;
            at += 2;
          }
          at += 2; // data_reference_index
          const base = readUint(bytes, at, baseSize);
          at += baseSize;
          const extentCount = readUint(bytes, at, 2);
          at += 2;
          // Only the first extent is read (an Exif item is one extent in practice); the rest are
          // skipped arithmetically, so a hostile count with zero-sized fields cannot spin the loop.
          const extents: [number, number][] = [];
          if (extentCount > 0) {
            const offset = readUint(bytes, at + indexSize, offsetSize);
            const length = readUint(bytes, at + indexSize + offsetSize, lengthSize);
            extents.push([base + offset, length]);
          }
          at += extentCount * (indexSize + offsetSize + lengthSize);
          places.set(id, { method, extents });
        }
      }
    });
  });
  const result: HeicMetadata = { xmp: [...types.values()].includes('mime') };
  for (const [id, type] of types) {
    if (type !== 'Exif') continue;
    const place = places.get(id);
    const extent = place?.extents[0];
    if (!place || !extent || place.method > 1) continue;
    const origin = place.method === 1 ? (idat?.[0] ?? -1) : 0;
    const start = origin + extent[0];
    const end = start + (extent[1] || bytes.length - start);
    if (origin < 0 || start + 4 > bytes.length || end > bytes.length) continue;
    // The item starts with the offset of the TIFF header inside it (after an optional "Exif\0\0").
    const tiff = start + 4 + readUint(bytes, start, 4);
    if (tiff < end) result.exif = bytes.subarray(tiff, end);
  }
  return result;
}

function tooLarge(width: number, height: number, limits: EngineLimits): CompressoError {
  return new CompressoError(
    'IMAGE_TOO_LARGE',
    `file: the image is ${width}×${height} pixels; this server accepts at most ${limits.maxPixels.toLocaleString('en')} pixels per frame.`,
    { details: { width, height, limit: limits.maxPixels } },
  );
}

/**
 * Decode the primary image of an HEVC-coded HEIF (iPhone photo) into RGBA pixels, in a worker thread
 * so the event loop keeps serving. libheif applies the file's rotation and mirror boxes itself, so the
 * pixels come out upright. The declared size is checked against the pixel limit before the file is
 * handed to the decoder, and again by the worker against what libheif reports.
 */
export async function decodeHeic(bytes: Uint8Array, limits: EngineLimits): Promise<HeicDecoded> {
  const declared = heicDimensions(bytes);
  if (!declared || declared.width === 0 || declared.height === 0) {
    throw new CompressoError('CORRUPT_IMAGE', 'file: the HEIC/HEIF file declares no image size.');
  }
  if (declared.width * declared.height > limits.maxPixels)
    throw tooLarge(declared.width, declared.height, limits);
  // libheif returns the coded numbers as they are; a profile (Adobe RGB, Display P3) must travel with
  // them or sharp reads them as sRGB and the colours come out flat.
  const icc = await heicInputProfile(bytes);
  inFlight++;
  submitted++;
  try {
    // The time limit covers the wait for a worker too: a queue longer than the limit fails fast
    // instead of piling up. An aborted task's worker is terminated, which frees its WASM heap.
    return await heicPool().run(
      { bytes, maxPixels: limits.maxPixels, ...(icc ? { icc } : {}) },
      { signal: AbortSignal.timeout(limits.timeoutSeconds * 1000) },
    );
  } catch (error) {
    if (error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError')) {
      throw new CompressoError(
        'PROCESSING_TIMEOUT',
        `file: decoding the HEIC/HEIF image took longer than the limit of ${limits.timeoutSeconds} s.`,
        { cause: error, details: { limit_seconds: limits.timeoutSeconds } },
      );
    }
    const message = error instanceof Error ? error.message : String(error);
    const at = message.indexOf(CODE_SEPARATOR);
    if (at < 0) throw error;
    const code = message.slice(0, at);
    if (code === 'IMAGE_TOO_LARGE') throw tooLarge(declared.width, declared.height, limits);
    throw new CompressoError('CORRUPT_IMAGE', `file: ${message.slice(at + CODE_SEPARATOR.length)}.`, {
      cause: error,
    });
  } finally {
    inFlight--;
  }
}
