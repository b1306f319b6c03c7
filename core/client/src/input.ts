import { promises as fs } from 'node:fs';
import { basename, extname, resolve } from 'node:path';
import { INPUT_EXTENSIONS, INPUT_MIME_TYPES } from '@compresso/schema/wire';
import { BadRequestError, TooLargeError } from './errors.ts';
import type { ImageInput } from './types.ts';

/** An input read once into memory: what is sent, and where it came from. */
export interface PreparedInput {
  bytes: Uint8Array;
  filename: string;
  contentType: string;
  /** Absolute path when the input was a path. */
  path: string | undefined;
  /** For messages and batch results: the path, or the kind of input. */
  label: string;
}

const TYPES: Record<string, string> = Object.fromEntries(
  Object.entries(INPUT_EXTENSIONS).map(([ext, format]) => [ext, INPUT_MIME_TYPES[format]]),
);

/** The server sniffs the bytes; the type sent is only a hint. */
function typeOf(filename: string): string {
  return TYPES[extname(filename).toLowerCase()] ?? 'application/octet-stream';
}

function tooLarge(label: string, size: number | undefined, limit: number): TooLargeError {
  return new TooLargeError(
    'FILE_TOO_LARGE',
    `${label}: ${size === undefined ? 'more than' : `${size} bytes, over`} the ${limit}-byte upload limit (maxUploadBytes).`,
    { details: { limit, ...(size === undefined ? {} : { size }) } },
  );
}

function isBlob(value: unknown): value is Blob {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Blob).arrayBuffer === 'function' &&
    typeof (value as Blob).size === 'number' &&
    typeof (value as Blob).type === 'string'
  );
}

function isWebStream(value: unknown): value is ReadableStream<Uint8Array> {
  return (
    typeof value === 'object' && value !== null && typeof (value as ReadableStream).getReader === 'function'
  );
}

function isNodeStream(value: unknown): value is NodeJS.ReadableStream & AsyncIterable<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as NodeJS.ReadableStream).pipe === 'function' &&
    typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function'
  );
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value !== 'object') return typeof value;
  return (value as object).constructor?.name ?? 'object';
}

function chunkBytes(chunk: unknown): Uint8Array {
  if (chunk instanceof Uint8Array) return chunk;
  if (typeof chunk === 'string') return Buffer.from(chunk);
  throw new BadRequestError('INVALID_INPUT', `input: the stream gave a ${describe(chunk)}, expected bytes.`);
}

/** Read a stream into memory, refusing (and stopping it) as soon as it passes the limit. */
async function collect(
  chunks: AsyncIterable<unknown>,
  limit: number,
  label: string,
  stop: () => void,
): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of chunks) {
    const bytes = chunkBytes(chunk);
    total += bytes.byteLength;
    if (total > limit) {
      stop();
      throw tooLarge(label, undefined, limit);
    }
    parts.push(bytes);
  }
  return Buffer.concat(parts, total);
}

async function* webChunks(stream: ReadableStream<Uint8Array>): AsyncIterable<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Read any accepted input into bytes once. Bytes are sent again as they are on a retry, which a
 * stream could not do; the size limit keeps a stream from filling memory.
 */
export async function prepareInput(
  input: ImageInput,
  options: { maxBytes: number; filename?: string | undefined },
): Promise<PreparedInput> {
  const { maxBytes } = options;
  if (typeof input === 'string') {
    if (input === '')
      throw new BadRequestError('INVALID_INPUT', 'input: expected a file path, received an empty string.');
    const path = resolve(input);
    let size: number;
    try {
      const stat = await fs.stat(path);
      if (!stat.isFile()) throw new BadRequestError('INVALID_INPUT', `input: ${path} is not a file.`);
      size = stat.size;
    } catch (cause) {
      if (cause instanceof BadRequestError) throw cause;
      const code = (cause as { code?: string }).code;
      throw new BadRequestError(
        'INVALID_INPUT',
        code === 'ENOENT'
          ? `input: no file at ${path}.`
          : `input: cannot read ${path} (${code ?? String(cause)}).`,
        { cause },
      );
    }
    if (size > maxBytes) throw tooLarge(path, size, maxBytes);
    const bytes = await fs.readFile(path);
    const filename = options.filename ?? basename(path);
    return { bytes, filename, contentType: typeOf(filename), path, label: path };
  }
  if (input instanceof Uint8Array || input instanceof ArrayBuffer) {
    const bytes = input instanceof ArrayBuffer ? new Uint8Array(input) : input;
    const filename = options.filename ?? 'image';
    if (bytes.byteLength > maxBytes) throw tooLarge(filename, bytes.byteLength, maxBytes);
    return { bytes, filename, contentType: typeOf(filename), path: undefined, label: filename };
  }
  if (isBlob(input)) {
    const name = (input as Blob & { name?: unknown }).name;
    const filename = options.filename ?? (typeof name === 'string' && name ? basename(name) : 'image');
    if (input.size > maxBytes) throw tooLarge(filename, input.size, maxBytes);
    const bytes = new Uint8Array(await input.arrayBuffer());
    return { bytes, filename, contentType: input.type || typeOf(filename), path: undefined, label: filename };
  }
  if (isWebStream(input)) {
    const filename = options.filename ?? 'image';
    const bytes = await collect(webChunks(input), maxBytes, filename, () => {
      input.cancel().catch(() => {});
    });
    return { bytes, filename, contentType: typeOf(filename), path: undefined, label: filename };
  }
  if (isNodeStream(input)) {
    // fs.createReadStream() knows its file: use its name, as a path input would.
    const streamPath = (input as { path?: unknown }).path;
    const filename =
      options.filename ?? (typeof streamPath === 'string' && streamPath ? basename(streamPath) : 'image');
    const bytes = await collect(input, maxBytes, filename, () => {
      (input as { destroy?: () => void }).destroy?.();
    });
    return { bytes, filename, contentType: typeOf(filename), path: undefined, label: filename };
  }
  throw new BadRequestError(
    'INVALID_INPUT',
    `input: expected a file path, a Buffer/Uint8Array, a Blob or a readable stream, received ${describe(input)}.`,
  );
}
