import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '../../..');
const { version } = JSON.parse(readFileSync(join(here, '../package.json'), 'utf8')) as { version: string };
// The repository's Node 24 first, as `npm run` arranges it; npm itself is found further along PATH.
const env = { ...process.env, PATH: `${join(repoRoot, 'node_modules/.bin')}:${process.env.PATH ?? ''}` };

describe('the ways to start compresso from the repository root', () => {
  it.each([
    ['npm run compresso', 'npm', ['run', '--silent', 'compresso', '--', '--version']],
    ['npx compresso (workspace bin link)', 'npx', ['--no-install', 'compresso', '--version']],
    ['the bin link itself', join(repoRoot, 'node_modules/.bin/compresso'), ['--version']],
  ])('%s prints the version', (_name, command, args) => {
    const result = spawnSync(command, args, { cwd: repoRoot, env, encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe(version);
  });
});
