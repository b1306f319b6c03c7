import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from './program.ts';

const here = dirname(fileURLToPath(import.meta.url));
const corpus = resolve(here, '../../../../shared/corpus');

/** The `compresso …` lines of the README's Examples section: docs are code, so each one must run. */
async function readmeExamples(): Promise<string[]> {
  const readme = await readFile(join(here, '../README.md'), 'utf8');
  const section = readme.split(/^## Examples$/m)[1]?.split(/^## /m)[0] ?? '';
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  return block
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith('compresso '));
}

/** Split a command line into words the way sh does for the quoting the README uses (double quotes). */
function words(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? '');
}

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'compresso-readme-'));
  const place = async (from: string, to: string) => {
    await mkdir(dirname(join(dir, to)), { recursive: true });
    await copyFile(join(corpus, from), join(dir, to));
  };
  await place('photo-skimage-rocket.jpg', 'photo.jpg');
  await place('icon-oxygen-folder-red.png', 'logo.png');
  await place('photo-skimage-rocket.jpg', 'shots/2024/rocket.jpg');
  await place('icon-oxygen-konqueror.png', 'shots/icons/konqueror.png');
  await place('icon-oxygen-konqueror.png', 'assets/ui/konqueror.png');
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('README examples', () => {
  it('has examples to run', async () => {
    expect((await readmeExamples()).length).toBeGreaterThanOrEqual(4);
  });

  it('runs every example with exit status 0', async () => {
    for (const line of await readmeExamples()) {
      let text = '';
      const sink = { write: (s: string) => (text += s) };
      const status = await run(words(line).slice(1), { stdout: sink, stderr: sink, cwd: dir });
      expect(status, `${line}\n${text}`).toBe(0);
    }
  });

  it('documents the --json document with the keys the command prints', async () => {
    const readme = await readFile(join(here, '../README.md'), 'utf8');
    const documented = JSON.parse(/```json\n([\s\S]*?)```/.exec(readme)?.[1] ?? '{}');
    let stdout = '';
    const status = await run(['compress', 'logo.png', 'not-here.png', '-o', 'json-out', '--json'], {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: () => true },
      cwd: dir,
    });
    expect(status).toBe(1);
    const actual = JSON.parse(stdout);
    const keys = (o: object) => Object.keys(o).sort();
    expect(keys(actual)).toEqual(keys(documented));
    expect(keys(actual.files[0])).toEqual(keys(documented.files[0]));
    expect(keys(actual.errors[0])).toEqual(keys(documented.errors[0]));
    expect(keys(actual.totals)).toEqual(keys(documented.totals));
  });
});
