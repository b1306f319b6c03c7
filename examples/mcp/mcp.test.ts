import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PHOTO, workDir } from '../../core/mcp/src/test-support.ts';

// The documented MCP client configuration, run as an MCP client runs it: exactly its command and
// arguments, its environment (with a real key and server filled in), against a real server.
const here = import.meta.dirname;
const repo = resolve(here, '../..');
const config = JSON.parse(readFileSync(join(here, 'mcp-servers.json'), 'utf8')) as {
  mcpServers: Record<string, { command: string; args: string[]; env: Record<string, string> }>;
};

let srv: TestServer;
const work = workDir('example');

beforeAll(async () => {
  srv = await startTestServer({ dbPath: ':memory:' });
});
afterAll(async () => {
  await srv?.close();
  work.cleanup();
});

describe('examples/mcp/mcp-servers.json', () => {
  it('names one server, compresso-mcp through npx, configured by COMPRESSO_API_KEY and COMPRESSO_BASE_URL', () => {
    const entry = config.mcpServers['compresso'];
    expect(Object.keys(config.mcpServers)).toEqual(['compresso']);
    expect(entry?.command).toBe('npx');
    expect(entry?.args).toContain('@compresso/mcp');
    expect(Object.keys(entry?.env ?? {}).sort()).toEqual(['COMPRESSO_API_KEY', 'COMPRESSO_BASE_URL']);
  });

  it('starts the server it names and compress_image works through it', async () => {
    const entry = config.mcpServers['compresso']!;
    const { key } = await proAccount(srv.db, 'mcp-example@example.com');
    const transport = new StdioClientTransport({
      command: entry.command,
      args: entry.args,
      env: { ...entry.env, COMPRESSO_API_KEY: key, COMPRESSO_BASE_URL: srv.url },
      // Inside the repository npx finds the workspace package; a user's npx fetches it from the registry.
      cwd: repo,
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const client = new Client({ name: 'example-config-test', version: '0.0.0' });
    try {
      await client.connect(transport);
    } catch (error) {
      throw new Error(`the configured command did not start an MCP server: ${String(error)}\n${stderr}`);
    }
    try {
      const source = work.copy(PHOTO, 'example.jpg');
      const result = (await client.callTool({
        name: 'compress_image',
        arguments: { file_path: source, output_format: 'avif', quality: 60 },
      })) as CallToolResult;
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      const s = result.structuredContent as { output_path: string; output_size: number; input_size: number };
      expect(s.output_path).toBe(join(work.dir, 'example.min.avif'));
      expect(s.output_size).toBeLessThan(s.input_size);
      expect((await sharp(s.output_path).metadata()).format).toBe('heif'); // sharp reports AVIF as heif
    } finally {
      await client.close();
    }
    expect(stderr).toContain('compresso-mcp 0.1.0 on stdio');
  });
});
