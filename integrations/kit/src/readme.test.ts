import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { proAccount, startTestServer } from '@compresso/server/testing';
import { afterAll, describe, expect, it } from 'vitest';

/** The README's example runs as written, in a fresh Node process, against a real server on a loopback port. */
const repo = resolve(import.meta.dirname, '../../..');
const dir = mkdtempSync(join(tmpdir(), 'compresso-kit-readme-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const block = (name: string) => {
  const readme = readFileSync(resolve(import.meta.dirname, '../README.md'), 'utf8');
  const code = new RegExp(`<!-- run: ${name}[^>]*-->\\s*\`\`\`ts\\n([\\s\\S]*?)\`\`\``).exec(readme)?.[1];
  if (!code) throw new Error(`integrations/kit/README.md has no "run: ${name}" block`);
  return code;
};

describe('integrations/kit README', () => {
  it('the bulk-run example runs: a whole catalog optimized, the self-caused event a no-op', async () => {
    const server = await startTestServer({ dbPath: ':memory:', overrides: { logLevel: 'warn' } });
    try {
      const { key } = await proAccount(server.db, 'readme@example.com');
      const out = await new Promise<string>((done, fail) => {
        execFile(
          process.execPath,
          ['--input-type=module-typescript', '-e', block('bulk-run')],
          {
            cwd: repo,
            env: {
              PATH: process.env.PATH ?? '',
              COMPRESSO_API_KEY: key,
              COMPRESSO_BASE_URL: server.url,
              COMPRESSO_DATA_DIR: dir,
            },
            timeout: 60_000,
          },
          (error, stdout, stderr) =>
            error ? fail(new Error(`${error.message}\n${stderr}`)) : done(stdout.trim()),
        );
      });
      expect(out).toBe('completed 3/3 3 true\nunchanged');
    } finally {
      await server.close();
    }
  });
});
