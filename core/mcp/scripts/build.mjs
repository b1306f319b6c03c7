#!/usr/bin/env node
// Bundles src/ into dist/ as plain JavaScript for Node >= 18 (npx runs it on whatever Node the user
// has: no type stripping before Node 22.6, and none inside node_modules at all). @compresso/schema is
// TypeScript source and not published on its own, so it is bundled in; the published dependencies
// (@compresso/client, @modelcontextprotocol/sdk, zod) stay imports, resolved from node_modules.
// `--out <dir>` builds elsewhere (the stdio test builds privately so it never races a reader of dist/).
import { chmodSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const at = process.argv.indexOf('--out');
const out = at > 0 ? resolve(process.argv[at + 1]) : join(root, 'dist');
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const external = Object.keys(manifest.dependencies ?? {});
const isExternal = (id) => external.some((name) => id === name || id.startsWith(`${name}/`));

rmSync(out, { recursive: true, force: true });
// src/bin.ts starts with `#!/usr/bin/env node`; the bundler keeps that line at the top. One build
// for both entries, so the code they share is one chunk rather than two copies.
await build({
  input: { 'compresso-mcp': join(root, 'src/bin.ts'), index: join(root, 'src/index.ts') },
  platform: 'node',
  external: isExternal,
  // Workspace packages export their TypeScript source under this condition.
  resolve: { conditionNames: ['compresso-source', 'import', 'node', 'default'] },
  transform: { target: 'node18' },
  output: { dir: out, format: 'esm', entryFileNames: '[name].js', chunkFileNames: '[name]-[hash].js' },
  logLevel: 'warn',
});
chmodSync(join(out, 'compresso-mcp.js'), 0o755);
console.log(`build: ${out}/compresso-mcp.js and ${out}/index.js`);
