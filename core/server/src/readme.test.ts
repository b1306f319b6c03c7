import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '../../..');
const dir = mkdtempSync(join(tmpdir(), 'compresso-readme-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('README walk-through', () => {
  it('runs as written: CLI account and key, server, WebP and AVIF with curl', async () => {
    const readme = readFileSync(join(here, '..', 'README.md'), 'utf8');
    const block = /<!-- walkthrough[^>]*-->\s*```sh\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    // The server binds port 0 itself and the script reads the address it bound from its start line:
    // a port picked here and closed could be taken by another suite's server before this one binds it,
    // and `until curl …/readyz` would then have accepted the wrong server.
    const serve = 'compresso serve --port 3000 &';
    const wait = /^until curl -fsS http:\/\/localhost:3000\/readyz[^\n]*$/m;
    expect(block).toContain(serve);
    expect(block).toMatch(wait);
    const script = block!
      .replace(serve, 'compresso serve --port 0 --host 127.0.0.1 2>serve.log &')
      .replace(
        wait,
        [
          // The start line, once written: "compresso: serving http://127.0.0.1:<port>/api/v1 (docs: …)".
          'until BASE=$(sed -n "s|^compresso: serving \\(http://[^ ]*\\)/api/v1 .*|\\1|p" serve.log) && [ -n "$BASE" ]; do',
          '  kill -0 "$SERVER" || { cat serve.log >&2; exit 1; }; sleep 0.1',
          'done',
          'curl -fsS "$BASE/readyz" >/dev/null',
        ].join('\n'),
      )
      .replaceAll('http://localhost:3000', '$BASE');
    expect(script).not.toContain('3000');
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
