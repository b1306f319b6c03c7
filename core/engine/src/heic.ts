import { createRequire } from 'node:module';
import { CompressoError } from '@compresso/schema';
import type { EngineLimits } from './limits.ts';

export interface RawImage {
  width: number;
  height: number;
  channels: 4;
  data: Uint8Array;
}

interface HeicImage {
  width: number;
  height: number;
  decode(): Promise<{ width: number; height: number; data: Uint8ClampedArray }>;
}
type HeicAll = ((input: { buffer: Uint8Array }) => Promise<HeicImage[] & { dispose(): void }>) & {};

let decoder: HeicAll | undefined;

/** heic-decode (libheif + libde265 compiled to WebAssembly) is large: load it on the first HEIC only. */
function loadDecoder(): HeicAll {
  if (!decoder) {
    const require = createRequire(import.meta.url);
    decoder = (require('heic-decode') as { all: HeicAll }).all;
  }
  return decoder;
}

/**
 * Decode the primary image of an HEVC-coded HEIF (iPhone photo) into RGBA pixels. libheif applies the
 * file's rotation and mirror boxes itself, so the pixels come out upright. The dimensions are checked
 * against the pixel limit before any pixel is decoded.
 */
export async function decodeHeic(bytes: Uint8Array, limits: EngineLimits): Promise<RawImage> {
  let images: Awaited<ReturnType<HeicAll>>;
  try {
    images = await loadDecoder()({ buffer: bytes });
  } catch (error) {
    throw new CompressoError('CORRUPT_IMAGE', 'file: the HEIC/HEIF image could not be read.', {
      cause: error,
    });
  }
  try {
    const primary = images[0];
    if (!primary) throw new CompressoError('CORRUPT_IMAGE', 'file: the HEIC/HEIF file holds no image.');
    if (primary.width * primary.height > limits.maxPixels) {
      throw new CompressoError(
        'IMAGE_TOO_LARGE',
        `file: the image is ${primary.width}×${primary.height} pixels; this server accepts at most ${limits.maxPixels.toLocaleString('en')} pixels.`,
      );
    }
    const { width, height, data } = await primary.decode();
    return {
      width,
      height,
      channels: 4,
      data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    };
  } catch (error) {
    if (error instanceof CompressoError) throw error;
    throw new CompressoError('CORRUPT_IMAGE', 'file: the HEIC/HEIF image could not be decoded.', {
      cause: error,
    });
  } finally {
    images.dispose();
  }
}
