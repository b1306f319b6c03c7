// `npm run build`, second step: packs plugin/ into compresso.zip (every file under compresso/, as
// WordPress expects a plugin zip), with the built screen (plugin/build/, made by the first step) and
// without what only developers use (tests, PHPUnit and linter configs, source maps, dot files).
// Plain JavaScript, not TypeScript, so the build runs on Node 20 as well as 24.
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { zipSync } from 'fflate';

const here = dirname(fileURLToPath(import.meta.url));
const pluginDir = join(here, '..', 'plugin');
const out = join(here, '..', 'compresso.zip');

/** Paths (relative to plugin/, with /) that never go into the zip. */
export const EXCLUDED = [
  /(^|\/)\./, // dot files and folders (.DS_Store, .phpunit.result.cache, .gitignore)
  /(^|\/)tests?\//,
  /(^|\/)node_modules\//,
  /^phpunit\.xml(\.dist)?$/,
  /^phpcs\.xml(\.dist)?$/,
  /^composer\.(json|lock)$/,
  /\.map$/,
];

const required = ['compresso.php', 'build/bulk.js', 'build/bulk.asset.php'];
for (const file of required) {
  if (!existsSync(join(pluginDir, file))) {
    process.stderr.write(
      `zip: plugin/${file} is missing (run the whole \`npm run build\`, not only this step)\n`,
    );
    process.exit(1);
  }
}

const files = {};
// A fixed date: the same tree gives the same zip.
const mtime = new Date('2026-01-01T00:00:00Z');
for (const name of readdirSync(pluginDir, { recursive: true, encoding: 'utf8' }).sort()) {
  const path = join(pluginDir, name);
  const rel = relative(pluginDir, path).split(sep).join('/');
  if (!statSync(path).isFile() || EXCLUDED.some((pattern) => pattern.test(rel))) continue;
  files[`compresso/${rel}`] = [new Uint8Array(readFileSync(path)), { mtime }];
}
const zip = zipSync(files, { level: 9 });
writeFileSync(out, zip);
process.stdout.write(
  `zip: ${relative(process.cwd(), out)}, ${Object.keys(files).length} files, ${zip.length} bytes\n`,
);
