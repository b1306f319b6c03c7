import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** The shared image corpus sits beside the repository (see its README). */
export const CORPUS_DIR = resolve(import.meta.dirname, '../../../../../shared/corpus');

export function corpus(name: string): Buffer {
  return readFileSync(resolve(CORPUS_DIR, name));
}
