import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Compresso } from '@compresso/client';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * One contract, many transports: the same photo with the same options, sent through curl, the Node
 * client (its built package), the Python client and the compresso-mcp binary over stdio, to one real
 * server, must come back as the same bytes. Each of the four is run the way its user runs it, so a
 * client that drops, renames or re-encodes an option (or a default sent in its place) shows up here.
 */
const run = promisify(execFile);
const repo = resolve(import.meta.dirname, '../..');
// A real photo with EXIF, ICC and XMP, so strip_exif has something to keep or remove; 1000x872.
const photo = resolve(repo, '../shared/corpus/photo-skimage-hubble_deep_field.jpg');
const python = process.env.COMPRESSO_PYTHON ?? 'python3';

interface Options {
  output_format: 'webp' | 'avif';
  quality: number;
  max_dimension: number;
  strip_exif: boolean;
}
// Two sets that differ in every option, so agreement cannot come from one option being ignored by all.
const CASES: { name: string; options: Options; width: number; exif: boolean }[] = [
  {
    name: 'webp-q70-600-keep',
    options: { output_format: 'webp', quality: 70, max_dimension: 600, strip_exif: false },
    width: 600,
    exif: true,
  },
  {
    name: 'avif-q45-320-strip',
    options: { output_format: 'avif', quality: 45, max_dimension: 320, strip_exif: true },
    width: 320,
    exif: false,
  },
];

let srv: TestServer;
let key: string;
let out: string;

beforeAll(async () => {
  srv = await startTestServer({ dbPath: ':memory:' });
  ({ key } = await proAccount(srv.db, 'same-bytes@example.com'));
  out = mkdtempSync(join(tmpdir(), 'compresso-same-bytes-'));
});
afterAll(async () => {
  await srv?.close();
  if (out) rmSync(out, { recursive: true, force: true });
});

async function viaCurl(o: Options, target: string): Promise<void> {
  await run('curl', [
    '--silent',
    '--show-error',
    '--fail-with-body',
    ...['-H', `Authorization: Bearer ${key}`],
    ...['-F', `file=@${photo}`],
    ...['-F', `output_format=${o.output_format}`],
    ...['-F', `quality=${o.quality}`],
    ...['-F', `max_dimension=${o.max_dimension}`],
    ...['-F', `strip_exif=${o.strip_exif}`],
    ...['-o', target],
    `${srv.url}/api/v1/compress`,
  ]);
}

async function viaNode(o: Options, target: string): Promise<void> {
  await new Compresso(key, { baseUrl: srv.url }).compress(photo, {
    format: o.output_format,
    quality: o.quality,
    maxDimension: o.max_dimension,
    stripExif: o.strip_exif,
    output: target,
  });
}

const PYTHON = `
import json, sys
from compresso import Compresso
photo, target, o = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with Compresso() as client:
    client.compress(photo, target, format=o["output_format"], quality=o["quality"],
                    max_dimension=o["max_dimension"], strip_exif=o["strip_exif"])
`;

async function viaPython(o: Options, target: string): Promise<void> {
  await run(python, ['-c', PYTHON, photo, target, JSON.stringify(o)], {
    env: {
      PATH: process.env.PATH,
      COMPRESSO_API_KEY: key,
      COMPRESSO_BASE_URL: srv.url,
      PYTHONPATH: join(repo, 'core/python/src'),
      PYTHONDONTWRITEBYTECODE: '1',
    },
  });
}

async function viaMcp(client: Client, o: Options, target: string): Promise<void> {
  const result = (await client.callTool({
    name: 'compress_image',
    arguments: { file_path: photo, output_path: target, ...o },
  })) as CallToolResult;
  expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
}

describe('the same photo and options through curl, Node, Python and MCP', () => {
  it('give the same bytes, with the options applied', async () => {
    // The binary npm links as `compresso-mcp` (what `npx @compresso/mcp` runs), on this Node.
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [join(repo, 'core/mcp/bin/compresso-mcp.js')],
      env: { COMPRESSO_API_KEY: key, COMPRESSO_BASE_URL: srv.url },
      stderr: 'pipe',
    });
    const mcp = new Client({ name: 'same-bytes-test', version: '0.0.0' });
    await mcp.connect(transport);
    const references: Buffer[] = [];
    try {
      for (const { name, options, width, exif } of CASES) {
        const target = (via: string) => join(out, `${name}.${via}.${options.output_format}`);
        await viaCurl(options, target('curl'));
        await viaNode(options, target('node'));
        await viaPython(options, target('python'));
        await viaMcp(mcp, options, target('mcp'));
        const reference = readFileSync(target('curl'));
        for (const via of ['node', 'python', 'mcp']) {
          expect(readFileSync(target(via)).equals(reference), `${name}: ${via} differs from curl`).toBe(true);
        }
        const meta = await sharp(reference).metadata();
        // sharp names AVIF 'heif'.
        expect([meta.format, meta.width, Boolean(meta.exif)], name).toEqual([
          options.output_format === 'avif' ? 'heif' : 'webp',
          width,
          exif,
        ]);
        references.push(reference);
      }
    } finally {
      await mcp.close();
    }
    expect(references[0]!.equals(references[1]!)).toBe(false);
  });
});
