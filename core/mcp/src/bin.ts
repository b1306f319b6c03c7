#!/usr/bin/env node
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createCompressoMcpServer } from './server.ts';
import { VERSION } from './version.ts';

// Standard output carries the protocol: one stray console.log from anywhere would corrupt a JSON-RPC
// frame and break the session, so everything that logs goes to standard error.
console.log = console.error;
console.info = console.error;
console.debug = console.error;

const server = createCompressoMcpServer();
const transport = new StdioServerTransport();

let closing = false;
async function shutdown(reason: string): Promise<void> {
  if (closing) return;
  closing = true;
  process.stderr.write(`compresso-mcp: ${reason}, closing\n`);
  try {
    await server.close();
  } finally {
    process.exit(0);
  }
}

process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));
// The client closing our standard input is how stdio MCP sessions normally end.
process.stdin.on('end', () => void shutdown('standard input closed'));

await server.connect(transport);
process.stderr.write(
  `compresso-mcp ${VERSION} on stdio (node ${process.version}); server ${process.env['COMPRESSO_BASE_URL'] ?? 'http://localhost:3000'}\n`,
);
