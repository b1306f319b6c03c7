import { CompressoError, type InputFormat } from '@compresso/schema';
import sharp, { type Metadata, type Sharp } from 'sharp';
import { type Detected, detectFormat } from './detect.ts';
import { decodeHeic, type HeicMetadata, heicMetadata } from './heic.ts';
import type { EngineLimits } from './limits.ts';
import { fromSharpError } from './sharp-errors.ts';

/** An input that passed every check that can be made before decoding, ready to build pipelines from. */
export interface Source {
  bytes: Uint8Array;
  format: InputFormat;
  /** Displayed size of one frame (EXIF orientation applied). */
  width: number;
  height: number;
  frames: number;
  hasAlpha: boolean;
  orientation: number;
  /** The limits it was opened under; pipelines built from it keep to them. */
  limits: EngineLimits;
  /** sharp's header metadata; absent for HEVC HEIC, which sharp cannot parse. */
  metadata?: Metadata;
  /** For HEVC HEIC: its EXIF and XMP items, read from the container (the decoded pixels carry none). */
  heic?: HeicMetadata;
  /** A new sharp pipeline over the whole input (every frame when animated), limits applied. */
  pipeline(options?: { firstFrameOnly?: boolean }): Sharp;
}

export function checkSize(bytes: Uint8Array, limits: EngineLimits): void {
  // The engine is called from JavaScript too: a string or ArrayBuffer here is a caller's mistake that
  // deserves a message, not a TypeError deep inside detection.
  if (!(bytes instanceof Uint8Array)) {
    const received =
      bytes === null
        ? 'null'
        : typeof bytes === 'object'
          ? (bytes as object).constructor?.name
          : typeof bytes;
    throw new CompressoError(
      'INVALID_REQUEST',
      `file: expected the image as a Buffer or Uint8Array, received ${received ?? 'an object'}.`,
    );
  }
  if (bytes.length === 0) throw new CompressoError('EMPTY_FILE', 'file: the file is empty (0 bytes).');
  if (bytes.length > limits.maxInputBytes) {
    throw new CompressoError(
      'FILE_TOO_LARGE',
      `file: ${bytes.length.toLocaleString('en')} bytes is over the limit of ${limits.maxInputBytes.toLocaleString('en')} bytes.`,
      { details: { size: bytes.length, limit: limits.maxInputBytes } },
    );
  }
}

/** sharp takes whole seconds (0 would mean no limit). */
function sharpSeconds(limits: EngineLimits): number {
  return Math.max(1, Math.ceil(limits.timeoutSeconds));
}

export function checkPixels(width: number, height: number, frames: number, limits: EngineLimits): void {
  if (width * height > limits.maxPixels) {
    throw new CompressoError(
      'IMAGE_TOO_LARGE',
      `file: the image is ${width}×${height} pixels; this server accepts at most ${limits.maxPixels.toLocaleString('en')} pixels per frame.`,
      { details: { width, height, limit: limits.maxPixels } },
    );
  }
  if (frames > limits.maxFrames) {
    throw new CompressoError(
      'TOO_MANY_FRAMES',
      `file: the animation has ${frames} frames; this server accepts at most ${limits.maxFrames}.`,
      { details: { frames, limit: limits.maxFrames } },
    );
  }
  if (width * height * frames > limits.maxTotalPixels) {
    throw new CompressoError(
      'IMAGE_TOO_LARGE',
      `file: the animation has ${(width * height * frames).toLocaleString('en')} pixels over all frames; this server accepts at most ${limits.maxTotalPixels.toLocaleString('en')}.`,
      { details: { width, height, frames, limit: limits.maxTotalPixels } },
    );
  }
}

async function openHeic(bytes: Uint8Array, detected: Detected, limits: EngineLimits): Promise<Source> {
  // decodeHeic checks the declared size against maxPixels before decoding, off the main thread.
  const raw = await decodeHeic(bytes, limits);
  checkPixels(raw.width, raw.height, 1, limits);
  return {
    bytes,
    limits,
    format: detected.format,
    width: raw.width,
    height: raw.height,
    frames: 1,
    hasAlpha: raw.hasAlpha,
    // libheif has already applied the irot/imir boxes, which take precedence over any EXIF tag.
    orientation: 1,
    heic: heicMetadata(bytes),
    pipeline() {
      const p = sharp(raw.data, {
        ...(raw.tiff ? {} : { raw: { width: raw.width, height: raw.height, channels: 4 as const } }),
        limitInputPixels: limits.maxPixels,
      }).timeout({ seconds: sharpSeconds(limits) });
      // Phone photos carry an alpha channel that is opaque everywhere; JPEG output must not see one.
      return raw.hasAlpha ? p : p.removeAlpha();
    },
  };
}

/**
 * Check and open an input: size, real format (from the bytes), then the header's dimensions and frame
 * count against the limits — all before a single pixel is decoded.
 */
export async function openSource(bytes: Uint8Array, limits: EngineLimits): Promise<Source> {
  checkSize(bytes, limits);
  const detected = detectFormat(bytes);
  if (detected.hevc) return openHeic(bytes, detected, limits);

  let metadata: Metadata;
  try {
    metadata = await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch (error) {
    fromSharpError(error);
  }
  // A multi-page TIFF is a document (often a full image plus a thumbnail), not an animation: only
  // its first page is an image we compress.
  const frames = detected.format === 'tiff' ? 1 : Math.max(1, metadata.pages ?? 1);
  const frameHeight = frames > 1 ? (metadata.pageHeight ?? metadata.height) : metadata.height;
  const rawWidth = metadata.width;
  if (!rawWidth || !frameHeight)
    throw new CompressoError('CORRUPT_IMAGE', 'file: the image header has no dimensions.');
  checkPixels(rawWidth, frameHeight, frames, limits);
  const orientation = metadata.orientation ?? 1;
  const swap = orientation >= 5 && orientation <= 8;
  return {
    bytes,
    limits,
    format: detected.format,
    width: swap ? frameHeight : rawWidth,
    height: swap ? rawWidth : frameHeight,
    frames,
    hasAlpha: metadata.hasAlpha ?? false,
    orientation,
    metadata,
    pipeline(options = {}) {
      const animated = frames > 1 && !options.firstFrameOnly;
      return sharp(bytes, {
        // sharp counts every frame of an animated load together; per-frame and total limits were
        // already checked from the header, so here the total is the bound.
        limitInputPixels: animated ? limits.maxTotalPixels : limits.maxPixels,
        animated,
        failOn: 'warning',
        sequentialRead: true,
      }).timeout({ seconds: sharpSeconds(limits) });
    },
  };
}
