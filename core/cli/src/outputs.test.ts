import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompressoError } from '@compresso/schema';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InputFile } from './inputs.ts';
import { OutputGuard, outputPathOf, predictedFormat, writeFileAtomic } from './outputs.ts';

function input(path: string, relativeDir = ''): InputFile {
  return { path, real: path, display: path, relativeDir, explicit: true };
}

describe('outputPathOf', () => {
  const photo = input('/in/photo.jpg');

  it('writes beside the input as NAME.min.EXT by default', () => {
    expect(outputPathOf(photo, 'jpeg', { overwrite: false })).toBe('/in/photo.min.jpg');
    expect(outputPathOf(photo, 'webp', { overwrite: false })).toBe('/in/photo.min.webp');
  });

  it('names the input itself with --overwrite when the format is unchanged, a sibling otherwise', () => {
    expect(outputPathOf(photo, 'jpeg', { overwrite: true })).toBe('/in/photo.jpg');
    expect(outputPathOf(photo, 'avif', { overwrite: true })).toBe('/in/photo.avif');
  });

  it('mirrors sub-folders under -o', () => {
    const nested = input('/in/a/b/shot.png', 'a/b');
    expect(outputPathOf(nested, 'webp', { outputDir: '/out', overwrite: false })).toBe('/out/a/b/shot.webp');
    expect(outputPathOf(photo, 'gif', { outputDir: '/out', overwrite: false })).toBe('/out/photo.gif');
  });

  it("keeps the input's own extension spelling when the format is unchanged", () => {
    expect(outputPathOf(input('/in/x.JPEG'), 'jpeg', { overwrite: false })).toBe('/in/x.min.JPEG');
    expect(outputPathOf(input('/in/x.heic'), 'jpeg', { overwrite: false })).toBe('/in/x.min.jpg');
    expect(outputPathOf(input('/in/noext'), 'png', { overwrite: false })).toBe('/in/noext.min.png');
  });
});

describe('predictedFormat', () => {
  it('follows --format, else the format the name suggests, HEIC and TIFF becoming jpeg', () => {
    expect(predictedFormat(input('/a.png'), 'avif')).toBe('avif');
    expect(predictedFormat(input('/a.png'), undefined)).toBe('png');
    expect(predictedFormat(input('/a.HEIC'), undefined)).toBe('jpeg');
    expect(predictedFormat(input('/a.tif'), undefined)).toBe('jpeg');
    expect(predictedFormat(input('/a'), undefined)).toBeUndefined();
  });
});

describe('OutputGuard', () => {
  const a = input('/in/a.png');
  const b = input('/in/a.jpg');

  function codeOf(fn: () => void): string | undefined {
    try {
      fn();
      return undefined;
    } catch (error) {
      return error instanceof CompressoError ? error.code : 'not a CompressoError';
    }
  }

  it('refuses an output that is another input, even with --overwrite', () => {
    const guard = new OutputGuard([a, b], true);
    expect(codeOf(() => guard.claim(a, b.real, b.display))).toBe('CONFLICT');
  });

  it('refuses an output that is the input itself unless --overwrite', () => {
    expect(codeOf(() => new OutputGuard([a], false).claim(a, a.real, a.display))).toBe('CONFLICT');
    expect(codeOf(() => new OutputGuard([a], true).claim(a, a.real, a.display))).toBeUndefined();
  });

  it('gives an output to the first input that claims it, until released', () => {
    const guard = new OutputGuard([a, b], false);
    expect(codeOf(() => guard.claim(a, '/in/a.min.webp', 'a.min.webp'))).toBeUndefined();
    expect(codeOf(() => guard.claim(b, '/in/a.min.webp', 'a.min.webp'))).toBe('CONFLICT');
    guard.release(a, '/in/a.min.webp');
    expect(codeOf(() => guard.claim(b, '/in/a.min.webp', 'a.min.webp'))).toBeUndefined();
  });
});

describe('writeFileAtomic', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'compresso-cli-out-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('creates missing folders, replaces an existing file, keeps a given mode and leaves no temp file', async () => {
    const target = join(dir, 'deep', 'er', 'x.bin');
    await writeFileAtomic(target, new Uint8Array([1, 2, 3]));
    await writeFile(join(dir, 'keep.bin'), 'old');
    await writeFileAtomic(join(dir, 'keep.bin'), new Uint8Array([9]), 0o100640);
    expect([...(await readFile(target))]).toEqual([1, 2, 3]);
    expect([...(await readFile(join(dir, 'keep.bin')))]).toEqual([9]);
    expect((await stat(join(dir, 'keep.bin'))).mode & 0o777).toBe(0o640);
    expect((await readdir(join(dir, 'deep', 'er'))).sort()).toEqual(['x.bin']);
    expect((await readdir(dir)).sort()).toEqual(['deep', 'keep.bin']);
  });
});
