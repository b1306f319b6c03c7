#!/usr/bin/env node
// Builds dist/esm and dist/cjs (JavaScript for Node >= 16 plus .d.ts) with the repository's tsc.
// Consumers cannot rely on type stripping (Node 16/18, and Node refuses it inside node_modules), so
// this package, unlike the others, ships compiled code. `--out <dir>` builds elsewhere (the
// compatibility test builds into a private folder so it never races a reader of dist/).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const at = process.argv.indexOf('--out');
const out = at > 0 ? resolve(process.argv[at + 1]) : join(root, 'dist');
const tsc = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');

rmSync(out, { recursive: true, force: true });
for (const [config, format, type] of [
  ['tsconfig.build.json', 'esm', 'module'],
  ['tsconfig.build.cjs.json', 'cjs', 'commonjs'],
]) {
  const dir = join(out, format);
  const run = spawnSync(process.execPath, [tsc, '-p', join(root, config), '--outDir', dir], {
    stdio: 'inherit',
  });
  if (run.status !== 0) {
    console.error(`build: tsc -p ${config} failed`);
    process.exit(run.status ?? 1);
  }
  mkdirSync(dir, { recursive: true });
  // tsc rewrites `./x.ts` to `./x.js` in JavaScript but not in declarations; TypeScript before 5.x
  // style resolution (and some tools) cannot follow a `.ts` specifier inside a .d.ts.
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.d.ts'))) {
    const path = join(dir, file);
    writeFileSync(path, readFileSync(path, 'utf8').replace(/(from\s+'\.{1,2}\/[^']+)\.ts'/g, "$1.js'"));
  }
  // Each half states its module system, so the files mean the same wherever the folder is.
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ type }, null, 2)}\n`);
}
console.log(`build: ${out}/esm and ${out}/cjs`);
