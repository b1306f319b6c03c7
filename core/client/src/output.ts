import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { basename, dirname, extname, join, resolve, sep } from 'node:path';
import type { OutputFormat } from './types.ts';

export const EXTENSIONS: Record<OutputFormat, string> = {
  jpeg: 'jpg',
  png: 'png',
  webp: 'webp',
  avif: 'avif',
  gif: 'gif',
};

/** `photo.jpg` → `photo`; a name without a usable stem → `image`. */
export function stemOf(filename: string): string {
  const base = basename(filename);
  return base.slice(0, base.length - extname(base).length) || 'image';
}

export function looksLikeDirectory(path: string): boolean {
  return path.endsWith('/') || path.endsWith(sep);
}

export async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await fs.stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/** The default beside a path input: `photo.jpg` → `photo.min.webp`, never the input itself. */
export function besideInput(inputPath: string, ext: string): string {
  return join(dirname(inputPath), `${stemOf(inputPath)}.min.${ext}`);
}

/**
 * Write through a temporary file and a rename, so a reader never sees half a file and a failure
 * (full disk, killed process) leaves any earlier file at that path intact.
 */
export async function writeAtomically(path: string, data: Uint8Array): Promise<string> {
  const target = resolve(path);
  await fs.mkdir(dirname(target), { recursive: true });
  const temporary = `${target}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await fs.writeFile(temporary, data);
    await fs.rename(temporary, target);
  } catch (error) {
    await fs.rm(temporary, { force: true });
    throw error;
  }
  return target;
}
