import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_QUALITY, MAX_DIMENSION_LIMIT } from '@compresso/schema';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from './program.ts';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '../../..');
const corpus = resolve(repoRoot, '../shared/corpus');

// Small corpus files only: a 112 kB JPEG, two 87 kB PNG icons and a 50 kB HEIC keep the suite fast.
const JPEG = 'photo-skimage-rocket.jpg';
const PNG_A = 'icon-oxygen-folder-red.png';
const PNG_B = 'icon-oxygen-konqueror.png';
const HEIC = 'photo-heic-rocket.heic';

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

function sink(isTTY = false) {
  let text = '';
  return {
    isTTY,
    columns: 100,
    write(chunk: string) {
      text += chunk;
      return true;
    },
    get text() {
      return text;
    },
  };
}

/** The real program, in-process, with captured output and its own working directory. */
async function cli(args: string[], cwd: string, options: { tty?: boolean } = {}): Promise<Outcome> {
  const stdout = sink();
  const stderr = sink(options.tty ?? false);
  const code = await run(args, { stdout, stderr, cwd });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

function compress(args: string[], cwd: string, options: { tty?: boolean } = {}): Promise<Outcome> {
  return cli(['compress', ...args], cwd, options);
}

interface JsonReport {
  files: Record<string, unknown>[];
  errors: { input: string; code: string; message: string }[];
  totals: Record<string, number>;
}

function json(outcome: Outcome): JsonReport {
  return JSON.parse(outcome.stdout) as JsonReport;
}

async function sha(path: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

let root: string;
let dirCount = 0;

/** A fresh folder holding copies of the named corpus files (and any extra files given as text). */
async function workspace(files: string[], extra: Record<string, string> = {}): Promise<string> {
  const dir = join(root, `ws${++dirCount}`);
  await mkdir(dir, { recursive: true });
  for (const name of files) await copyFile(join(corpus, name), join(dir, name));
  for (const [name, text] of Object.entries(extra)) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), text);
  }
  return dir;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'compresso-cli-'));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('compresso compress', () => {
  it.each([
    ['webp', 'webp', 'webp'],
    ['avif', 'avif', 'heif'],
    ['jpeg', 'jpg', 'jpeg'],
    ['png', 'png', 'png'],
  ])('writes decodable %s files into -o DIR', async (format, ext, sharpFormat) => {
    const dir = await workspace([JPEG]);
    // A resized output keeps the AVIF and palette-PNG encodes quick.
    const out = await compress([JPEG, '-o', 'out', '-f', format, '--max-dimension', '256'], dir);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const meta = await sharp(join(dir, 'out', `photo-skimage-rocket.${ext}`)).metadata();
    expect(meta.format).toBe(sharpFormat);
    expect(Math.max(meta.width, meta.height)).toBe(256);
    expect(out.stdout).toMatch(/1 file compressed/);
  });

  it('prints one JSON document with per-file results, InfoResult fields, output paths and totals', async () => {
    const dir = await workspace([JPEG, PNG_A, HEIC]);
    const out = await compress([JPEG, PNG_A, HEIC, '-o', 'out', '--json', '--max-dimension', '300'], dir);
    expect(out.code).toBe(0);
    expect(out.stderr).toBe('');
    const report = json(out);
    expect(report.errors).toEqual([]);
    expect(report.files.map((f) => f.output)).toEqual([
      join('out', 'photo-skimage-rocket.jpg'),
      join('out', 'icon-oxygen-folder-red.png'),
      // HEIC has no encoder to go back to: it becomes JPEG unless a format is asked for.
      join('out', 'photo-heic-rocket.jpg'),
    ]);
    for (const file of report.files) {
      expect(file).toMatchObject({
        input_size: expect.any(Number),
        output_size: expect.any(Number),
        savings_percent: expect.any(Number),
        input_format: expect.any(String),
        output_format: expect.any(String),
        width: expect.any(Number),
        height: expect.any(Number),
        quality: DEFAULT_QUALITY,
        metadata_stripped: expect.any(Boolean),
      });
      const written = await stat(join(dir, file.output as string));
      expect(written.size).toBe(file.output_size);
      const meta = await sharp(join(dir, file.output as string)).metadata();
      expect([meta.width, meta.height]).toEqual([file.width, file.height]);
    }
    expect(report.files[2]).toMatchObject({ input_format: 'heif', output_format: 'jpeg' });
    const inputBytes = (await Promise.all([JPEG, PNG_A, HEIC].map((f) => stat(join(dir, f))))).reduce(
      (sum, s) => sum + s.size,
      0,
    );
    const outputBytes = report.files.reduce((sum, f) => sum + (f.output_size as number), 0);
    expect(report.totals).toMatchObject({
      files: 3,
      succeeded: 3,
      failed: 0,
      input_size: inputBytes,
      output_size: outputBytes,
      savings_percent: Math.round((1 - outputBytes / inputBytes) * 1000) / 10,
    });
  });

  it('takes a folder recursively, mirrors its sub-folders under -o and skips non-images quietly', async () => {
    const dir = await workspace([], { 'shots/README.md': '# notes', 'shots/.DS_Store': 'x' });
    await copyFile(join(corpus, JPEG), join(dir, 'shots', JPEG));
    await mkdir(join(dir, 'shots/icons/deep'), { recursive: true });
    await copyFile(join(corpus, PNG_A), join(dir, 'shots/icons/deep', PNG_A));
    const out = await compress(['shots', '-o', 'web', '-f', 'webp'], dir);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(await exists(join(dir, 'web/photo-skimage-rocket.webp'))).toBe(true);
    expect((await sharp(join(dir, 'web/icons/deep/icon-oxygen-folder-red.webp')).metadata()).format).toBe(
      'webp',
    );
    expect(await exists(join(dir, 'web/README.md'))).toBe(false);
    expect(out.stdout).toMatch(/2 files compressed/);
  });

  it('expands glob patterns itself and mirrors below the fixed part of the pattern', async () => {
    const dir = await workspace([], { 'assets/notes.txt': 'not an image' });
    await mkdir(join(dir, 'assets/ui'), { recursive: true });
    await copyFile(join(corpus, PNG_A), join(dir, 'assets/ui', PNG_A));
    await copyFile(join(corpus, PNG_B), join(dir, 'assets', PNG_B));
    await copyFile(join(corpus, JPEG), join(dir, 'assets', JPEG));
    const out = await compress(['assets/**/*.png', '-o', 'out', '--json'], dir);
    expect(out.code).toBe(0);
    const outputs = json(out)
      .files.map((f) => f.output)
      .sort();
    expect(outputs).toEqual([join('out', PNG_B), join('out', 'ui', PNG_A)]);
    expect(await exists(join(dir, 'out', JPEG))).toBe(false);
  });

  it('reports a corrupt file with its name and code, exits 1, and still writes the others', async () => {
    const dir = await workspace([JPEG, PNG_A], { 'broken.jpg': 'this is text, not a JPEG' });
    const out = await compress(['.', '-o', 'out'], dir);
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/broken\.jpg.*NOT_AN_IMAGE/);
    expect(await exists(join(dir, 'out', JPEG))).toBe(true);
    expect(await exists(join(dir, 'out', PNG_A))).toBe(true);
    expect(await exists(join(dir, 'out', 'broken.jpg'))).toBe(false);
    expect(out.stdout).toMatch(/2 files compressed, 1 failed/);

    const asJson = await compress(['broken.jpg', JPEG, '-o', 'out2', '--json'], dir);
    expect(asJson.code).toBe(1);
    expect(asJson.stderr).toMatch(/broken\.jpg.*NOT_AN_IMAGE/);
    const report = json(asJson);
    expect(report.errors).toEqual([
      expect.objectContaining({ input: 'broken.jpg', code: 'NOT_AN_IMAGE', message: expect.any(String) }),
    ]);
    expect(report.files).toHaveLength(1);
    expect(report.totals).toMatchObject({ succeeded: 1, failed: 1 });
  });

  it('never writes over an input unless --overwrite, and then only in place for the same format', async () => {
    const dir = await workspace([JPEG, PNG_A]);
    const before = await sha(join(dir, JPEG));

    const beside = await compress([JPEG], dir);
    expect(beside.code).toBe(0);
    expect(await sha(join(dir, JPEG))).toBe(before);
    expect((await sharp(join(dir, 'photo-skimage-rocket.min.jpg')).metadata()).format).toBe('jpeg');

    // Running again over the folder must not pick up its own earlier output.
    const again = await compress(['.', '--json'], dir);
    expect(again.code).toBe(0);
    expect(json(again).files.map((f) => f.input)).not.toContain('photo-skimage-rocket.min.jpg');
    expect(await exists(join(dir, 'photo-skimage-rocket.min.min.jpg'))).toBe(false);

    const sameDir = await compress([JPEG, '-o', '.'], dir);
    expect(sameDir.code).toBe(1);
    expect(sameDir.stderr).toMatch(/photo-skimage-rocket\.jpg.*CONFLICT/);
    expect(await sha(join(dir, JPEG))).toBe(before);

    const inPlace = await compress([JPEG, '--overwrite'], dir);
    expect(inPlace.code).toBe(0);
    expect(await sha(join(dir, JPEG))).not.toBe(before);
    expect((await stat(join(dir, JPEG))).size).toBeLessThan((await stat(join(corpus, JPEG))).size);
    expect((await sharp(join(dir, JPEG)).metadata()).format).toBe('jpeg');

    // A new format under --overwrite goes beside the input, which stays.
    const pngBefore = await sha(join(dir, PNG_A));
    const converted = await compress([PNG_A, '--overwrite', '-f', 'webp'], dir);
    expect(converted.code).toBe(0);
    expect(await sha(join(dir, PNG_A))).toBe(pngBefore);
    expect((await sharp(join(dir, 'icon-oxygen-folder-red.webp')).metadata()).format).toBe('webp');
  });

  it('never lets one input be replaced by the output of another', async () => {
    const dir = await workspace([PNG_A]);
    // A different picture under the name the PNG's WebP output would take.
    await sharp(join(corpus, JPEG)).webp().toFile(join(dir, 'icon-oxygen-folder-red.webp'));
    const rocket = await sharp(join(corpus, JPEG)).metadata();
    const out = await compress([PNG_A, 'icon-oxygen-folder-red.webp', '-f', 'webp', '--overwrite'], dir);
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/icon-oxygen-folder-red\.png.*CONFLICT/);
    const after = await sharp(join(dir, 'icon-oxygen-folder-red.webp')).metadata();
    expect([after.format, after.width, after.height]).toEqual(['webp', rocket.width, rocket.height]);
  });

  it.each([
    [['-q', 'abc'], '--quality', 'abc'],
    [['--quality', '101'], '--quality', '101'],
    [['-f', 'bmp'], '--format', 'bmp'],
    [['--max-dimension', '0'], '--max-dimension', '0'],
    [['--concurrency', '0'], '--concurrency', '0'],
  ])('exits 2 on a bad flag value %j, naming the flag and the value', async (flags, flag, value) => {
    const dir = await workspace([JPEG]);
    const out = await compress([JPEG, ...flags], dir);
    expect(out.code).toBe(2);
    expect(out.stderr).toContain(flag);
    expect(out.stderr).toContain(`'${value}'`);
    expect(await exists(join(dir, 'photo-skimage-rocket.min.jpg'))).toBe(false);
  });

  it('exits 2 when no input matches, and on an unknown flag', async () => {
    const dir = await workspace([], { 'notes.txt': 'hello' });
    const none = await compress(['missing.jpg', '*.png'], dir);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/missing\.jpg/);
    const folderWithoutImages = await compress(['.'], dir);
    expect(folderWithoutImages.code).toBe(2);
    const unknown = await compress(['x.jpg', '--qualty', '5'], dir);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('--qualty');
    const noInputs = await cli(['compress'], dir);
    expect(noInputs.code).toBe(2);
    expect(noInputs.stderr).toMatch(/inputs/);
    const noCommand = await cli([], dir);
    expect(noCommand.code).toBe(2);
  });

  it('draws a progress bar only on a terminal and never with --json', async () => {
    const dir = await workspace([], {});
    await mkdir(join(dir, 'in'));
    for (const name of [PNG_A, PNG_B]) await copyFile(join(corpus, name), join(dir, 'in', name));
    const tty = await compress(['in', '-o', 'a', '--max-dimension', '64'], dir, { tty: true });
    expect(tty.code).toBe(0);
    // The bar redraws on a timer and clears itself when done, so a fast run leaves only the terminal
    // control codes it used: hiding the cursor while it ran is the trace that it was there.
    expect(tty.stderr).toContain('\u001b[?25l');
    expect(tty.stdout).toMatch(/2 files compressed/);
    const piped = await compress(['in', '-o', 'b', '--max-dimension', '64'], dir);
    expect(piped.stderr).toBe('');
    const asJson = await compress(['in', '-o', 'c', '--max-dimension', '64', '--json'], dir, { tty: true });
    expect(asJson.stderr).toBe('');
    expect(json(asJson).totals.succeeded).toBe(2);
  });
});

describe('compresso --help and --version', () => {
  it('lists every compress option with its defaults and ranges', async () => {
    const out = await cli(['help', 'compress'], root);
    expect(out.code).toBe(0);
    for (const flag of [
      '-o, --output-dir',
      '-f, --format',
      '-q, --quality',
      '--max-dimension',
      '--keep-exif',
      '--png-to-jpeg',
      '--json',
      '--overwrite',
      '--concurrency',
      '--quiet',
      '--help',
    ]) {
      expect(out.stdout, flag).toContain(flag);
    }
    // Help text wraps at the terminal width; compare with the line breaks taken out.
    const flat = out.stdout.replace(/\s+/g, ' ');
    expect(flat).toContain(`(default: ${DEFAULT_QUALITY})`);
    expect(flat).toContain(`1 to ${MAX_DIMENSION_LIMIT}`);
    for (const format of ['jpeg', 'png', 'webp', 'avif', 'gif']) expect(out.stdout).toContain(format);
    expect(out.stdout).toMatch(/Exit/);
    const direct = await cli(['compress', '--help'], root);
    expect(direct.stdout).toBe(out.stdout);
  });

  it('prints the package version and lists the commands', async () => {
    const manifest = JSON.parse(await readFile(join(here, '../package.json'), 'utf8')) as { version: string };
    const version = await cli(['--version'], root);
    expect(version).toEqual({ code: 0, stdout: `${manifest.version}\n`, stderr: '' });
    const help = await cli(['--help'], root);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/compress/);
  });
});

describe('the compresso binary', () => {
  it('runs as a real process: exit codes, JSON on stdout, errors on stderr', async () => {
    const dir = await workspace([JPEG], { 'bad.png': 'nope' });
    const env = { ...process.env, PATH: `${join(repoRoot, 'node_modules/.bin')}:${process.env.PATH ?? ''}` };
    const bin = join(here, 'bin.ts');
    const ok = spawnSync('node', [bin, 'compress', JPEG, '-o', 'out', '--json'], {
      cwd: dir,
      env,
      encoding: 'utf8',
    });
    expect(ok.stderr).toBe('');
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout).files[0].output).toBe(join('out', JPEG));
    const failed = spawnSync('node', [bin, 'compress', JPEG, 'bad.png', '-o', 'out2'], {
      cwd: dir,
      env,
      encoding: 'utf8',
    });
    expect(failed.status).toBe(1);
    expect(failed.stderr).toMatch(/bad\.png.*NOT_AN_IMAGE/);
    const usage = spawnSync('node', [bin, 'compress', JPEG, '-q', 'high'], {
      cwd: dir,
      env,
      encoding: 'utf8',
    });
    expect(usage.status).toBe(2);
    expect(usage.stderr).toMatch(/--quality.*'high'/);
  });
});
