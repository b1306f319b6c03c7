import { execFile } from 'node:child_process';
import { copyFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appDir, installBuild, PHOTO, REPO } from '../core/client/src/test-support.ts';
import { proAccount, startTestServer, type TestServer } from '../core/server/src/test-helpers.ts';

/**
 * The root README's code: its two commands are what every other suite and .ci/run exercise; the
 * client snippets marked `<!-- readme-test: name -->` run here against a real server, the Node one
 * through the built package as a user installs it, the Python one on the machine's python3.
 */
const run = promisify(execFile);
const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
const snippets = new Map(
  [...readme.matchAll(/<!-- readme-test: (\S+) -->\n```(?:js|python)\n([\s\S]*?)```/g)].map(
    ([, name, code]) => [name!, code!] as const,
  ),
);

let srv: TestServer;
let key: string;
let app: string;

beforeAll(async () => {
  srv = await startTestServer({ dbPath: ':memory:' });
  ({ key } = await proAccount(srv.db, 'root-readme@example.com'));
  app = appDir('root-readme');
  installBuild(app);
  copyFileSync(PHOTO, join(app, 'photo.jpg'));
  for (const [name, code] of snippets) writeFileSync(join(app, name), code);
});
afterAll(async () => {
  await srv?.close();
  if (app) rmSync(app, { recursive: true, force: true });
});

function env(): NodeJS.ProcessEnv {
  return {
    PATH: process.env['PATH'],
    COMPRESSO_API_KEY: key,
    COMPRESSO_BASE_URL: srv.url,
    PYTHONPATH: join(REPO, 'core/python/src'),
  };
}

describe('the root README', () => {
  it('starts with the two commands: the server and the tests', () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    expect(firstBlock).toMatch(/^npm ci && npm start\s/m);
    expect(firstBlock).toMatch(/^npm ci && npm test\s/m);
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8'));
    expect(pkg.scripts.start).toContain('core/cli/src/bin.ts serve');
  });

  it('has the Node and Python snippets', () => {
    expect([...snippets.keys()]).toEqual(['node.mjs', 'python.py']);
  });

  it('the Node snippet writes a WebP beside the photo and says what it saved', async () => {
    const { stdout } = await run(process.execPath, [join(app, 'node.mjs')], { cwd: app, env: env() });
    const written = join(app, 'photo.min.webp');
    const meta = await sharp(written).metadata();
    expect(meta.format).toBe('webp');
    const original = await sharp(PHOTO).metadata();
    expect(stdout.trim()).toMatch(
      new RegExp(`^${written}: \\d+(\\.\\d+)?% smaller, ${original.width}×${original.height}$`),
    );
    expect(readFileSync(written).length).toBeLessThan(readFileSync(PHOTO).length);
  });

  it('the Python snippet writes an AVIF beside the photo', async () => {
    const { stdout } = await run('python3', [join(app, 'python.py')], { cwd: app, env: env() });
    const written = join(app, 'photo.min.avif');
    expect((await sharp(written).metadata()).format).toBe('heif');
    expect(stdout.trim()).toMatch(new RegExp(`^${written}: \\d+(\\.\\d+)?% smaller$`));
  });
});
