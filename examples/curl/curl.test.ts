import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The curl examples, run as a user runs them: the real scripts, the real curl, a real server.
const run = promisify(execFile);
const here = import.meta.dirname;
const photo = join(here, '../../../shared/corpus/photo-skimage-rocket.jpg');

let server: TestServer;
let key: string;
let out: string;

beforeAll(async () => {
  server = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 10 * 1024 * 1024 } });
  ({ key } = await proAccount(server.db, 'curl-example@example.com'));
  out = mkdtempSync(join(tmpdir(), 'compresso-curl-example-'));
});
afterAll(async () => {
  await server?.close();
  if (out) rmSync(out, { recursive: true, force: true });
});

function env(apiKey: string): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, COMPRESSO_API_KEY: apiKey, COMPRESSO_BASE_URL: server.url };
}

describe('examples/curl', () => {
  it('compress.sh writes a smaller WebP that decodes', async () => {
    const target = join(out, 'rocket.webp');
    const { stdout } = await run('sh', [join(here, 'compress.sh'), photo, target, 'webp', '75'], {
      env: env(key),
    });
    expect(stdout).toContain('rocket.webp');
    const meta = await sharp(readFileSync(target)).metadata();
    expect(meta.format).toBe('webp');
    expect(statSync(target).size).toBeLessThan(statSync(photo).size);
  });

  it('info.sh prints the sizes as JSON and saves nothing', async () => {
    const { stdout } = await run('sh', [join(here, 'info.sh'), photo, 'avif', '60'], { env: env(key) });
    const info = JSON.parse(stdout);
    expect(info.input_size).toBe(statSync(photo).size);
    expect(info.output_format).toBe('avif');
    expect(info.output_size).toBeLessThan(info.input_size);
  });

  it('a bad key makes compress.sh fail with the server code and leaves no output file', async () => {
    const target = join(out, 'nope.webp');
    const failure = await run('sh', [join(here, 'compress.sh'), photo, target], {
      env: env('cmp_live_not-a-real-key'),
    }).catch((err: { code: number; stderr: string }) => err);
    expect('code' in failure && failure.code).toBe(22);
    expect((failure as { stderr: string }).stderr).toMatch(/INVALID_API_KEY|UNAUTHENTICATED/);
    expect(() => statSync(target)).toThrow();
  });
});
