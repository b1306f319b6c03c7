import { promises as fs } from 'node:fs';
import { basename, dirname, extname, isAbsolute, resolve } from 'node:path';
import { INPUT_EXTENSIONS } from '@compresso/schema';
import { ToolError } from './tool-error.ts';

/** The contract's accepted input extensions (a hint only; the bytes are sniffed first). */
const IMAGE_EXTENSIONS = new Set<string>(Object.keys(INPUT_EXTENSIONS));

/** ISO-BMFF brands of AVIF and HEIF files (the bytes after `ftyp`). */
const HEIF_BRANDS = new Set(['avif', 'avis', 'heic', 'heix', 'hevc', 'hevx', 'heim', 'heis', 'mif1', 'msf1']);

/** The image format the first bytes announce, or undefined. Only a hint: the server decides. */
export function sniffImage(head: Uint8Array): string | undefined {
  const b = head;
  const ascii = (from: number, to: number) => String.fromCharCode(...b.subarray(from, to));
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 8 && b[0] === 0x89 && ascii(1, 4) === 'PNG' && b[4] === 0x0d && b[5] === 0x0a) return 'png';
  if (b.length >= 6 && (ascii(0, 6) === 'GIF87a' || ascii(0, 6) === 'GIF89a')) return 'gif';
  if (b.length >= 12 && ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'webp';
  if (
    b.length >= 4 &&
    ((ascii(0, 2) === 'II' && b[2] === 42 && b[3] === 0) ||
      (ascii(0, 2) === 'MM' && b[2] === 0 && b[3] === 42))
  ) {
    return 'tiff';
  }
  if (b.length >= 12 && ascii(4, 8) === 'ftyp' && HEIF_BRANDS.has(ascii(8, 12))) {
    return ascii(8, 12).startsWith('avi') ? 'avif' : 'heif';
  }
  return undefined;
}

function invalid(field: string, expected: string, received: string, message?: string): ToolError {
  return new ToolError(
    'INVALID_OPTION',
    message ?? `${field}: expected ${expected}, received ${JSON.stringify(received)}.`,
    { details: [{ field, expected, received }] },
  );
}

/**
 * An MCP server does not know the assistant's working directory, so a relative path would silently
 * mean "relative to wherever the client started this process": only absolute paths are accepted.
 */
function absolute(field: string, path: string): string {
  if (!isAbsolute(path)) {
    throw invalid(
      field,
      'an absolute path',
      path,
      `${field}: expected an absolute path (this server does not know your working directory), received ${JSON.stringify(path)}.`,
    );
  }
  return resolve(path);
}

export interface CheckedInput {
  path: string;
  size: number;
  /** The format the bytes announce, when they announce one. */
  sniffed: string | undefined;
}

/**
 * Absolute, exists, a regular file, and an image by its first bytes or at least by its extension
 * (a file with an image extension but unknown bytes goes to the server, whose answer names the problem).
 */
export async function checkInputFile(field: string, raw: string): Promise<CheckedInput> {
  const path = absolute(field, raw);
  let stat: Awaited<ReturnType<typeof fs.stat>>;
  try {
    stat = await fs.stat(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new ToolError('NOT_FOUND', `${field}: ${path} does not exist.`, {
        details: [{ field, expected: 'an existing image file', received: path }],
      });
    }
    throw new ToolError('INVALID_REQUEST', `${field}: ${path} cannot be read (${code ?? String(error)}).`);
  }
  if (!stat.isFile()) {
    throw invalid(
      field,
      'a file',
      path,
      `${field}: ${path} is ${stat.isDirectory() ? 'a directory' : 'not a regular file'}; expected an image file.`,
    );
  }
  if (stat.size === 0) {
    throw new ToolError('EMPTY_FILE', `${field}: ${path} is empty (0 bytes).`);
  }
  let head: Uint8Array;
  try {
    const handle = await fs.open(path, 'r');
    try {
      const buffer = new Uint8Array(16);
      const { bytesRead } = await handle.read(buffer, 0, 16, 0);
      head = buffer.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ToolError('INVALID_REQUEST', `${field}: ${path} cannot be read (${code ?? String(error)}).`);
  }
  const sniffed = sniffImage(head);
  if (!sniffed && !IMAGE_EXTENSIONS.has(extname(path).toLowerCase())) {
    throw new ToolError(
      'NOT_AN_IMAGE',
      `${field}: ${path} is not an image: its bytes are not JPEG, PNG, WebP, AVIF, GIF, TIFF or HEIC/HEIF, and its name has no image extension.`,
      { details: [{ field, expected: 'an image file', received: basename(path) }] },
    );
  }
  return { path, size: stat.size, sniffed };
}

async function statOrUndefined(path: string) {
  try {
    return await fs.stat(path);
  } catch {
    return undefined;
  }
}

export interface CheckedOutput {
  /** The absolute path given (a file, or an existing directory), or undefined for the default. */
  path: string | undefined;
  isDirectory: boolean;
}

/**
 * An explicit output path must be absolute; it may name an existing directory (the result goes
 * inside it), the input itself or another existing file only with `overwrite` (checked here, before
 * a request is spent, and again by the client right before it writes).
 */
export async function checkOutputPath(
  field: string,
  raw: string | undefined,
  input: string,
  overwrite: boolean,
): Promise<CheckedOutput> {
  if (raw === undefined) return { path: undefined, isDirectory: false };
  const path = absolute(field, raw);
  const stat = await statOrUndefined(path);
  if (stat?.isDirectory()) return { path, isDirectory: true };
  if (stat && !stat.isFile()) {
    throw invalid(
      field,
      'a file or directory path',
      path,
      `${field}: ${path} exists and is not a regular file.`,
    );
  }
  if (path === input && !overwrite) {
    throw invalid(
      field,
      'a path other than file_path',
      path,
      `${field}: ${path} is the source image; it is only replaced with overwrite: true. Choose another path, or leave ${field} out to write beside the source.`,
    );
  }
  if (stat && !overwrite) {
    throw new ToolError(
      'CONFLICT',
      `${field}: ${path} already exists; pass overwrite: true to replace it, or choose another path.`,
      {
        details: [{ field, expected: 'a path that does not exist yet (or overwrite: true)', received: path }],
      },
    );
  }
  const parent = await statOrUndefined(dirname(path));
  if (parent && !parent.isDirectory()) {
    throw invalid(field, 'a path inside a directory', path, `${field}: ${dirname(path)} is not a directory.`);
  }
  return { path, isDirectory: false };
}

/** An output directory for a batch: absolute, and a directory when it exists (created otherwise). */
export async function checkOutputDir(field: string, raw: string | undefined): Promise<string | undefined> {
  if (raw === undefined) return undefined;
  const path = absolute(field, raw);
  const stat = await statOrUndefined(path);
  if (stat && !stat.isDirectory()) {
    throw invalid(field, 'a directory', path, `${field}: ${path} exists and is not a directory.`);
  }
  return path;
}
