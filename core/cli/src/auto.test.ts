import { copyFile, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { run } from './program.ts';

const corpus = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../shared/corpus');

function sink() {
  let text = '';
  return {
    isTTY: false,
    write(chunk: string) {
      text += chunk;
      return true;
    },
    get text() {
      return text;
    },
  };
}

describe('compresso compress -q auto', () => {
  it('searches the quality per image and reports the chosen quality and its score', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'compresso-cli-auto-'));
    await copyFile(join(corpus, 'photo-skimage-rocket.jpg'), join(dir, 'rocket.jpg'));
    const stdout = sink();
    const stderr = sink();
    const code = await run(['compress', 'rocket.jpg', '-q', 'auto', '-f', 'webp', '-o', 'out', '--json'], {
      stdout,
      stderr,
      cwd: dir,
    });
    expect(stderr.text).toBe('');
    expect(code).toBe(0);
    const report = JSON.parse(stdout.text) as {
      files: { output: string; auto_quality: boolean; quality: number; score: number }[];
    };
    const [file] = report.files;
    expect(file?.auto_quality).toBe(true);
    expect(file?.quality).toBeGreaterThanOrEqual(1);
    expect(file?.quality).toBeLessThanOrEqual(100);
    // The documented floor: auto never hands back an image scoring under 70.
    expect(file?.score).toBeGreaterThanOrEqual(70);
    const meta = await sharp(await readFile(join(dir, 'out', 'rocket.webp'))).metadata();
    expect(meta.format).toBe('webp');
  });
});
