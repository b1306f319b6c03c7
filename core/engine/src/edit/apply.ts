import {
  CompressoError,
  type EditOperation,
  type InputFormat,
  type OutputFormat,
  parseAspectRatio,
} from '@compresso/schema';
import sharp, { type Sharp } from 'sharp';
import { type EngineLimits, withTimeLimit } from '../limits.ts';
import { pipelineFailure } from '../sharp-errors.ts';
import { openSource, type Source } from '../source.ts';

export interface EditedPixels {
  /** The edited image, as a lossless PNG for the engine's encoder to compress. */
  png: Buffer;
  width: number;
  height: number;
  /** What the input was, for the result's input facts. */
  input: { format: InputFormat; width: number; height: number; size: number };
  /** The format and quality the instruction named, when it did (the last one of each). */
  format?: OutputFormat;
  quality?: number | 'auto';
  /** The operations that changed pixels, in the order applied. */
  applied: EditOperation[];
}

interface Raw {
  data: Buffer;
  width: number;
  height: number;
  channels: 1 | 2 | 3 | 4;
}

const fromRaw = (raw: Raw, limits: EngineLimits): Sharp =>
  sharp(raw.data, {
    raw: { width: raw.width, height: raw.height, channels: raw.channels },
    limitInputPixels: limits.maxPixels,
  });

async function toRaw(pipeline: Sharp, limits: EngineLimits): Promise<Raw> {
  const { data, info } = await withTimeLimit(
    pipeline.raw().toBuffer({ resolveWithObject: true }),
    limits.timeoutSeconds,
  );
  return { data, width: info.width, height: info.height, channels: info.channels };
}

function checkOutputSize(width: number, height: number, limits: EngineLimits): void {
  if (width * height > limits.maxPixels)
    throw new CompressoError(
      'INVALID_REQUEST',
      `instruction: the result would be ${width}×${height} pixels; this server makes at most ${limits.maxPixels.toLocaleString('en')} pixels.`,
      {
        details: [
          {
            field: 'instruction',
            expected: `a result of at most ${limits.maxPixels} pixels`,
            received: `${width}×${height}`,
          },
        ],
      },
    );
}

/**
 * One operation on decoded pixels. Each runs as its own sharp pass over raw pixels: sharp orders the
 * operations of one pipeline its own way (rotate before resize, grayscale last), and an instruction
 * means them in the order it says.
 */
function step(raw: Raw, op: EditOperation, limits: EngineLimits): Sharp | undefined {
  const p = fromRaw(raw, limits);
  switch (op.op) {
    case 'resize': {
      let width = op.width;
      let height = op.height;
      if (op.scale !== undefined) {
        width = Math.max(1, Math.round(raw.width * op.scale));
        height = Math.max(1, Math.round(raw.height * op.scale));
      } else if (width !== undefined && height === undefined) {
        height = Math.max(1, Math.round((raw.height * width) / raw.width));
      } else if (height !== undefined && width === undefined) {
        width = Math.max(1, Math.round((raw.width * height) / raw.height));
      } else if (width !== undefined && height !== undefined) {
        // Both: fit inside the box, keeping the ratio (never distort).
        const factor = Math.min(width / raw.width, height / raw.height);
        width = Math.max(1, Math.round(raw.width * factor));
        height = Math.max(1, Math.round(raw.height * factor));
      }
      checkOutputSize(width!, height!, limits);
      return p.resize({ width, height, fit: 'fill' });
    }
    case 'crop': {
      const ratio = parseAspectRatio(op.aspect)!;
      const target = ratio.width / ratio.height;
      let width = raw.width;
      let height = Math.round(raw.width / target);
      if (height > raw.height) {
        height = raw.height;
        width = Math.round(raw.height * target);
      }
      width = Math.max(1, Math.min(raw.width, width));
      height = Math.max(1, Math.min(raw.height, height));
      return p.extract({
        left: Math.floor((raw.width - width) / 2),
        top: Math.floor((raw.height - height) / 2),
        width,
        height,
      });
    }
    case 'rotate': {
      const transparent = raw.channels === 2 || raw.channels === 4;
      return p.rotate(op.degrees, { background: transparent ? { r: 0, g: 0, b: 0, alpha: 0 } : '#ffffff' });
    }
    case 'flip':
      return op.direction === 'vertical' ? p.flip() : p.flop();
    case 'grayscale':
      return p.grayscale();
    case 'blur':
      return p.blur(op.sigma);
    case 'sharpen':
      return p.sharpen({ sigma: op.sigma });
    case 'brightness':
      return p.modulate({ brightness: op.factor });
    case 'contrast':
      // Around mid-grey: out = a·in + 128·(1 − a), so 128 stays 128 and the ends move apart or together.
      return p.linear(op.factor, 128 * (1 - op.factor));
    case 'saturation':
      return p.modulate({ saturation: op.factor });
    default:
      return undefined;
  }
}

/**
 * Apply parsed operations to an image: decoded once (orientation applied, first frame of an
 * animation, colours in sRGB), each pixel operation in order, then written as a lossless PNG the
 * engine compresses to the requested format and quality. Metadata does not survive an edit.
 */
export async function applyEdits(
  input: Uint8Array,
  operations: readonly EditOperation[],
  limits: EngineLimits,
): Promise<EditedPixels> {
  const source: Source = await openSource(input, limits);
  let raw: Raw;
  try {
    raw = await toRaw(source.pipeline({ firstFrameOnly: true }).autoOrient().toColourspace('srgb'), limits);
  } catch (error) {
    throw await pipelineFailure(error, source);
  }
  const applied: EditOperation[] = [];
  let format: OutputFormat | undefined;
  let quality: number | 'auto' | undefined;
  for (const op of operations) {
    if (op.op === 'format') {
      format = op.format;
      continue;
    }
    if (op.op === 'quality') {
      quality = op.quality;
      continue;
    }
    const pipeline = step(raw, op, limits);
    if (!pipeline) continue;
    raw = await toRaw(pipeline, limits);
    applied.push(op);
  }
  const png = await withTimeLimit(
    fromRaw(raw, limits).png({ compressionLevel: 1 }).toBuffer(),
    limits.timeoutSeconds,
  );
  return {
    png,
    width: raw.width,
    height: raw.height,
    input: { format: source.format, width: source.width, height: source.height, size: input.length },
    ...(format ? { format } : {}),
    ...(quality !== undefined ? { quality } : {}),
    applied,
  };
}
