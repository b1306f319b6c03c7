import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, defineConfig } from './config.ts';
import { createLogger } from './logger.ts';
import { type ProcessContext, startProcess } from './process.ts';

const dir = mkdtempSync(join(tmpdir(), 'compresso-process-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const FIXTURE = join(import.meta.dirname, 'process-fixture.ts');

/** The fixture app as a child process, with a way to wait for a line on its stdout and for its exit. */
function runFixture(env: Record<string, string>) {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, [FIXTURE], {
    env: {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'info',
      COMPRESSO_DATA_DIR: mkdtempSync(join(dir, 'data-')),
      ...env,
    },
  });
  let stdout = '';
  let stderr = '';
  const waiters: { test: RegExp; resolve: () => void }[] = [];
  const settle = () => {
    for (const waiter of [...waiters]) {
      if (waiter.test.test(stdout)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  };
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    settle();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  // 'close', not 'exit': the process can end before its last output has been read from the pipe.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return {
    child,
    exited,
    output: () => stdout,
    errors: () => stderr,
    /** Resolves when stdout matches; rejects if the process exits first. */
    line(test: RegExp): Promise<void> {
      return Promise.race([
        new Promise<void>((resolve) => {
          waiters.push({ test, resolve });
          settle();
        }),
        exited.then(() => {
          if (!test.test(stdout)) throw new Error(`exited before ${test}:\n${stdout}\n${stderr}`);
        }),
      ]);
    },
  };
}

/** The `msg` of each log line, in order. */
const steps = (stdout: string) =>
  stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => String(JSON.parse(line).msg));

describe('startProcess in a real process', () => {
  it('opens config, database, queue and blobs, runs the app, and on SIGTERM closes in reverse and exits 0', async () => {
    const app = runFixture({ FIXTURE_GREETING: 'hello' });
    try {
      await app.line(/"msg":"ready /);
      expect(steps(app.output())).toContain('ready hello sqlite inline file');
      app.child.kill('SIGTERM');
      expect(await app.exited).toBe(0);
      const after = steps(app.output()).slice(steps(app.output()).indexOf('signal received'));
      expect(after).toEqual([
        'signal received',
        'fixture shutting down',
        'closing second',
        'closing first (database open)',
        'fixture stopped',
      ]);
    } finally {
      app.child.kill('SIGKILL');
    }
  });

  it('SIGINT closes the same way', async () => {
    const app = runFixture({ FIXTURE_GREETING: 'hello' });
    try {
      await app.line(/"msg":"ready /);
      app.child.kill('SIGINT');
      expect(await app.exited).toBe(0);
      expect(steps(app.output())).toContain('fixture stopped');
    } finally {
      app.child.kill('SIGKILL');
    }
  });

  it('a second signal while closing exits 1 at once and says why', async () => {
    const app = runFixture({ FIXTURE_GREETING: 'hello', FIXTURE_HANG: '1' });
    try {
      await app.line(/"msg":"ready /);
      app.child.kill('SIGTERM');
      // The hanging closer has started: the graceful close is under way and will not end by itself.
      await app.line(/"msg":"closing second"/);
      expect(app.child.exitCode).toBeNull();
      app.child.kill('SIGTERM');
      expect(await app.exited).toBe(1);
      const seen = steps(app.output());
      expect(seen).toContain('fixture: second signal, exiting without finishing in-flight work');
      expect(seen).not.toContain('closing first (database open)');
      expect(seen).not.toContain('fixture stopped');
    } finally {
      app.child.kill('SIGKILL');
    }
  });

  it('an invalid configuration stops the start with one message listing base and app problems', async () => {
    const app = runFixture({ FIXTURE_GREETING: 'x', PORT: 'eighty' });
    expect(await app.exited).not.toBe(0);
    expect(app.errors()).toMatch(/Invalid configuration:\n {2}- PORT: .*\n {2}- FIXTURE_GREETING: /);
    expect(app.output()).not.toContain('ready');
    expect(app.errors()).not.toContain('FIXTURE_GREETING: x');
  });
});

describe('startProcess in this process', () => {
  const silent = () =>
    createLogger(
      { logLevel: 'info' },
      new Writable({
        write(_chunk, _encoding, done) {
          done();
        },
      }),
    );

  it('closes the database after the app and once only; later calls get the same close', async () => {
    const order: string[] = [];
    const running = await startProcess({
      name: 'inline',
      env: { COMPRESSO_DATA_DIR: join(dir, 'inline') },
      logger: silent(),
      handleSignals: false,
      async start({ onClose, db }) {
        onClose('a', () => {
          order.push('a');
        });
        onClose('b', async () => {
          await db.ping();
          order.push('b');
        });
        return 42;
      },
    });
    expect(running.app).toBe(42);
    await running.db.ping();
    const [first, second] = [running.close(), running.close()];
    expect(first).toBe(second);
    await first;
    expect(order).toEqual(['b', 'a']);
    await expect(running.db.ping()).rejects.toThrow();
  });

  it('a start that fails closes what was opened, then throws its error', async () => {
    let seen: ProcessContext | undefined;
    let appClosed = false;
    await expect(
      startProcess({
        name: 'failing',
        env: { COMPRESSO_DATA_DIR: join(dir, 'failing') },
        logger: silent(),
        handleSignals: false,
        async start(context) {
          seen = context;
          context.onClose('part', () => {
            appClosed = true;
          });
          throw new Error('port taken');
        },
      }),
    ).rejects.toThrow('port taken');
    expect(appClosed).toBe(true);
    await expect(seen!.db.ping()).rejects.toThrow();
  });

  it('checkConfig refuses before anything opens; an app config loader types the config', async () => {
    const load = defineConfig({ fields: { shopUrl: { env: 'SHOP_URL', schema: z.url() } } });
    let started = false;
    await expect(
      startProcess({
        name: 'checked',
        env: { SHOP_URL: 'https://shop.example.com', COMPRESSO_DATA_DIR: join(dir, 'checked') },
        loadConfig: load,
        logger: silent(),
        handleSignals: false,
        checkConfig(config) {
          if (config.shopUrl.startsWith('https://shop.')) throw new Error(`refused ${config.shopUrl}`);
        },
        async start() {
          started = true;
        },
      }),
    ).rejects.toThrow('refused https://shop.example.com');
    expect(started).toBe(false);
    await expect(
      startProcess({ name: 'bad', env: { PORT: 'x' }, loadConfig: load, start: async () => {} }),
    ).rejects.toBeInstanceOf(ConfigError);
  });

  it("opens the database with an integration's migrations applied", async () => {
    const running = await startProcess({
      name: 'extended',
      env: { COMPRESSO_DATA_DIR: join(dir, 'extended') },
      logger: silent(),
      handleSignals: false,
      database: {
        migrations: [
          {
            namespace: 'notes',
            sqlite: [{ version: 1, sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)' }],
            postgres: [
              { version: 1, sql: 'CREATE TABLE notes (id integer PRIMARY KEY, body text NOT NULL)' },
            ],
          },
        ],
      },
      async start() {},
    });
    try {
      const { backend } = running.db;
      if (backend.kind !== 'sqlite') throw new Error('expected the embedded database');
      backend.sql.run('INSERT INTO notes (id, body) VALUES (?, ?)', 1, 'kept');
      expect(backend.sql.get('SELECT body FROM notes WHERE id = ?', 1)).toEqual({ body: 'kept' });
    } finally {
      await running.close();
    }
  });

  it('keeps closing after one closer fails, then reports the failure', async () => {
    const order: string[] = [];
    const running = await startProcess({
      name: 'stubborn',
      env: { COMPRESSO_DATA_DIR: join(dir, 'stubborn') },
      logger: silent(),
      handleSignals: false,
      async start({ onClose }) {
        onClose('ok', () => {
          order.push('ok');
        });
        onClose('broken', () => {
          throw new Error('stuck');
        });
      },
    });
    await expect(running.close()).rejects.toThrow('stuck');
    expect(order).toEqual(['ok']);
    await expect(running.db.ping()).rejects.toThrow();
  });
});
