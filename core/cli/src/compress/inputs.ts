import { realpath, stat } from 'node:fs/promises';
import { extname, isAbsolute, resolve, sep } from 'node:path';
import { glob, isDynamicPattern } from 'tinyglobby';
import { UsageError } from '../context.ts';

/** One file to compress. */
export interface InputFile {
  /** Absolute, symlinks resolved: two spellings of one file are one input. */
  path: string;
  /**
   * The folder whose sub-folders are mirrored under --output-dir: the folder argument, or the fixed
   * part of a glob. Undefined for a file named on the command line (its output goes straight in DIR).
   */
  base?: string;
}

/**
 * Extensions looked at inside folders and glob matches. The engine decides the real format from the
 * bytes; this only keeps README.md, .DS_Store and the like out of the run without reading them.
 */
export const IMAGE_EXTENSIONS = new Set([
  '.jpg',
  '.jpeg',
  '.jpe',
  '.jfif',
  '.png',
  '.webp',
  '.avif',
  '.gif',
  '.tif',
  '.tiff',
  '.heic',
  '.heif',
  '.hif',
]);

/** `photo.min.webp`: what this command writes beside an input when no --output-dir is given. */
export const GENERATED_MARK = '.min';

export function isGeneratedName(path: string): boolean {
  const withoutExt = path.slice(0, path.length - extname(path).length);
  return withoutExt.endsWith(GENERATED_MARK);
}

function looksLikeImage(path: string): boolean {
  return IMAGE_EXTENSIONS.has(extname(path).toLowerCase());
}

/** The leading segments of a glob that contain no pattern: `shots/2024/**\/*.png` → `shots/2024`. */
export function globBase(pattern: string): string {
  const segments = pattern.split('/');
  const fixed: string[] = [];
  for (const segment of segments.slice(0, -1)) {
    if (isDynamicPattern(segment)) break;
    fixed.push(segment);
  }
  if (fixed.length === 0) return '.';
  const joined = fixed.join('/');
  return joined === '' ? '/' : joined;
}

function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep);
}

async function statOrUndefined(path: string) {
  try {
    return await stat(path);
  } catch {
    return undefined;
  }
}

export interface ExpandOptions {
  cwd: string;
  /** Absolute --output-dir: never read back as input when it lies inside a folder argument. */
  outputDir?: string;
}

/**
 * Turn the command-line arguments into the list of files, in argument order, each once.
 * Files named directly are always taken (the engine reports what is wrong with them); inside folders
 * and glob matches only image extensions are taken, and never this command's own `*.min.*` outputs.
 * An argument that names nothing is a usage error: it is almost always a typo.
 */
export async function expandInputs(args: string[], options: ExpandOptions): Promise<InputFile[]> {
  const files: InputFile[] = [];
  const seen = new Set<string>();
  const add = async (path: string, base?: string) => {
    const real = await realpath(path).catch(() => path);
    if (seen.has(real)) return;
    seen.add(real);
    files.push(base === undefined ? { path: real } : { path: real, base });
  };
  const keep = (path: string) =>
    looksLikeImage(path) &&
    !isGeneratedName(path) &&
    !(options.outputDir !== undefined && isInside(path, options.outputDir));

  for (const arg of args) {
    if (arg.trim() === '') throw new UsageError('an input argument is empty');
    const absolute = resolve(options.cwd, arg);
    const info = await statOrUndefined(absolute);
    if (info?.isFile()) {
      await add(absolute);
    } else if (info?.isDirectory()) {
      const base = await realpath(absolute);
      const found = await glob('**/*', { cwd: base, absolute: true, onlyFiles: true, dot: false });
      for (const path of found.sort()) if (keep(path)) await add(path, base);
    } else if (isDynamicPattern(arg)) {
      const matched = await glob(arg, { cwd: options.cwd, absolute: true, onlyFiles: true, dot: false });
      const images = matched.sort().filter(keep);
      if (images.length === 0) throw new UsageError(`no image file matches the pattern "${arg}"`);
      const base = await realpath(resolve(options.cwd, globBase(arg))).catch(() =>
        resolve(options.cwd, globBase(arg)),
      );
      for (const path of images) await add(path, base);
    } else if (info) {
      throw new UsageError(`"${arg}" is neither a file nor a folder`);
    } else {
      throw new UsageError(`no such file or folder: "${arg}"`);
    }
  }
  if (files.length === 0) {
    throw new UsageError(`no image files found in: ${args.map((a) => `"${a}"`).join(', ')}`);
  }
  return files;
}

export function displayPath(path: string, cwd: string): string {
  if (isInside(path, cwd) && path !== cwd) return path.slice(cwd.length + (cwd.endsWith(sep) ? 0 : 1));
  return isAbsolute(path) ? path : resolve(cwd, path);
}
