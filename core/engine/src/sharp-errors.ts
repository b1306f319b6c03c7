import { CompressoError } from '@compresso/schema';

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
