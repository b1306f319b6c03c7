#!/usr/bin/env node
// The npm registry mirror on our build machines carries only the Linux builds of packages that ship
// native binaries per platform (turbo, biome, …). npm then leaves the other platforms' optional
// dependencies out of package-lock.json, and `npm ci` refuses the lockfile as out of sync. This adds
// the missing entries back as optional, with their os/cpu, exactly as npm writes them where the
// registry has them: npm skips them on other platforms and fetches them on the platform they are for.
// Run after every `npm install` that changes the lockfile: `node .ci/lockfile-platforms.mjs`.
import { readFileSync, writeFileSync } from 'node:fs';

const path = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(path, 'utf8'));
const packages = lock.packages;

const OS_PATTERNS = [
  ['darwin', /darwin/],
  ['win32', /win32|windows/],
  ['android', /android/],
  ['freebsd', /freebsd/],
  ['openbsd', /openbsd/],
  ['netbsd', /netbsd/],
  ['linux', /linux/],
];
const CPU_PATTERNS = [
  ['arm64', /arm64|aarch64/],
  ['x64', /x64|-64$|amd64/],
  ['arm', /arm/],
];

function platformOf(name) {
  const n = name.toLowerCase();
  const os = OS_PATTERNS.find(([, re]) => re.test(n))?.[0];
  const cpu = CPU_PATTERNS.find(([, re]) => re.test(n))?.[0];
  const entry = {};
  if (cpu) entry.cpu = [cpu];
  if (os) entry.os = [os];
  if (/musl/.test(n)) entry.libc = ['musl'];
  return entry;
}

let added = 0;
for (const [key, meta] of Object.entries(packages)) {
  for (const [dep, range] of Object.entries(meta.optionalDependencies ?? {})) {
    const base = key.startsWith('node_modules/') || key === '' ? key : `node_modules/${key}`;
    const nested = `${base ? `${base}/` : ''}node_modules/${dep}`;
    const hoisted = `node_modules/${dep}`;
    if (packages[nested] || packages[hoisted]) continue;
    const version = String(range).replace(/^[\^~=]/, '');
    if (!/^\d+\.\d+\.\d+/.test(version)) continue;
    packages[hoisted] = { version, ...platformOf(dep), optional: true };
    added++;
  }
}
const sorted = Object.fromEntries(
  Object.entries(packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)),
);
lock.packages = sorted;
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`lockfile: ${added} platform entr${added === 1 ? 'y' : 'ies'} added`);
