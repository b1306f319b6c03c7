import { CompressoError } from '@compresso/schema';
import type { Source } from './source.ts';

/**
 * Messages libvips gives when the *input* is at fault: its loaders (VipsJpeg, vipspng, gifload,
 * webp, heif, tiff) and the generic buffer checks. Kept specific on purpose: a broad word such as
 * "invalid" also appears in our own programming errors, which must stay 500s.
 */
const INPUT_FAULT =
  /premature end|truncated|corrupt|unexpected end|out of data|not enough|read error|improper|damaged|bad seek|Invalid input|Input buffer|VipsJpeg|vipspng|libspng|VipsForeignLoad|gifload|webp:|heif:|tiff|jpeg2000/i;

/**
 * Turn a libvips/sharp failure on user input into a 4xx CompressoError. Anything we do not
 * recognise is re-thrown as is: an unknown failure is our bug, and must surface as a 500.
 * Only called after detectFormat accepted the bytes, so "unsupported image format" here means a
 * file that starts like an image and then falls apart.
 */
export function fromSharpError(error: unknown): never {
  if (error instanceof CompressoError) throw error;
  const message = error instanceof Error ? error.message : String(error);
  if (/exceeds pixel limit/i.test(message)) {
    throw new CompressoError('IMAGE_TOO_LARGE', 'file: the image has more pixels than this server accepts.', {
      cause: error,
    });
  }
  const tooLargeFor = /too large for the (\w+) format/i.exec(message);
  if (tooLargeFor) {
    throw new CompressoError(
      'IMAGE_TOO_LARGE',
      `file: the image is too large for ${tooLargeFor[1]} output; choose another output_format or set max_dimension.`,
      { cause: error },
    );
  }
  if (/timeout/i.test(message)) {
    throw new CompressoError(
      'PROCESSING_TIMEOUT',
      'file: processing the image took longer than the time limit.',
      { cause: error },
    );
  }
  if (/unsupported image format/i.test(message)) {
    throw new CompressoError(
      'CORRUPT_IMAGE',
      'file: the image data is damaged or incomplete (its header names a known format, but it cannot be read).',
      { cause: error },
    );
  }
  if (INPUT_FAULT.test(message)) {
    throw new CompressoError(
      'CORRUPT_IMAGE',
      `file: the image data is damaged or incomplete (${reason(message)}).`,
      {
        cause: error,
      },
    );
  }
  throw error;
}

/**
 * The error to throw for a pipeline (decode → resize → encode) that failed on an input whose header
 * already read: a 4xx when the input is at fault, else the original error (a 500: our bug, an outage).
 *
 * The message alone cannot say which. libvips keeps one error buffer for the whole process, and every
 * sharp call clears it when it ends; a decode that fails while other images are being processed can
 * find its message gone, and sharp then reports "Warning treated as error due to failOn setting"
 * ("Unknown error" without failOn) — measured: 65 of 200 truncated JPEGs beside tiny AVIF encodes, 1–2%
 * of truncated uploads under the soak's mix. So an error the message does not explain is judged by the
 * input: decode every pixel of it once more on its own, failing on warnings as the pipeline does. If
 * that fails, the input cannot be decoded — CORRUPT_IMAGE (4xx), whatever text either failure carried.
 * If it decodes, the input was fine and the original error is thrown. The re-decode runs only on this
 * failure path, and streams the pixels, so it holds no more memory than the failed pipeline.
 */
export async function pipelineFailure(error: unknown, source: Pick<Source, 'pipeline'>): Promise<unknown> {
  const mapped = mappedOrUndefined(error);
  if (mapped) return mapped;
  try {
    // Through toBuffer, not stats() or metadata(): those report success when the message was wiped
    // (they have no fallback text), the pipeline never does. Shrinking still decodes every pixel (a
    // JPEG's shrink-on-load reads its whole entropy stream) but keeps the output a few KB.
    await source.pipeline().resize(64, 64, { fit: 'inside' }).raw().toBuffer();
  } catch (recheck) {
    // The cause stays the pipeline's own error, so a log shows what was reclassified.
    const again = mappedOrUndefined(recheck);
    if (again && again.code !== 'CORRUPT_IMAGE') return again;
    const why = again ? reason(recheck instanceof Error ? recheck.message : String(recheck)) : '';
    return new CompressoError(
      'CORRUPT_IMAGE',
      `file: the image data is damaged or incomplete (${why || 'its header reads, but its pixels do not decode'}).`,
      { cause: error },
    );
  }
  return error;
}

/** fromSharpError's 4xx for `error`, or undefined when it does not recognise it. */
function mappedOrUndefined(error: unknown): CompressoError | undefined {
  try {
    fromSharpError(error);
  } catch (thrown) {
    if (thrown !== error && thrown instanceof CompressoError) return thrown;
    if (thrown instanceof CompressoError && thrown.status < 500) return thrown;
  }
  return undefined;
}

/**
 * The most telling line of a libvips message. libvips stacks one line per attempt (a truncated AVIF
 * gives a dozen "bad seek" lines before the real reason), so the last distinct line says most.
 */
function reason(text: string): string {
  const lines = text
    .replace(/^Input buffer has corrupt header:\s*/i, '')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const line = lines.at(-1) ?? 'corrupt header';
  return line.length > 160 ? `${line.slice(0, 157)}...` : line;
}
