import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '../../..');
const dir = mkdtempSync(join(tmpdir(), 'compresso-readme-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function freePort(): Promise<number> {
  return new Promise((done) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => done(port));
    });
  });
}

describe('README walk-through', () => {
  it('runs as written: CLI account and key, server, WebP and AVIF with curl', async () => {
    const readme = readFileSync(join(here, '..', 'README.md'), 'utf8');
    const block = /<!-- walkthrough[^>]*-->\s*```sh\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const port = await freePort();
    // Only the port changes, so a test run never collides with a server on 3000.
    const script = block!.replaceAll('3000', String(port));
    copyFileSync(resolve(repo, '../shared/corpus/photo-mate-LadyBird.jpg'), join(dir, 'photo.jpg'));
    const { stdout } = await new Promise<{ stdout: string; stderr: string }>((done, fail) => {
      execFile(
        'bash',
        ['-euo', 'pipefail', '-c', `trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n${script}`],
        {
          cwd: dir,
          env: { PATH: `${repo}/node_modules/.bin:${process.env.PATH}`, HOME: dir, LOG_LEVEL: 'warn' },
          timeout: 90_000,
        },
        (error, out, err) =>
          error ? fail(new Error(`${error.message}\n${err}`)) : done({ stdout: out, stderr: err }),
      );
    });
    expect(stdout).toMatch(/x-savings-percent: \d/i);
    expect(stdout).toContain('"output_format":"webp"');
    expect(stdout).toMatch(/"used":4,"limit":500/);
    expect((await sharp(join(dir, 'photo.webp')).metadata()).format).toBe('webp');
    const avif = await sharp(join(dir, 'photo.avif')).metadata();
    expect(avif.format).toBe('heif');
    expect(Math.max(avif.width ?? 0, avif.height ?? 0)).toBe(1024);
  });
});
