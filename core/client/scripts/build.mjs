#!/usr/bin/env node
// Builds dist/esm and dist/cjs (JavaScript for Node >= 16 plus .d.ts) with the repository's tsc.
// Consumers cannot rely on type stripping (Node 16/18, and Node refuses it inside node_modules), so
// this package, unlike the others, ships compiled code. `--out <dir>` builds elsewhere (the
// compatibility test builds into a private folder so it never races a reader of dist/).
//
// The client follows @compresso/schema's contract table (routes, option names, header codec, codes)
// yet has no runtime dependency: the table's zod-free files (the package's `./wire` entry, which
// imports nothing) are copied beside the client's sources into a staging folder, the import of
// `@compresso/schema/wire` is pointed at the copy, and tsc compiles both into dist/{esm,cjs}/contract.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const at = process.argv.indexOf('--out');
const out = at > 0 ? resolve(process.argv[at + 1]) : join(root, 'dist');
const tsc = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');

/** The files behind `@compresso/schema/wire`: the entry and what it imports, nothing else. */
const schemaSrc = join(dirname(createRequire(import.meta.url).resolve('@compresso/schema/wire')));
const WIRE_FILES = [
  'wire.ts',
  'ai-table.ts',
  'body-members.ts',
  'error-codes.ts',
  'formats.ts',
  'option-table.ts',
  'result-headers.ts',
  'routes.ts',
];

// Inside the package folder (not under --out, which may be anywhere) so tsc finds @types/node.
const stage = join(root, `.build-stage-${process.pid}`);
rmSync(out, { recursive: true, force: true });
rmSync(stage, { recursive: true, force: true });
try {
  mkdirSync(join(stage, 'src', 'contract'), { recursive: true });
  for (const file of readdirSync(join(root, 'src'))) {
    if (!file.endsWith('.ts') || file.endsWith('.test.ts') || file.startsWith('test-')) continue;
    const text = readFileSync(join(root, 'src', file), 'utf8').replace(
      /from '@compresso\/schema\/wire'/g,
      "from './contract/wire.ts'",
    );
    writeFileSync(join(stage, 'src', file), text);
  }
  for (const file of WIRE_FILES) {
    const text = readFileSync(join(schemaSrc, file), 'utf8');
    // The copy must stay self-contained: an import of anything but its siblings would be a
    // dependency of the published client (schema's contract test checks the same).
    for (const [, specifier] of text.matchAll(/from\s+'([^']+)'/g)) {
      if (!WIRE_FILES.includes(specifier.replace(/^\.\//, ''))) {
        throw new Error(
          `build: @compresso/schema/${file} imports ${specifier}; the wire files must import only each other`,
        );
      }
    }
    writeFileSync(join(stage, 'src', 'contract', file), text);
  }
  for (const [config, format, type] of [
    ['tsconfig.build.json', 'esm', 'module'],
    ['tsconfig.build.cjs.json', 'cjs', 'commonjs'],
  ]) {
    const staged = join(stage, config);
    writeFileSync(
      staged,
      JSON.stringify({
        extends: join(root, config),
        compilerOptions: { rootDir: './src' },
        include: ['./src/**/*.ts'],
      }),
    );
    const dir = join(out, format);
    const run = spawnSync(process.execPath, [tsc, '-p', staged, '--outDir', dir], { stdio: 'inherit' });
    if (run.status !== 0) {
      console.error(`build: tsc -p ${config} failed`);
      process.exit(run.status ?? 1);
    }
    mkdirSync(dir, { recursive: true });
    // tsc rewrites `./x.ts` to `./x.js` in JavaScript but not in declarations; TypeScript before 5.x
    // style resolution (and some tools) cannot follow a `.ts` specifier inside a .d.ts.
    for (const path of declarations(dir)) {
      writeFileSync(path, readFileSync(path, 'utf8').replace(/(from\s+'\.{1,2}\/[^']+)\.ts'/g, "$1.js'"));
    }
    // Each half states its module system, so the files mean the same wherever the folder is.
    writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ type }, null, 2)}\n`);
  }
} finally {
  rmSync(stage, { recursive: true, force: true });
}
console.log(`build: ${out}/esm and ${out}/cjs`);

function declarations(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return declarations(path);
    return name.endsWith('.d.ts') ? [path] : [];
  });
}
