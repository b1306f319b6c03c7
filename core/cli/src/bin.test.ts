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

describe('compresso serve on a port that is taken', () => {
  it('says so and how to fix it, exits 1 without a stack trace, and does not hang on open handles', async () => {
    const { createServer } = await import('node:net');
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const { port } = taken.address() as { port: number };
    const dataDir = mkdtempSync(join(tmpdir(), 'compresso-port-'));
    try {
      const result = spawnSync(
        join(repoRoot, 'node_modules/.bin/compresso'),
        ['serve', '--port', String(port), '--host', '127.0.0.1', '--data-dir', dataDir],
        // The timeout is the "does not hang" check: a process kept alive by the database, the queue or
        // the batch worker would be killed here and fail on its status.
        { cwd: repoRoot, env: { ...env, LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 20_000 },
      );
      expect(result.status, result.stderr).toBe(1);
      expect(result.stderr).toContain(`127.0.0.1:${port} is already in use (another compresso serve?)`);
      expect(result.stderr).toContain('--port or PORT');
      expect(result.stderr).not.toContain('a bug');
      expect(result.stderr).not.toMatch(/\n\s+at /);
    } finally {
      taken.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
