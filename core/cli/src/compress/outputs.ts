import { randomBytes } from 'node:crypto';
import { mkdir, realpath, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, extname, join, relative } from 'node:path';
import { CompressoError, FILE_EXTENSIONS, normalizeOutputFormat, type OutputFormat } from '@compresso/schema';
import { GENERATED_MARK, type InputFile } from './inputs.ts';

export interface NamingOptions {
  /** Absolute --output-dir, when given. */
  outputDir?: string;
  overwrite: boolean;
}

/**
 * Where one output goes (the rule the README documents):
 * - with --output-dir DIR: DIR/<sub-folders of a folder or glob input>/<name>.<ext>;
 * - without it: beside the input as <name>.min.<ext>, so an input is never replaced by accident;
 * - with --overwrite and no DIR: the input itself when the format is unchanged, else <name>.<ext>
 *   beside it (the caller still refuses to replace a different input).
 * <ext> is the output format's usual extension, except that an input already named with an extension
 * of that format keeps its spelling (photo.JPEG stays photo.JPEG, not photo.jpg).
 */
export function outputPathFor(
  input: InputFile,
  format: OutputFormat,
  sameFormat: boolean,
  options: NamingOptions,
): string {
  const inputExt = extname(input.path);
  const stem = basename(input.path, inputExt);
  const ext =
    normalizeOutputFormat(inputExt.slice(1)) === format ? inputExt.slice(1) : FILE_EXTENSIONS[format];
  if (options.outputDir !== undefined) {
    const sub = input.base === undefined ? '' : dirname(relative(input.base, input.path));
    return join(options.outputDir, sub, `${stem}.${ext}`);
  }
  const dir = dirname(input.path);
  if (options.overwrite) return sameFormat ? input.path : join(dir, `${stem}.${ext}`);
  return join(dir, `${stem}${GENERATED_MARK}.${ext}`);
}

/** The path with its folder's symlinks resolved, so it compares equal to the resolved input paths. */
export async function canonicalPath(path: string): Promise<string> {
  const dir = await realpath(dirname(path)).catch(() => dirname(path));
  return join(dir, basename(path));
}

/**
 * Write through a temporary file in the same folder and rename it over the target: a crash or a full
 * disk never leaves a half-written image, and an input replaced in place is either old or new.
 */
export async function writeAtomically(path: string, data: Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await writeFile(temporary, data);
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/** Map a file-system failure to the error vocabulary every Compresso surface shares. */
export function fromFsError(error: unknown, action: 'read' | 'write', path: string): CompressoError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const reason = error instanceof Error ? error.message : String(error);
  if (code === 'ENOENT' && action === 'read') {
    return new CompressoError('MISSING_FILE', `the file disappeared before it could be read`, {
      cause: error,
    });
  }
  if (code === 'EACCES' || code === 'EPERM') {
    return new CompressoError('FORBIDDEN', `permission denied to ${action} ${path}`, { cause: error });
  }
  return new CompressoError('INTERNAL_ERROR', `could not ${action} ${path}: ${reason}`, { cause: error });
}
