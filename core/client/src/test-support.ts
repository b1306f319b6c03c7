import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

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
