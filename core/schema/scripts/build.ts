#!/usr/bin/env node
// Writes dist/contract.json: the contract (JSON Schemas, routes, headers, codes, options, formats) as
// plain JSON for the consumers that are not TypeScript — the Python tests, the PHP client, the
// WordPress admin. `--stdout` prints it instead (the Python drift test reads it that way, so it
// never depends on a build having run).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { contractDocument } from '../src/contract.ts';

const text = `${JSON.stringify(contractDocument(), null, 2)}\n`;
if (process.argv.includes('--stdout')) {
  process.stdout.write(text);
} else {
  const out = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'contract.json');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, text);
  console.log(`build: ${out}`);
}
