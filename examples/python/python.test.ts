import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The Python examples, run as a user runs them: `python3 example …` on the machine's Python, with the
// client from core/python/src on PYTHONPATH (what its README offers besides pip install), against a
// real server.
const run = promisify(execFile);
const here = import.meta.dirname;
const corpus = join(here, '../../../shared/corpus');
const photo = join(corpus, 'photo-skimage-rocket.jpg');
// The same interpreter core/python/src/python.test.ts runs the client's own suite on.
const python = process.env.COMPRESSO_PYTHON ?? 'python3';

let server: TestServer;
let key: string;
let out: string;

beforeAll(async () => {
  server = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 10 * 1024 * 1024 } });
  ({ key } = await proAccount(server.db, 'python-example@example.com'));
  out = mkdtempSync(join(tmpdir(), 'compresso-python-example-'));
});
afterAll(async () => {
  await server?.close();
  if (out) rmSync(out, { recursive: true, force: true });
});

function env(apiKey: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    COMPRESSO_API_KEY: apiKey,
    COMPRESSO_BASE_URL: server.url,
    PYTHONPATH: join(here, '../../core/python/src'),
    // No __pycache__ left in the source tree by a test run.
    PYTHONDONTWRITEBYTECODE: '1',
  };
}

type Failure = { code: number; stdout: string; stderr: string };
const failure = (e: Failure) => e;
const exitedZero = () => ({ code: 0, stdout: '', stderr: '' });

describe('examples/python', () => {
  it('compress.py writes the same WebP bytes as the curl example with the same options', async () => {
    const viaPython = join(out, 'python.webp');
    const { stdout } = await run(python, [join(here, 'compress.py'), photo, viaPython, 'webp', '75'], {
      env: env(key),
    });
    expect(stdout).toContain(`${photo} -> ${viaPython} (${readFileSync(photo).length} -> `);
    expect(stdout).toMatch(/ bytes, -\d+(\.\d)?%, 640x427\)\n$/);
    const viaCurl = join(out, 'curl.webp');
    await run('sh', [join(here, '../curl/compress.sh'), photo, viaCurl, 'webp', '75'], { env: env(key) });
    expect(readFileSync(viaPython).equals(readFileSync(viaCurl))).toBe(true);
    expect((await sharp(viaPython).metadata()).format).toBe('webp');
  });

  it('compress.py: a bad key exits 1 with the server code and writes nothing', async () => {
    const target = join(out, 'never.webp');
    const failed = await run(python, [join(here, 'compress.py'), photo, target], {
      env: env('cmp_live_not-a-key-at-all-but-of-the-right-length-000000'),
    }).then(exitedZero, failure);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^INVALID_API_KEY: /);
    expect(() => readFileSync(target)).toThrow();
  });

  it('batch.py: every good image written, the broken one reported by code, exit 1', async () => {
    const broken = join(out, 'broken.jpg');
    writeFileSync(broken, readFileSync(photo).subarray(0, 3000));
    const inputs = [photo, join(corpus, 'graphic-skimage-text.png'), broken];
    const failed = await run(python, [join(here, 'batch.py'), join(out, 'batch'), ...inputs], {
      env: env(key),
    }).then(exitedZero, failure);
    expect(failed.code).toBe(1);
    expect(failed.stderr.trim().split('\n')).toEqual(['1/3', '2/3', '3/3']);
    const lines = failed.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(
      new RegExp(
        `^${literal(`${photo} -> ${join(out, 'batch', 'photo-skimage-rocket.webp')}`)} \\(-\\d+(\\.\\d)?%\\)$`,
      ),
    );
    expect(lines[1]).toMatch(
      new RegExp(`^${literal(`${inputs[1]} -> ${join(out, 'batch', 'graphic-skimage-text.webp')}`)} \\(`),
    );
    expect(lines[2]).toMatch(new RegExp(`^${literal(broken)} FAILED CORRUPT_IMAGE: \\S`));
    for (const name of ['photo-skimage-rocket.webp', 'graphic-skimage-text.webp']) {
      expect((await sharp(join(out, 'batch', name)).metadata()).format, name).toBe('webp');
    }
  });
});

function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
