import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import sharp from 'sharp';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PHOTO, REPO, workDir } from './test-support.ts';

/** The oldest Node the package declares (engines >= 18), installed from npm for the client's tests. */
const NODE_18 = resolve(REPO, 'test/node-runtimes/node18/node_modules/.bin/node');
const root = resolve(import.meta.dirname, '..');
// Built privately from the current source, inside the package so its imports resolve from the
// repository's node_modules, and never racing another test that reads dist/ (named dist so the
// linter skips it should a run die before cleaning up).
const scratch = join(root, '.test-build', `stdio-${process.pid}`);
const out = join(scratch, 'dist');

let srv: TestServer;
const work = workDir('stdio');

beforeAll(async () => {
  execFileSync(process.execPath, [join(root, 'scripts/build.mjs'), '--out', out], { stdio: 'pipe' });
  srv = await startTestServer({ dbPath: ':memory:' });
});

afterAll(async () => {
  await srv?.close();
  work.cleanup();
  rmSync(scratch, { recursive: true, force: true });
});

it('the built compresso-mcp binary, spawned over stdio on Node 18, compresses an image against a real server', async () => {
  expect(existsSync(NODE_18), `Node 18 is missing at ${NODE_18} (npm ci installs it on linux-x64)`).toBe(
    true,
  );
  const { key } = await proAccount(srv.db, 'stdio@example.com');
  const transport = new StdioClientTransport({
    command: NODE_18,
    args: [join(out, 'compresso-mcp.js')],
    // The SDK hands the child only a safe list of variables (PATH, HOME…): the key and URL are passed.
    env: { COMPRESSO_API_KEY: key, COMPRESSO_BASE_URL: srv.url },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const client = new Client({ name: 'stdio-test', version: '0.0.0' });
  const protocolErrors: Error[] = [];
  client.onerror = (error) => protocolErrors.push(error);
  await client.connect(transport);
  try {
    expect(client.getServerVersion()).toMatchObject({ name: 'compresso-mcp', version: '0.1.0' });
    expect(client.getInstructions()).toContain('compress_image');
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'alt_text',
      'compress_batch',
      'compress_image',
      'edit_image',
      'generate_image',
      'get_usage',
      'image_info',
    ]);

    const source = work.copy(PHOTO, 'rocket.jpg');
    const result = (await client.callTool({
      name: 'compress_image',
      arguments: { file_path: source, output_format: 'webp', max_dimension: 320 },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    const s = result.structuredContent as {
      output_path: string;
      output_size: number;
      width: number;
      height: number;
    };
    expect(s.output_path).toBe(join(work.dir, 'rocket.min.webp'));
    expect([s.width, s.height]).toEqual([320, 214]);
    const meta = await sharp(s.output_path).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', 320, 214]);
    expect(readFileSync(s.output_path).length).toBe(s.output_size);
    expect(result.content.some((c) => c.type === 'image' && c.mimeType === 'image/webp')).toBe(true);
  } finally {
    await client.close();
  }
  // Standard output carried only protocol frames; the logs went to standard error.
  expect(protocolErrors).toEqual([]);
  expect(stderr).toMatch(
    /compresso-mcp 0\.1\.0 on stdio \(node v18\.\d+\.\d+\); server http:\/\/127\.0\.0\.1:\d+/,
  );
  expect(stderr).toMatch(/compresso-mcp: compress_image ok in \d+ ms/);
  expect(stderr).toContain('standard input closed, closing');
  expect(stderr).not.toContain(key);
});

it('the committed launcher says how to build when dist/ is missing, on Node 18 too', () => {
  const bin = join(work.dir, 'unbuilt', 'bin');
  mkdirSync(bin, { recursive: true });
  copyFileSync(join(root, 'bin/compresso-mcp.js'), join(bin, 'compresso-mcp.js'));
  // The copy sits beside no dist/ and under no package.json of type module: mark it as ESM as npm's copy is.
  copyFileSync(join(root, 'package.json'), join(work.dir, 'unbuilt', 'package.json'));
  const run = spawnSync(NODE_18, [join(bin, 'compresso-mcp.js')], { encoding: 'utf8', input: '' });
  expect(run.status).toBe(1);
  expect(run.stdout).toBe('');
  expect(run.stderr).toContain('dist/ is not built');
  expect(run.stderr).toContain('npm run build -w @compresso/mcp');
});
