import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CliIo } from './io.ts';
import { run } from './program.ts';

const dir = mkdtempSync(join(tmpdir(), 'compresso-cli-worker-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function cli(env: Record<string, string | undefined>, ...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    cwd: dir,
  };
  const saved = { ...process.env };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  try {
    const status = await run([...argv, '--data-dir', 'data'], io);
    return { status, stdout, stderr };
  } finally {
    process.env = saved;
  }
}

/**
 * The refusals of `compresso worker` and `serve --workers`; running them for real is
 * test/scale/scale.test.ts (child processes on PostgreSQL and Redis).
 */
describe('compresso worker and serve --workers', () => {
  it('worker without REDIS_URL is a usage error that says what to do instead', async () => {
    const r = await cli({ REDIS_URL: undefined }, 'worker');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('compresso worker needs REDIS_URL');
    expect(r.stderr).toContain('--workers');
  });

  it('serve --workers 0 without REDIS_URL is refused before anything starts', async () => {
    const r = await cli({ REDIS_URL: undefined }, 'serve', '--port', '0', '--workers', '0');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--workers 0 (COMPRESSO_WORKERS=0) needs REDIS_URL');
  });

  it('rejects counts that are not whole numbers in range', async () => {
    expect((await cli({}, 'worker', '--concurrency', '0')).status).toBe(2);
    expect((await cli({}, 'serve', '--workers', 'many')).status).toBe(2);
    const help = await cli({}, 'worker', '--help');
    expect(help.stdout).toContain('--concurrency <n>');
  });
});
