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

describe('compresso serve and signals', () => {
  it('a first SIGTERM waits for the upload in flight; a second one exits 1 at once and says why', async () => {
    const { spawn } = await import('node:child_process');
    const { request } = await import('node:http');
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { loadConfig, openDatabase } = await import('@compresso/runtime');
    const { proAccount } = await import('@compresso/server/testing');
    const dataDir = mkdtempSync(join(tmpdir(), 'compresso-signals-'));
    const db = await openDatabase(loadConfig({ COMPRESSO_DATA_DIR: dataDir }));
    const { key } = await proAccount(db, 'signals@example.com');
    await db.close();
    const child = spawn(
      join(repoRoot, 'node_modules/.bin/compresso'),
      ['serve', '--port', '0', '--host', '127.0.0.1', '--data-dir', dataDir],
      { cwd: repoRoot, env: { ...env, LOG_LEVEL: 'info', COMPRESSO_SHUTDOWN_TIMEOUT_MS: '30000' } },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const until = async (check: () => boolean, what: string) => {
      for (let i = 0; i < 300 && !check(); i++) await new Promise((r) => setTimeout(r, 50));
      if (!check()) throw new Error(`timed out waiting for ${what}\n${stdout}\n${stderr}`);
    };
    try {
      await until(() => /serving (http:\/\/[^/]+)/.test(stderr), 'the server');
      const base = /serving (http:\/\/[^/]+)/.exec(stderr)![1]!;
      // An upload that never finishes: the graceful close has to wait for it (30 s here). The server
      // sends 100 Continue only once the handler reads the body, so after it the upload is in flight.
      const upload = request(`${base}/api/v1/compress`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'multipart/form-data; boundary=x',
          'content-length': '1000000',
          expect: '100-continue',
        },
      });
      upload.on('error', () => {});
      const continued = new Promise((r) => upload.once('continue', r));
      upload.flushHeaders();
      await continued;
      upload.write('--x\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\n\r\n');

      child.kill('SIGTERM');
      await until(() => stdout.includes('shutting down'), 'the graceful close to start');
      expect(child.exitCode).toBeNull();
      child.kill('SIGTERM');
      expect(await exited).toBe(1);
      expect(stdout).toContain('second signal, exiting without finishing in-flight work');
      upload.destroy();
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
