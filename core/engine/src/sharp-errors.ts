import { CompressoError } from '@compresso/schema';

/**
 * Turn a libvips/sharp failure on user input into a 4xx CompressoError. Anything we do not
 * recognise is re-thrown as is: an unknown failure is our bug, and must surface as a 500.
 */
export function fromSharpError(error: unknown): never {
  if (error instanceof CompressoError) throw error;
  const message = error instanceof Error ? error.message : String(error);
  if (/exceeds pixel limit/i.test(message)) {
    throw new CompressoError('IMAGE_TOO_LARGE', 'file: the image has more pixels than this server accepts.', {
      cause: error,
    });
  }
  if (/timeout/i.test(message)) {
    throw new CompressoError(
      'PROCESSING_TIMEOUT',
      'file: processing the image took longer than the time limit.',
      { cause: error },
    );
  }
  if (/unsupported image format/i.test(message)) {
    throw new CompressoError('NOT_AN_IMAGE', 'file: the data is not an image Compresso recognises.', {
      cause: error,
    });
  }
  if (
    /premature end|truncated|corrupt|invalid|bad |not a|unexpected end|read error|improper|out of data|Not enough|failed to read|decode|load|damaged|error in|vipspng|vipsjpeg|gifload|webp|heif|tiff/i.test(
      message,
    )
  ) {
    throw new CompressoError(
      'CORRUPT_IMAGE',
      `file: the image data is damaged or incomplete (${firstLine(message)}).`,
      {
        cause: error,
      },
    );
  }
  throw error;
}

function firstLine(text: string): string {
  const line = text.split('\n').find((l) => l.trim()) ?? text;
  return line.length > 160 ? `${line.slice(0, 157)}...` : line.trim();
}
