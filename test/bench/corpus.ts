import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

export const KINDS = ['photo', 'screenshot', 'icon', 'chart', 'graphic', 'illus'] as const;
export type Kind = (typeof KINDS)[number];

export interface CorpusImage {
  name: string;
  kind: Kind;
  bytes: Uint8Array;
  heic: boolean;
  /** Header size; 0 when sharp cannot read the header (HEVC HEIC). */
  width: number;
  height: number;
  hasAlpha: boolean;
}

const REPO_ROOT = resolve(fileURLToPath(import.meta.url), '../../..');
export const DEFAULT_CORPUS = resolve(REPO_ROOT, '../shared/corpus');

const IMAGE_FILE = /\.(png|jpe?g|heic|heif|webp|avif|gif|tiff?)$/i;

export function kindOf(name: string): Kind | undefined {
  const prefix = name.split('-')[0];
  return (KINDS as readonly string[]).includes(prefix ?? '') ? (prefix as Kind) : undefined;
}

/** Every image in the corpus whose name starts with a known kind, read into memory once. */
export async function loadCorpus(dir: string): Promise<CorpusImage[]> {
  const images: CorpusImage[] = [];
  for (const name of readdirSync(dir).sort()) {
    const kind = kindOf(name);
    if (!kind || !IMAGE_FILE.test(name)) continue;
    const bytes = new Uint8Array(readFileSync(join(dir, name)));
    const heic = /\.hei[cf]$/i.test(name);
    let width = 0;
    let height = 0;
    let hasAlpha = false;
    try {
      const m = await sharp(bytes).metadata();
      width = m.width;
      height = m.height;
      hasAlpha = m.hasAlpha;
    } catch {
      // HEVC HEIC: sharp's libvips reads the container but not the codec; the size is found later.
    }
    images.push({ name, kind, bytes, heic, width, height, hasAlpha });
  }
  return images;
}
