import { randomBytes } from 'node:crypto';
import { chmod, mkdir, realpath, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, extname, join, resolve } from 'node:path';
import {
  CompressoError,
  defaultOutputFormat,
  FILE_EXTENSIONS,
  INPUT_EXTENSIONS,
  type InputExtension,
  type InputFormat,
  type OutputFormat,
} from '@compresso/schema';
import type { InputFile } from './inputs.ts';

/** Suffix of outputs written beside their inputs: `photo.jpg` → `photo.min.jpg`. */
export const BESIDE_SUFFIX = '.min';

/** The format a file name suggests, or undefined; only a guess, the engine reads the bytes. */
export function formatOfName(path: string): InputFormat | undefined {
  const ext = extname(path).toLowerCase();
  return Object.hasOwn(INPUT_EXTENSIONS, ext) ? INPUT_EXTENSIONS[ext as InputExtension] : undefined;
}

export interface OutputRules {
  /** Absolute output folder (-o), or undefined to write beside each input. */
  outputDir?: string;
  /** --overwrite: name outputs exactly like their inputs, so an unchanged format replaces the input. */
  overwrite: boolean;
}

/**
 * The output file of an input in a given format:
 * - with -o DIR: DIR/<sub-folders of a folder or glob input>/NAME.EXT
 * - beside the input: NAME.min.EXT, or NAME.EXT with --overwrite (in place when the format is unchanged)
 * EXT keeps the input's own extension (`.jpeg`, `.JPG`) when the format is unchanged, else it is the
 * format's usual one (jpg, png, webp, avif, gif).
 */
export function outputPathOf(input: InputFile, format: OutputFormat, rules: OutputRules): string {
  const ext = extname(input.path);
  const name = basename(input.path, ext);
  const sameFormat = formatOfName(input.path) === format;
  const outExt = sameFormat ? ext : `.${FILE_EXTENSIONS[format]}`;
  if (rules.outputDir) return join(rules.outputDir, input.relativeDir, name + outExt);
  return join(dirname(input.path), name + (rules.overwrite ? '' : BESIDE_SUFFIX) + outExt);
}

/** The output format the engine will most likely choose, when it can be told from the name alone. */
export function predictedFormat(
  input: InputFile,
  requested: OutputFormat | undefined,
): OutputFormat | undefined {
  if (requested) return requested;
  const guessed = formatOfName(input.path);
  return guessed ? defaultOutputFormat(guessed) : undefined;
}

/** Canonical form of a path that may not exist yet: its folder's real path plus its name. */
export async function canonicalOutput(path: string): Promise<string> {
  try {
    return join(await realpath(dirname(path)), basename(path));
  } catch {
    return resolve(path);
  }
}

/**
 * Guards every write of one run: no output may land on an input other than its own, on its own input
 * without --overwrite, or on the output of another input. Claims are made in input order before any
 * work starts, so which file loses a clash does not depend on which finished first.
 */
export class OutputGuard {
  readonly #inputs: Map<string, InputFile>;
  readonly #claims = new Map<string, InputFile>();
  readonly #overwrite: boolean;

  constructor(inputs: readonly InputFile[], overwrite: boolean) {
    this.#inputs = new Map(inputs.map((f) => [f.real, f]));
    this.#overwrite = overwrite;
  }

  /** Throws CONFLICT when `input` may not write `outputReal`; otherwise reserves it for `input`. */
  claim(input: InputFile, outputReal: string, shown: string): void {
    const owner = this.#inputs.get(outputReal);
    if (owner && owner !== input) {
      throw new CompressoError(
        'CONFLICT',
        `the output ${shown} would overwrite another input (${owner.display}); choose another --output-dir or --format.`,
      );
    }
    if (owner === input && !this.#overwrite) {
      throw new CompressoError(
        'CONFLICT',
        `the output ${shown} is the input itself; pass --overwrite to replace inputs in place.`,
      );
    }
    const claimant = this.#claims.get(outputReal);
    if (claimant && claimant !== input) {
      throw new CompressoError(
        'CONFLICT',
        `the output ${shown} is also the output of ${claimant.display}; rename one of them or use --format.`,
      );
    }
    this.#claims.set(outputReal, input);
  }

  release(input: InputFile, outputReal: string): void {
    if (this.#claims.get(outputReal) === input) this.#claims.delete(outputReal);
  }
}

/** Temporary files being written, removed if the process is interrupted. */
export const pendingWrites = new Set<string>();

/**
 * Write through a temporary file in the same folder and rename it into place, so an interrupted run
 * never leaves a half-written image — above all not in place of an original under --overwrite.
 */
export async function writeFileAtomic(path: string, data: Uint8Array, mode?: number): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const temp = join(dir, `.${basename(path)}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`);
  pendingWrites.add(temp);
  try {
    await writeFile(temp, data, { flag: 'wx' });
    // A file replaced in place keeps its permissions.
    if (mode !== undefined) await chmod(temp, mode & 0o7777);
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  } finally {
    pendingWrites.delete(temp);
  }
}
