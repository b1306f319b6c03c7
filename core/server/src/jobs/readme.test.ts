import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';

const repo = resolve(import.meta.dirname, '../../../..');
const bin = join(repo, 'core/cli/src/bin.ts');
const dir = mkdtempSync(join(tmpdir(), 'compresso-readme-batch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('README: batch jobs', () => {
  it('runs as written against `compresso serve` on the embedded defaults', async () => {
    const readme = readFileSync(join(import.meta.dirname, '../../README.md'), 'utf8');
    const block = /<!-- batch[^>]*-->\s*```sh\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const env = {
      PATH: `${repo}/node_modules/.bin:${process.env.PATH}`,
      HOME: dir,
      COMPRESSO_DATA_DIR: join(dir, 'data'),
      LOG_LEVEL: 'warn',
    };
    const cli = (...argv: string[]) => {
      const r = spawnSync(process.execPath, [bin, ...argv], { env, cwd: dir, encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.trim();
    };
    cli('account', 'create', '--email', 'batch@example.com');
    cli('promo', 'create', 'BATCH', '--plan', 'pro', '--uses', '1');
    cli('account', 'plan', 'batch@example.com', '--promo', 'BATCH');
    const key = cli('keys', 'create', '--account', 'batch@example.com', '--name', 'readme');
    const corpus = resolve(repo, '../shared/corpus');
    await sharp(join(corpus, 'photo-skimage-rocket.jpg')).resize(200).jpeg().toFile(join(dir, 'a.jpg'));
    await sharp(join(corpus, 'icon-oxygen-folder-red.png')).resize(64).png().toFile(join(dir, 'b.png'));

    const server = spawn(process.execPath, [bin, 'serve', '--port', '0', '--host', '127.0.0.1'], {
      env,
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    try {
      const base = await new Promise<string>((done, fail) => {
        let text = '';
        server.stderr.on('data', (c: Buffer) => {
          text += c.toString();
          const url = /serving (http:\/\/\S+)\/api\/v1/.exec(text)?.[1];
          if (url) done(url);
        });
        server.on('exit', (code) => fail(new Error(`serve exited (${code}): ${text}`)));
      });
      const script = block!.replaceAll('http://localhost:3000', base);
      const stdout = await new Promise<string>((done, fail) => {
        execFile(
          'bash',
          ['-euo', 'pipefail', '-c', script],
          { cwd: dir, env: { ...env, KEY: key }, timeout: 60_000 },
          (error, out, err) => (error ? fail(new Error(`${error.message}\n${err}`)) : done(out)),
        );
      });
      expect((await sharp(join(dir, 'a.webp')).metadata()).format).toBe('webp');
      // The URL batch is accepted (202) and answered with its job; fetching happens later.
      expect(JSON.parse(stdout)).toMatchObject({ status: 'queued', progress: { total: 1 } });

      // SIGTERM is a graceful stop: the process closes its queue and database and exits 0.
      const exited = new Promise<number | null>((r) => server.once('exit', (code) => r(code)));
      server.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      // Only when a step above failed: never leave a server behind, and never hide that failure.
      if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
    }
  });
});
