import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileBlobStore, inlineQueue, type QueueWorker } from '@compresso/runtime';
import {
  type FakeProvider,
  fakeOpenAi,
  proAccount,
  startBatchWorker,
  startTestServer,
  type TestServer,
} from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appDir, CORPUS, installBuild, PACKAGE_DIR, PHOTO, PNG, truncated, workDir } from './test-support.ts';

/** Every snippet marked `<!-- readme-test: name -->` in the README runs here, against the built package. */
const run = promisify(execFile);
const readme = readFileSync(join(PACKAGE_DIR, 'README.md'), 'utf8');
const snippets = [...readme.matchAll(/<!-- readme-test: (\S+) -->\n```js\n([\s\S]*?)```/g)].map(
  ([, name, code]) => ({ name: name!, code: code! }),
);

let srv: TestServer;
let key: string;
let app: string;
const work = workDir('readme');

// Jobs need what `compresso serve` has: a job queue, a blob store and a worker.
const queue = inlineQueue();
const blobs = fileBlobStore({ root: join(work.dir, 'blobs') });
let worker: QueueWorker | undefined;
let ai: FakeProvider | undefined;

beforeAll(async () => {
  // The AI snippet talks to an OpenAI-compatible provider: a loopback fake of its API.
  ai = await fakeOpenAi({ apiKey: 'sk-readme' });
  srv = await startTestServer({
    dbPath: join(work.dir, 'server.sqlite'),
    queue,
    blobs,
    overrides: { openaiApiKey: 'sk-readme', openaiBaseUrl: ai.url },
  });
  worker = startBatchWorker({
    queue,
    db: srv.db,
    blobs,
    engine: srv.engine,
    logger: srv.logger,
    config: srv.config,
    concurrency: 2,
  });
  ({ key } = await proAccount(srv.db, 'readme@example.com'));
  app = appDir('readme');
  installBuild(app);
  copyFileSync(PHOTO, join(app, 'photo.jpg'));
  writeFileSync(join(app, 'notes.txt'), 'shopping: milk, bread, a faster image pipeline\n');
  mkdirSync(join(app, 'photos'));
  copyFileSync(PHOTO, join(app, 'photos/rocket.jpg'));
  copyFileSync(PNG, join(app, 'photos/text.png'));
  copyFileSync(join(CORPUS, 'photo-mate-LadyBird.jpg'), join(app, 'photos/ladybird.jpg'));
  writeFileSync(join(app, 'photos/broken.jpg'), truncated(PHOTO));
  for (const { name, code } of snippets) writeFileSync(join(app, name), code);
});
afterAll(async () => {
  await worker?.close({ timeoutMs: 1000 });
  await queue.close();
  await srv?.close();
  await blobs.close();
  await ai?.close();
  if (app) rmSync(app, { recursive: true, force: true });
  work.cleanup();
});

async function runSnippet(name: string): Promise<string> {
  const { stdout } = await run(process.execPath, [join(app, name)], {
    cwd: app,
    env: { PATH: process.env['PATH'], COMPRESSO_API_KEY: key, COMPRESSO_BASE_URL: srv.url },
    timeout: 60_000,
  });
  return stdout;
}

describe('README snippets', () => {
  it('are all found', () => {
    expect(snippets.map((s) => s.name)).toEqual([
      'quick-start.cjs',
      'quick-start.mjs',
      'batch.mjs',
      'jobs.mjs',
      'keys.cjs',
      'ai.mjs',
      'errors.cjs',
    ]);
  });

  it('quick start (CommonJS) writes photo.min.webp beside the photo', async () => {
    const out = await runSnippet('quick-start.cjs');
    const written = join(app, 'photo.min.webp');
    expect(out).toContain(
      `${written}: ${readFileSync(PHOTO).length} → ${readFileSync(written).length} bytes (−`,
    );
    expect(readFileSync(join(app, 'photo.jpg'))).toEqual(readFileSync(PHOTO));
  });

  it('quick start (ESM) reports what AVIF would give, writing nothing', async () => {
    const out = await runSnippet('quick-start.mjs');
    expect(out).toMatch(
      new RegExp(`^AVIF would be \\d+ bytes instead of ${readFileSync(PHOTO).length} \\(\\d+×\\d+\\)`),
    );
    expect(existsSync(join(app, 'photo.min.avif'))).toBe(false);
  });

  it('batch: three results and the broken file named with its code', async () => {
    const out = await runSnippet('batch.mjs');
    expect(out).toContain('4/4');
    expect(out).toContain(`photos/rocket.jpg → ${join(app, 'optimized/rocket.webp')} (−`);
    expect(out).toContain(`photos/text.png → ${join(app, 'optimized/text.webp')}`);
    expect(out).toContain('photos/broken.jpg failed: CORRUPT_IMAGE');
    expect(existsSync(join(app, 'optimized/ladybird.webp'))).toBe(true);
  });

  it('jobs: one submission, progress to 4/4, three results in from-job and the broken file with its code', async () => {
    const out = await runSnippet('jobs.mjs');
    expect(out.trim().split('\n').at(-5)).toBe('4/4');
    expect(out).toContain(`rocket.jpg → ${join(app, 'from-job/rocket.webp')}`);
    expect(out).toContain(`text.png → ${join(app, 'from-job/text.webp')}`);
    expect(out).toContain(`ladybird.jpg → ${join(app, 'from-job/ladybird.webp')}`);
    expect(out).toContain('broken.jpg failed: CORRUPT_IMAGE');
  });

  it('keys and usage', async () => {
    const out = await runSnippet('keys.cjs');
    expect(out).toMatch(/^new key cmp_live_[A-Za-z0-9_-]{8}… \(store 52 characters somewhere safe\)$/m);
    expect(out).toMatch(/^test, ci$/m);
    expect(out).toMatch(/^\d+ of 500 requests used today, \d+ left$/m);
  });

  it('AI: an edit with its operations, offline alt text, a generated WebP at the nearest ratio', async () => {
    const out = await runSnippet('ai.mjs');
    expect(out).toContain(`${join(app, 'photo-bw.jpg')}: 400×`);
    expect(out).toContain('(resize, grayscale)');
    expect(out).toMatch(/^alt text \(provider\): A gradient from green to pink/m);
    expect(out).toContain(`${join(app, 'boat.webp')}: openai gpt-image-1 at 3:2`);
    expect(existsSync(join(app, 'boat.webp'))).toBe(true);
  });

  it('errors: a text file is UnsupportedImageError NOT_AN_IMAGE', async () => {
    expect(await runSnippet('errors.cjs')).toBe('not an image: NOT_AN_IMAGE (415)\n');
  });
});
