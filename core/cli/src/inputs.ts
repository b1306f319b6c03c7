import type { Dirent } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import { basename, dirname, extname, isAbsolute, join, relative, resolve } from 'node:path';
import { INPUT_EXTENSIONS } from '@compresso/schema';
import { glob, isDynamicPattern } from 'tinyglobby';

/** One file to compress, with what is needed to name its output and to show it to the user. */
export interface InputFile {
  /** Absolute path as found (symlinks not resolved), for reading and for naming the output. */
  path: string;
  /** Canonical path (symlinks resolved), for telling whether two paths are the same file. */
  real: string;
  /** The path as shown to the user: relative to the working directory when inside it. */
  display: string;
  /** Sub-folder below the folder or glob base it came from ('' for file arguments), mirrored under -o. */
  relativeDir: string;
  /** True when named as an argument; such a file is compressed whatever its name or extension. */
  explicit: boolean;
}

export interface Expansion {
  files: InputFile[];
  /** Arguments that are neither an existing path nor a glob pattern. */
  missing: string[];
  /** Folder and glob arguments in which no image file was found. */
  empty: string[];
  /** Files passed over inside folders and globs (not images by extension, hidden, or earlier outputs). */
  skipped: number;
}

export interface ExpandOptions {
  cwd: string;
  /** Search sub-folders of folder arguments (glob patterns say their own depth). */
  recursive: boolean;
  /** Absolute output folder: never searched for inputs, so outputs of an earlier run are not re-read. */
  outputDir?: string;
  /**
   * Skip NAME.min.EXT files found in folders and globs: when outputs are written beside the inputs,
   * these are outputs of an earlier run, and compressing them again would only make NAME.min.min.EXT.
   */
  skipMinified: boolean;
}

/**
 * Extensions taken from folders and globs. Only a cheap name test is possible before reading a file;
 * the engine still decides the format from the bytes, so a mislabelled file fails with a clear code.
 */
const IMAGE_EXTENSIONS = new Set<string>(Object.keys(INPUT_EXTENSIONS));

export function hasImageExtension(path: string): boolean {
  return IMAGE_EXTENSIONS.has(extname(path).toLowerCase());
}

function isMinified(path: string): boolean {
  const name = basename(path, extname(path));
  return name.toLowerCase().endsWith('.min');
}

/** Relative to the working directory when inside it, else absolute. */
export function displayPath(cwd: string, path: string): string {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
}

function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

async function canonical(path: string): Promise<string> {
  try {
    return await realpath(path);
  } catch {
    return resolve(path);
  }
}

/** The leading folders of a pattern that hold no glob syntax: `photos/2024/**\/*.jpg` → `photos/2024`. */
export function globBase(pattern: string): string {
  const segments = pattern.split('/');
  const fixed: string[] = [];
  for (const segment of segments.slice(0, -1)) {
    if (isDynamicPattern(segment)) break;
    fixed.push(segment);
  }
  return fixed.join('/') || '.';
}

async function walk(
  root: string,
  options: ExpandOptions,
  outputReal: string | undefined,
  found: string[],
): Promise<number> {
  let skipped = 0;
  const visit = async (dir: string): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      // An unreadable sub-folder is passed over like any other file the command cannot use.
      skipped++;
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.name.startsWith('.')) {
        skipped++;
        continue;
      }
      let isDir = entry.isDirectory();
      let isFile = entry.isFile();
      if (entry.isSymbolicLink()) {
        // Linked files are followed; linked folders are not, so a link loop cannot run forever.
        const target = await stat(path).catch(() => undefined);
        isFile = target?.isFile() ?? false;
        isDir = false;
      }
      if (isDir) {
        if (!options.recursive) continue;
        if (outputReal && (await canonical(path)) === outputReal) continue;
        await visit(path);
      } else if (isFile && hasImageExtension(path) && !(options.skipMinified && isMinified(path))) {
        found.push(path);
      } else {
        skipped++;
      }
    }
  };
  await visit(root);
  return skipped;
}

/**
 * Turn the command's arguments into the list of files to compress, in argument order, each file
 * once. Only names are collected here; no image is read until its turn comes.
 */
export async function expandInputs(args: readonly string[], options: ExpandOptions): Promise<Expansion> {
  const expansion: Expansion = { files: [], missing: [], empty: [], skipped: 0 };
  const seen = new Set<string>();
  const outputReal = options.outputDir ? await canonical(options.outputDir) : undefined;

  const add = async (path: string, relativeDir: string, explicit: boolean): Promise<boolean> => {
    const real = await canonical(path);
    if (seen.has(real)) return false;
    seen.add(real);
    expansion.files.push({
      path,
      real,
      display: displayPath(options.cwd, path),
      relativeDir: relativeDir === '.' ? '' : relativeDir,
      explicit,
    });
    return true;
  };

  for (const arg of args) {
    const absolute = resolve(options.cwd, arg);
    const info = await stat(absolute).catch(() => undefined);
    if (info?.isDirectory()) {
      const found: string[] = [];
      expansion.skipped += await walk(absolute, options, outputReal, found);
      if (found.length === 0) expansion.empty.push(arg);
      for (const path of found) await add(path, dirname(relative(absolute, path)), false);
    } else if (info) {
      await add(absolute, '', true);
    } else if (isDynamicPattern(arg)) {
      const base = resolve(options.cwd, globBase(arg));
      const matches = await glob(arg, {
        cwd: options.cwd,
        absolute: true,
        onlyFiles: true,
        expandDirectories: false,
      });
      matches.sort();
      let added = 0;
      for (const match of matches) {
        const path = resolve(match);
        if (!hasImageExtension(path) || (options.skipMinified && isMinified(path))) {
          expansion.skipped++;
          continue;
        }
        if (outputReal && isInside(outputReal, await canonical(path))) {
          expansion.skipped++;
          continue;
        }
        if (await add(path, dirname(relative(base, path)), false)) added++;
      }
      if (added === 0) expansion.empty.push(arg);
    } else {
      expansion.missing.push(arg);
    }
  }
  // Mirrored sub-folders must stay inside the output folder even for a glob such as `../x/*.png`.
  for (const file of expansion.files) {
    if (file.relativeDir.startsWith('..') || isAbsolute(file.relativeDir)) file.relativeDir = '';
  }
  return expansion;
}
