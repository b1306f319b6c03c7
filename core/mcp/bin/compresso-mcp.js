#!/usr/bin/env node
// The command npm links. It stays a committed file so `npm ci` links it on a clean clone (npm links
// no bin whose file is missing at install time, and dist/ is built after the install).
import { existsSync } from 'node:fs';

const entry = new URL('../dist/compresso-mcp.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write(
    'compresso-mcp: dist/ is not built. In the Compresso repository run `npm run build -w @compresso/mcp` (npm ci does it through the root prepare script).\n',
  );
  process.exit(1);
}
await import(entry.href);
