import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Compresso } from './index.ts';
import { appDir, installBuild, PHOTO, REPO, workDir } from './test-support.ts';

/**
 * The published build (dist/esm + dist/cjs from scripts/build.mjs), loaded by package name through
 * its `exports` map, on the Node 16 and 18 binaries installed from npm and on the repository's
 * Node 24, against a real server. On Node 16 there is no fetch: this proves the node:http +
 * form-data path.
 */
const run = promisify(execFile);
const RUNTIMES: [string, string][] = [
  ['16', join(REPO, 'test/node-runtimes/node16/node_modules/node/bin/node')],
  ['18', join(REPO, 'test/node-runtimes/node18/node_modules/node/bin/node')],
  ['24', process.execPath],
];
const linuxX64 = process.platform === 'linux' && process.arch === 'x64';

// The script every runtime runs, as CommonJS and as an ES module; it prints one JSON line.
const BODY = `
const out = {};
out.version = process.version;
out.globalFetch = typeof fetch === 'function';
const client = new Compresso(); // key and server from COMPRESSO_API_KEY / COMPRESSO_BASE_URL
const written = await client.compress(process.env.PHOTO, { format: 'webp', quality: 70, output: process.env.OUT });
out.compress = { outputPath: written.outputPath, outputSize: written.outputSize, inputSize: written.inputSize,
  savingsPercent: written.savingsPercent, width: written.width, format: written.format,
  data: written.data.toString('base64') };
const fromBuffer = await client.compress(require_fs.readFileSync(process.env.PHOTO), { format: 'webp', quality: 70 });
out.bufferSame = fromBuffer.data.equals(written.data);
const info = await client.info(process.env.PHOTO, { format: 'avif', maxDimension: 100 });
out.info = { input_size: info.input_size, output_format: info.output_format, width: info.width, height: info.height };
async function failure(promise) {
  try { await promise; return null; } catch (e) {
    return { name: e.name, code: e.code, status: e.status, base: e instanceof CompressoError,
      typed: e instanceof AuthenticationError || e instanceof BadRequestError || e instanceof UnsupportedImageError,
      requestId: typeof e.requestId };
  }
}
out.badKey = await failure(new Compresso('cmp_live_not-a-real-key-0000000000000000000000000').usage());
out.badOption = await failure(client.info(process.env.PHOTO, { quality: 0 }));
out.notImage = await failure(client.compress(Buffer.from('plain text, no pixels here')));
try { new Compresso(undefined, { env: {} }); } catch (e) { out.noKey = { name: e.name, code: e.code }; }
console.log(JSON.stringify(out));
`;
const CJS = `const { Compresso, CompressoError, AuthenticationError, BadRequestError, UnsupportedImageError } = require('@compresso/client');
const require_fs = require('node:fs');
(async () => {${BODY}})().catch((e) => { console.error(e); process.exit(1); });
`;
const ESM = `import { Compresso, CompressoError, AuthenticationError, BadRequestError, UnsupportedImageError } from '@compresso/client';
import * as require_fs from 'node:fs';
${BODY}`;

// Faults, on each runtime's own transport (node:http on 16, fetch on 18 and 24): a reset and a 503 are
// retried and then succeed, the daily quota is not retried, a silent server is a TimeoutError; the
// timeout and a refused connection name the address tried.
const FAULTS = `const { Compresso } = require('@compresso/client');
// The delays the client's own code hands to setTimeout (its pauses and attempt timers), so the test
// can assert what it chose to wait rather than time it.
const waits = [];
const realSetTimeout = global.setTimeout;
global.setTimeout = function (fn, ms, ...rest) {
  if ((new Error().stack || '').includes('@compresso')) waits.push(ms);
  return realSetTimeout(fn, ms, ...rest);
};
(async () => {
  const out = {};
  const client = new Compresso(undefined, { baseUrl: process.env.FAULTS_URL, maxRetries: 2 });
  const recovered = await client.compress(process.env.PHOTO, { format: 'webp', quality: 70, output: false });
  out.recovered = recovered.data.toString('base64');
  out.recoveryWaits = waits.slice();
  async function failure(promise) {
    try { await promise; return null; } catch (e) {
      return { name: e.name, code: e.code, status: e.status, retryAfter: e.retryAfter, quotaExceeded: e.quotaExceeded,
        message: e.message };
    }
  }
  out.quota = await failure(client.compress(process.env.PHOTO, { format: 'webp', quality: 70, output: false }));
  out.silent = await failure(new Compresso(undefined, { baseUrl: process.env.FAULTS_URL, maxRetries: 0, timeout: 300 }).usage());
  out.refused = await failure(new Compresso(undefined, { baseUrl: process.env.REFUSED_URL, maxRetries: 0 }).usage());
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`;

let srv: TestServer;
let key: string;
let app: string;
const work = workDir('compat');

function installApp(dir: string): void {
  installBuild(dir);
  writeFileSync(join(dir, 'app.cjs'), CJS);
  writeFileSync(join(dir, 'app.mjs'), ESM);
  writeFileSync(join(dir, 'faults.cjs'), FAULTS);
}

/**
 * In front of the real server, each request takes the next scripted step: cut the connection, never
 * answer, answer an error in the server's contract, or ('pass') hand the request to the real server.
 */
type Step = 'reset' | 'hang' | 'pass' | { status: number; code: string; headers?: Record<string, string> };
const HOP_BY_HOP = new Set(['host', 'connection', 'content-length', 'transfer-encoding']);
let steps: Step[] = [];
let seen: { path: string }[] = [];
let faults: Server;
let faultsUrl: string;
let refusedUrl: string;
let portHolder: ReturnType<typeof createServer> | undefined;

function faultAnswer(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const step = steps.shift() ?? 'pass';
  seen.push({ path: req.url ?? '' });
  if (step === 'reset') {
    req.socket.destroy();
  } else if (step === 'pass') {
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      // fetch sets its own framing for the body it is given.
      if (typeof value === 'string' && !HOP_BY_HOP.has(name)) headers.set(name, value);
    }
    fetch(`${srv.url}${req.url}`, {
      method: req.method ?? 'GET',
      headers,
      ...(body.length ? { body } : {}),
    }).then(
      async (answer) => {
        res.writeHead(answer.status, Object.fromEntries(answer.headers));
        res.end(Buffer.from(await answer.arrayBuffer()));
      },
      () => req.socket.destroy(),
    );
  } else if (step !== 'hang') {
    res.writeHead(step.status, { 'content-type': 'application/json', ...step.headers });
    res.end(JSON.stringify({ error: { code: step.code, message: `fake ${step.code}`, request_id: 'fake' } }));
  }
}

beforeAll(async () => {
  srv = await startTestServer({ dbPath: join(work.dir, 'server.sqlite') });
  ({ key } = await proAccount(srv.db, 'compat@example.com'));
  app = appDir('compat');
  installApp(app);
  faults = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => faultAnswer(req, res, Buffer.concat(chunks)));
  });
  await new Promise<void>((resolve) => faults.listen(0, '127.0.0.1', resolve));
  faultsUrl = `http://127.0.0.1:${(faults.address() as AddressInfo).port}`;
  // An address nothing listens on, that nobody can take while the tests run: this listener holds
  // port P on 127.0.0.1, which keeps any wildcard bind off P, and 127.0.0.2:P is refused. (A port
  // freed before use could be taken by another suite's server meanwhile.)
  portHolder = createServer();
  await new Promise<void>((resolve) => portHolder!.listen(0, '127.0.0.1', resolve));
  refusedUrl = `http://127.0.0.2:${(portHolder.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => (portHolder ? portHolder.close(resolve) : resolve(undefined)));
  faults?.closeAllConnections();
  await new Promise((resolve) => (faults ? faults.close(resolve) : resolve(undefined)));
  await srv?.close();
  if (app) rmSync(app, { recursive: true, force: true });
  work.cleanup();
});

interface AppOutput {
  version: string;
  globalFetch: boolean;
  compress: Record<string, unknown> & { data: string };
  bufferSame: boolean;
  info: { input_size: number; output_format: string; width: number; height: number };
  badKey: unknown;
  badOption: unknown;
  notImage: unknown;
  noKey: unknown;
}

async function runApp(node: string, script: string, dir: string, out: string) {
  const { stdout } = await run(node, [join(dir, script)], {
    cwd: dir,
    env: { PATH: process.env['PATH'], COMPRESSO_API_KEY: key, COMPRESSO_BASE_URL: srv.url, PHOTO, OUT: out },
    timeout: 60_000,
  });
  return JSON.parse(stdout.trim().split('\n').pop()!) as AppOutput;
}

describe.runIf(linuxX64)('the built package on Node 16, 18 and 24 (CommonJS and ESM)', () => {
  it('the Node binaries from npm are installed', () => {
    for (const [major, bin] of RUNTIMES) {
      expect(existsSync(bin), `Node ${major} at ${bin}: run npm ci`).toBe(true);
    }
  });

  it.each(
    RUNTIMES.flatMap(([major, bin]) => [
      { major, bin, script: 'app.cjs' },
      { major, bin, script: 'app.mjs' },
    ]),
  )(
    'Node $major, $script: compress, info and typed errors against a real server',
    async ({ major, bin, script }) => {
      const out = join(work.dir, `node${major}-${script}.webp`);
      const result = await runApp(bin, script, app, out);
      expect(result['version']).toMatch(new RegExp(`^v${major}\\.`));
      expect(result['globalFetch']).toBe(major !== '16');
      // The same photo with the same options gives the same bytes as the client running here from source.
      const reference = await new Compresso(key, { baseUrl: srv.url }).compress(PHOTO, {
        format: 'webp',
        quality: 70,
        output: false,
      });
      expect(result['compress']).toMatchObject({
        outputPath: out,
        inputSize: readFileSync(PHOTO).length,
        outputSize: reference.outputSize,
        savingsPercent: reference.savingsPercent,
        width: reference.width,
        format: 'webp',
      });
      expect(Buffer.from(result.compress.data, 'base64').equals(reference.data)).toBe(true);
      expect(readFileSync(out).equals(reference.data)).toBe(true);
      expect(result['bufferSame']).toBe(true);
      expect(result['info']).toMatchObject({ output_format: 'avif', input_size: readFileSync(PHOTO).length });
      expect(Math.max(result.info.width, result.info.height)).toBe(100);
      expect(result['badKey']).toEqual({
        name: 'AuthenticationError',
        code: 'INVALID_API_KEY',
        status: 401,
        base: true,
        typed: true,
        requestId: 'string',
      });
      expect(result['badOption']).toMatchObject({
        name: 'BadRequestError',
        code: 'INVALID_OPTION',
        status: 400,
      });
      expect(result['notImage']).toMatchObject({
        name: 'UnsupportedImageError',
        code: 'NOT_AN_IMAGE',
        status: 415,
      });
      expect(result['noKey']).toEqual({ name: 'AuthenticationError', code: 'MISSING_API_KEY' });
    },
  );

  it.each(RUNTIMES.map(([major, bin]) => ({ major, bin })))(
    'Node $major: a reset and a 503 are retried and then succeed; the daily quota is not; silence and a refusal name the address',
    async ({ bin }) => {
      steps = [
        'reset',
        { status: 503, code: 'SERVICE_UNAVAILABLE', headers: { 'retry-after': '1' } },
        'pass',
        {
          status: 429,
          code: 'QUOTA_EXCEEDED',
          headers: { 'retry-after': '3600', 'x-should-retry': 'false' },
        },
        'hang',
      ];
      seen = [];
      const { stdout } = await run(bin, [join(app, 'faults.cjs')], {
        cwd: app,
        env: {
          PATH: process.env['PATH'],
          COMPRESSO_API_KEY: key,
          FAULTS_URL: faultsUrl,
          REFUSED_URL: refusedUrl,
          PHOTO,
        },
        timeout: 60_000,
      });
      const result = JSON.parse(stdout.trim().split('\n').pop()!) as {
        recovered: string;
        recoveryWaits: number[];
        quota: unknown;
        silent: unknown;
        refused: unknown;
      };
      // Three tries of the first compress, one of the second, one usage: nothing more was sent.
      expect(seen.map((r) => r.path)).toEqual([
        '/api/v1/compress',
        '/api/v1/compress',
        '/api/v1/compress',
        '/api/v1/compress',
        '/api/v1/usage',
      ]);
      // The 503's Retry-After: 1 was waited out before the third try: a pause of 1000 ms was chosen
      // (not a wall-clock gap between requests, which a loaded machine stretches either way).
      expect(result.recoveryWaits).toContain(1000);
      const reference = await new Compresso(key, { baseUrl: srv.url }).compress(PHOTO, {
        format: 'webp',
        quality: 70,
        output: false,
      });
      expect(Buffer.from(result.recovered, 'base64').equals(reference.data)).toBe(true);
      expect(result.quota).toEqual({
        name: 'RateLimitError',
        code: 'QUOTA_EXCEEDED',
        status: 429,
        retryAfter: 3600,
        quotaExceeded: true,
        message: 'fake QUOTA_EXCEEDED',
      });
      expect(result.silent).toMatchObject({
        name: 'TimeoutError',
        code: 'TIMEOUT',
        message: `No complete answer from ${faultsUrl} within 300 ms (GET /api/v1/usage).`,
      });
      expect(result.refused).toMatchObject({
        name: 'ConnectionError',
        code: 'CONNECTION_ERROR',
        message: `Could not reach the Compresso server at ${refusedUrl} (GET /api/v1/usage: ECONNREFUSED).`,
      });
    },
  );

  it('TypeScript consumers get the declarations through both conditions (import: dist/esm, require: dist/cjs)', () => {
    const consumer = `import { Compresso, RateLimitError, type CompressResult, type BatchItem } from '@compresso/client';
const client = new Compresso('cmp_live_x', { baseUrl: 'http://localhost:3000', maxRetries: 1 });
export const pending: Promise<CompressResult> = client.compress('photo.jpg', { format: 'webp', maxDimension: 800 });
export const batch: Promise<BatchItem[]> = client.compressBatch(['a.jpg'], { outputDir: 'out', onProgress: (e) => e.completed });
export const wait: number | undefined = new RateLimitError('QUOTA_EXCEEDED', 'used up').retryAfter;
// @ts-expect-error: formats are checked
client.compress('photo.jpg', { format: 'bmp' });
`;
    writeFileSync(join(app, 'consumer.mts'), consumer);
    writeFileSync(join(app, 'consumer.cts'), consumer.replace(/^export const (\w+)/gm, 'const $1'));
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          strict: true,
          noEmit: true,
          types: ['node'],
          skipLibCheck: false,
        },
        files: ['consumer.mts', 'consumer.cts'],
      }),
    );
    const tsc = join(REPO, 'node_modules/typescript/bin/tsc');
    const checked = (() => {
      try {
        return execFileSync(process.execPath, [tsc, '-p', app, '--traceResolution'], { encoding: 'utf8' });
      } catch (e) {
        throw new Error(String((e as { stdout?: string }).stdout));
      }
    })();
    expect(checked).toMatch(
      /'@compresso\/client' was successfully resolved to '[^']*dist\/esm\/index\.d\.ts'/,
    );
    expect(checked).toMatch(
      /'@compresso\/client' was successfully resolved to '[^']*dist\/cjs\/index\.d\.ts'/,
    );
  });

  it('Node 16 without the optional form-data package: a clear error saying what to install', async () => {
    // Outside the repository, where no form-data can be found.
    const lonely = mkdtempSync(join(tmpdir(), 'compresso-client-no-form-data-'));
    try {
      installApp(lonely);
      const { stdout, stderr } = await run(RUNTIMES[0]![1], [join(lonely, 'app.cjs')], {
        cwd: lonely,
        env: {
          PATH: process.env['PATH'],
          COMPRESSO_API_KEY: key,
          COMPRESSO_BASE_URL: srv.url,
          PHOTO,
          OUT: join(lonely, 'x'),
        },
      }).then(
        () => ({ stdout: 'exited 0', stderr: '' }),
        (e: { stdout: string; stderr: string }) => e,
      );
      expect(stdout).not.toBe('exited 0');
      expect(stderr).toContain('MISSING_DEPENDENCY');
      expect(stderr).toContain('npm install form-data');
    } finally {
      rmSync(lonely, { recursive: true, force: true });
    }
  });
});
