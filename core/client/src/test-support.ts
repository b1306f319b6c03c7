import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { CompressoError } from './errors.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(here, '../../..');
export const CORPUS = resolve(REPO, '../shared/corpus');

/** A real photo from the shared corpus (112 KB JPEG, 512×512). */
export const PHOTO = join(CORPUS, 'photo-skimage-rocket.jpg');
/** A real PNG with transparency. */
export const PNG = join(CORPUS, 'graphic-skimage-text.png');
/** A real photo over 1 MiB, the test server's upload limit. */
export const BIG_PHOTO = join(CORPUS, 'photo-mate-RainDrops.jpg');

export function workDir(prefix: string): {
  dir: string;
  copy(from: string, name: string): string;
  cleanup(): void;
} {
  const dir = mkdtempSync(join(tmpdir(), `compresso-client-${prefix}-`));
  return {
    dir,
    copy(from, name) {
      const to = join(dir, name);
      copyFileSync(from, to);
      return to;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The first bytes of a real JPEG: a header that promises an image whose data never comes. */
export function truncated(path: string, keep = 2000): Buffer {
  return readFileSync(path).subarray(0, keep);
}

export const PACKAGE_DIR = resolve(here, '..');

/**
 * Build the package (scripts/build.mjs, into a private folder so it never races a reader of dist/)
 * and lay it out as an installed dependency of `appDir`, so its `exports` map is what resolves it.
 */
export function installBuild(appDir: string): void {
  const installed = join(appDir, 'node_modules/@compresso/client');
  mkdirSync(installed, { recursive: true });
  cpSync(join(PACKAGE_DIR, 'package.json'), join(installed, 'package.json'));
  const out = execFileSync(
    process.execPath,
    [join(PACKAGE_DIR, 'scripts/build.mjs'), '--out', join(installed, 'dist')],
    {
      encoding: 'utf8',
    },
  );
  if (!out.includes('build:')) throw new Error(`build failed: ${out}`);
}

/**
 * A folder for such an app inside this package's node_modules (ignored by git and biome), so the
 * optional form-data installed in the repository resolves from the build as from a user's.
 */
export function appDir(prefix: string): string {
  const cache = join(PACKAGE_DIR, 'node_modules/.cache');
  mkdirSync(cache, { recursive: true });
  return mkdtempSync(join(cache, `${prefix}-`));
}

/** The error a call rejects with, checked to be one of the client's. */
export async function rejection(promise: Promise<unknown>): Promise<CompressoError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CompressoError);
  return error as CompressoError;
}
