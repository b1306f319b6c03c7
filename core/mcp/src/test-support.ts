import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js';
import { type CompressoMcpOptions, createCompressoMcpServer } from './server.ts';

export const REPO = resolve(import.meta.dirname, '../../..');
export const CORPUS = resolve(REPO, '../shared/corpus');
/** A real photo, 112 KB JPEG, 640×427. */
export const PHOTO = join(CORPUS, 'photo-skimage-rocket.jpg');
/** A real PNG with transparency, 42 KB. */
export const PNG = join(CORPUS, 'graphic-skimage-text.png');
/** A real iPhone-style HEIC, 50 KB. */
export const HEIC = join(CORPUS, 'photo-heic-rocket.heic');
/** A real photo over 1 MiB, the test server's upload limit. */
export const BIG_PHOTO = join(CORPUS, 'photo-mate-RainDrops.jpg');

export function workDir(prefix: string): {
  dir: string;
  copy(from: string, name: string): string;
  cleanup(): void;
} {
  const dir = mkdtempSync(join(tmpdir(), `compresso-mcp-${prefix}-`));
  return {
    dir,
    copy(from, name) {
      const to = join(dir, name);
      copyFileSync(from, to);
      return to;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface Connected {
  client: Client;
  logs: string[];
  call(
    name: string,
    args?: Record<string, unknown>,
    onprogress?: (p: Progress) => void,
  ): Promise<CallToolResult>;
  close(): Promise<void>;
}

/** The MCP server and the SDK's real client, joined by the SDK's in-memory transport pair. */
export async function connect(options: CompressoMcpOptions): Promise<Connected> {
  const logs: string[] = [];
  const server = createCompressoMcpServer({ log: (line) => logs.push(line), ...options });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'compresso-mcp-test', version: '0.0.0' });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  // Listing first makes the client validate every structuredContent against the tool's output schema.
  await client.listTools();
  return {
    client,
    logs,
    async call(name, args = {}, onprogress) {
      return (await client.callTool(
        { name, arguments: args },
        undefined,
        onprogress ? { onprogress, timeout: 120_000 } : { timeout: 120_000 },
      )) as CallToolResult;
    },
    async close() {
      await client.close();
      await server.close();
    },
  };
}

/** The human text of a result (first block). */
export function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === 'text' ? first.text : '';
}

/** The error facts of an isError result (its JSON block). */
export function errorOf(result: CallToolResult): Record<string, unknown> & { code: string; message: string } {
  const block = result.content.find((c) => c.type === 'text' && c.text.startsWith('{"error"'));
  if (block?.type !== 'text') throw new Error(`no error JSON in ${JSON.stringify(result.content)}`);
  return (JSON.parse(block.text) as { error: Record<string, unknown> & { code: string; message: string } })
    .error;
}
