import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ExpandOptions, expandInputs, globBase } from './inputs.ts';

// Names only: expansion never reads image bytes, so empty files are enough here.
const TREE = [
  'a.jpg',
  'a.min.jpg',
  'notes.txt',
  '.hidden.png',
  'sub/b.PNG',
  'sub/c.heic',
  'sub/deeper/d.webp',
  'out/old.webp',
  '.git/e.png',
  'docs/readme.txt',
];

describe('expandInputs', () => {
  let cwd: string;
  beforeAll(async () => {
    cwd = await mkdtemp(join(tmpdir(), 'compresso-cli-in-'));
    for (const file of TREE) {
      await mkdir(join(cwd, file, '..'), { recursive: true });
      await writeFile(join(cwd, file), '');
    }
    await symlink(join(cwd, 'sub'), join(cwd, 'loop'));
  });
  afterAll(async () => {
    await rm(cwd, { recursive: true, force: true });
  });

  const beside = (extra: Partial<ExpandOptions> = {}): ExpandOptions => ({
    recursive: true,
    skipMinified: true,
    ...extra,
    cwd,
  });
  const shown = async (args: string[], options: ExpandOptions) => {
    const expansion = await expandInputs(args, options);
    return { ...expansion, files: expansion.files.map((f) => [f.display, f.relativeDir]) };
  };

  it('walks a folder recursively, images only, skipping hidden entries, earlier outputs and linked folders', async () => {
    const result = await shown(['.'], beside());
    expect(result.files).toEqual([
      ['a.jpg', ''],
      ['out/old.webp', 'out'],
      ['sub/b.PNG', 'sub'],
      ['sub/c.heic', 'sub'],
      ['sub/deeper/d.webp', 'sub/deeper'],
    ]);
    // a.min.jpg, notes.txt, .hidden.png, .git, docs/readme.txt, the loop link
    expect(result.skipped).toBe(6);
  });

  it('never searches the output folder, and keeps NAME.min.EXT when writing elsewhere', async () => {
    const result = await shown(['.'], beside({ outputDir: join(cwd, 'out'), skipMinified: false }));
    expect(result.files.map(([f]) => f)).toEqual([
      'a.jpg',
      'a.min.jpg',
      'sub/b.PNG',
      'sub/c.heic',
      'sub/deeper/d.webp',
    ]);
  });

  it('stays in the folder with recursive off', async () => {
    const result = await shown(['sub'], beside({ recursive: false }));
    expect(result.files).toEqual([
      ['sub/b.PNG', ''],
      ['sub/c.heic', ''],
    ]);
  });

  it('expands globs relative to their fixed leading folders and lists each file once', async () => {
    const result = await shown(['sub/**/*.{png,PNG,webp}', 'sub/b.PNG'], beside());
    expect(result.files).toEqual([
      ['sub/b.PNG', ''],
      ['sub/deeper/d.webp', 'deeper'],
    ]);
  });

  it('takes explicit files whatever their name, and reports what matched nothing', async () => {
    const result = await shown(['notes.txt', 'missing.jpg', 'nothing/*.png', 'docs', '.git'], beside());
    // A hidden folder named explicitly is searched: only hidden entries inside folders are passed over.
    expect(result.files).toEqual([
      ['notes.txt', ''],
      ['.git/e.png', ''],
    ]);
    expect(result.missing).toEqual(['missing.jpg']);
    expect(result.empty).toEqual(['nothing/*.png', 'docs']);
  });

  it('finds the fixed part of a glob', () => {
    expect(globBase('photos/2024/**/*.jpg')).toBe('photos/2024');
    expect(globBase('*.png')).toBe('.');
    expect(globBase('a/{b,c}/*.gif')).toBe('a');
  });
});
