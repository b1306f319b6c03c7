import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { hashKey } from './api-keys.ts';
import { loadConfig } from './config.ts';
import { openDatabase } from './open-database.ts';
import { createAccount, createApiKey } from './operator.ts';
import { postgresDatabase } from './postgres.ts';

/**
 * Runs against a real PostgreSQL (the CI machine starts one on 127.0.0.1:5432 with a `test` database).
 * Each database the battery opens lives in its own throwaway schema, dropped at the end, so runs never
 * see each other's rows and nothing is left behind.
 */
const TEST_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = randomBytes(4).toString('hex');
const schemas: string[] = [];
let n = 0;
const freshSchema = () => {
  const name = `cmp_test_${run}_${++n}`;
  schemas.push(name);
  return name;
};

const admin = new pg.Pool({ connectionString: TEST_URL, max: 2, connectionTimeoutMillis: 5000 });

beforeAll(async () => {
  try {
    await admin.query('SELECT 1');
  } catch (error) {
    throw new Error(
      `These tests need PostgreSQL at ${TEST_URL} (set COMPRESSO_TEST_DATABASE_URL to use another). ` +
        `Start it (apt-get install -y postgresql && service postgresql start) — ${(error as Error).message}`,
    );
  }
});

afterAll(async () => {
  for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
});

// The Database battery runs on this server (and on SQLite) in test/conformance/database.test.ts.

describe('postgresDatabase', () => {
  it('applies migrations once, also when several processes start at the same time', async () => {
    const schema = freshSchema();
    const dbs = Array.from({ length: 3 }, () => postgresDatabase({ url: TEST_URL, schema, poolSize: 2 }));
    try {
      await Promise.all(dbs.map((db) => db.migrate()));
      await dbs[0]!.migrate();
      const { rows } = await admin.query(
        `SELECT version FROM "${schema}".schema_migrations ORDER BY applied_at, version`,
      );
      // Other versions may exist beside these; each is recorded once, in order.
      const versions = rows.map((r) => Number(r.version));
      expect(versions).toEqual([...new Set(versions)].sort((a, b) => a - b));
      expect(versions).toEqual(expect.arrayContaining([1, 4]));
      expect(dbs[0]!.kind).toBe('postgres');
      await dbs[0]!.ping();
    } finally {
      await Promise.all(dbs.map((db) => db.close()));
    }
  });

  it('statements time out after statementTimeoutMs, but a migration waiting on another may take longer', async () => {
    const schema = freshSchema();
    const slowName = `cmp_test_${run}_slow`;
    const slow = postgresDatabase({
      url: `${TEST_URL}?application_name=${slowName}`,
      schema,
      statementTimeoutMs: 200,
    });
    const holder = await admin.connect();
    try {
      // Another "process" holds the migration lock until a statement under the same 200 ms limit has
      // given up on that lock: the migration waited past the limit, and still went through. (Shown by
      // PostgreSQL's own timeout, in order, not by a fixed 600 ms pause.)
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock($1)', [0x636d7030]);
      const migrated = slow.migrate();
      migrated.catch(() => {});
      await vi.waitFor(
        async () => {
          const { rows } = await admin.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
            [slowName],
          );
          expect(rows[0].n).toBeGreaterThan(0);
        },
        { timeout: 20_000, interval: 20 },
      );
      const limited = await admin.connect();
      try {
        await limited.query('SET statement_timeout = 200');
        await expect(limited.query('SELECT pg_advisory_lock($1)', [0x636d7030])).rejects.toThrow(
          /statement timeout/,
        );
      } finally {
        limited.release();
      }
      await holder.query('COMMIT');
      await migrated;
      expect(await slow.countAccounts()).toBe(0);
      await expect(slow.ping()).resolves.toBeUndefined();
      const stuck = await admin.connect();
      try {
        // A request-time statement stuck on a lock gives up at the limit instead of hanging.
        await stuck.query('BEGIN');
        await stuck.query(`LOCK TABLE "${schema}".accounts IN ACCESS EXCLUSIVE MODE`);
        // (That it gave up, and why, is the outcome; how soon is PostgreSQL's 200 ms, not a stopwatch's.)
        await expect(slow.countAccounts()).rejects.toThrow(/statement timeout/);
      } finally {
        await stuck.query('ROLLBACK');
        stuck.release();
      }
    } finally {
      holder.release();
      await slow.close();
    }
  });

  it('quota stays exact with 600 calls spread over three pools (three server processes)', async () => {
    const schema = freshSchema();
    const dbs = Array.from({ length: 3 }, () => postgresDatabase({ url: TEST_URL, schema, poolSize: 4 }));
    try {
      await dbs[0]!.migrate();
      const account = await createAccount(dbs[0]!, 'multi@x.io');
      const results = await Promise.all(
        Array.from({ length: 600 }, (_, i) => dbs[i % 3]!.consumeQuota(account.id, '2026-11-22', 500)),
      );
      expect(results.filter((r) => r.allowed)).toHaveLength(500);
      expect(new Set(results.filter((r) => r.allowed).map((r) => r.used)).size).toBe(500);
      expect(await dbs[1]!.usageOn(account.id, '2026-11-22')).toBe(500);
    } finally {
      await Promise.all(dbs.map((db) => db.close()));
    }
  });

  it('a key revoked through one process stops working at once in another', async () => {
    const schema = freshSchema();
    const [a, b] = [postgresDatabase({ url: TEST_URL, schema }), postgresDatabase({ url: TEST_URL, schema })];
    try {
      await a.migrate();
      const account = await createAccount(a, 'rev@x.io');
      const { key, secret } = await createApiKey(a, account.id);
      expect((await b.findActiveKeyByHash(hashKey(secret)))?.key.id).toBe(key.id);
      expect(await a.revokeApiKey(key.id, new Date().toISOString(), account.id)).toBe(true);
      expect(await b.findActiveKeyByHash(hashKey(secret))).toBeUndefined();
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('returns the ISO timestamps it was given, to the millisecond', async () => {
    const db = postgresDatabase({ url: TEST_URL, schema: freshSchema() });
    try {
      await db.migrate();
      const created = new Date('2026-11-22T10:11:12.345Z');
      const account = await createAccount(db, 'time@x.io', created);
      expect((await db.findAccountById(account.id))?.createdAt).toBe('2026-11-22T10:11:12.345Z');
      const { key } = await createApiKey(db, account.id, 'k', created);
      expect((await db.findApiKey(key.id))?.createdAt).toBe('2026-11-22T10:11:12.345Z');
    } finally {
      await db.close();
    }
  });

  it('rejects a schema name that is not a plain identifier, and fails fast when the server is unreachable', async () => {
    expect(() => postgresDatabase({ url: TEST_URL, schema: 'x"; DROP TABLE y; --' })).toThrow(/schema/);
    // Port 1 on loopback refuses at once: the error surfaces from ping(), within the connect timeout.
    const down = postgresDatabase({ url: 'postgres://postgres@127.0.0.1:1/test', connectTimeoutMs: 1000 });
    try {
      await expect(down.ping()).rejects.toThrow();
    } finally {
      await down.close();
    }
  });

  it('an outage is SERVICE_UNAVAILABLE, never a raw driver error, and the pool recovers by itself', async () => {
    const down = postgresDatabase({ url: 'postgres://postgres@127.0.0.1:1/test', connectTimeoutMs: 1000 });
    try {
      await expect(down.ping()).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503 });
      await expect(down.countAccounts()).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
    } finally {
      await down.close();
    }
    // A backend terminated under load (what a PostgreSQL restart or failover does to open connections).
    // Today's quota row is held (FOR UPDATE) so the pool's statements are certainly running — waiting on
    // the lock — when their backends are terminated, as test/scale does; terminating at a point in a
    // loop left it to chance whether any statement was in flight then.
    const name = `cmp_test_${run}_appname`;
    const schema = freshSchema();
    const db = postgresDatabase({
      url: `${TEST_URL}?application_name=${name}`,
      schema,
      poolSize: 4,
    });
    const locker = await admin.connect();
    try {
      await db.migrate();
      const account = await createAccount(db, 'outage@example.com');
      expect((await db.consumeQuota(account.id, '2026-11-22', 10_000)).allowed).toBe(true);
      await locker.query('BEGIN');
      await locker.query(`SELECT count FROM "${schema}".usage_daily WHERE account_id = $1 FOR UPDATE`, [
        account.id,
      ]);
      const calls = Array.from({ length: 20 }, () => {
        const call = db.consumeQuota(account.id, '2026-11-22', 10_000);
        // Failures arrive while the test awaits the terminate below: handled now, reported by allSettled.
        call.catch(() => {});
        return call;
      });
      const waiting = async () =>
        Number(
          (
            await admin.query(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
              [name],
            )
          ).rows[0].n,
        );
      // All four pooled connections are running a statement, blocked on the row.
      await vi.waitFor(async () => expect(await waiting()).toBe(4), { timeout: 20_000, interval: 20 });
      const killed = await admin.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()',
        [name],
      );
      expect(killed.rowCount).toBe(4);
      await locker.query('ROLLBACK');
      const outcomes = await Promise.allSettled(calls);
      // The four statements running on the terminated connections failed (the queued ones got new
      // connections), each as SERVICE_UNAVAILABLE.
      const rejected = outcomes.filter((o) => o.status === 'rejected');
      expect(rejected.length).toBeGreaterThanOrEqual(4);
      for (const outcome of rejected) expect(outcome.reason).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
      // Back to normal without any help.
      expect((await db.consumeQuota(account.id, '2026-11-22', 10_000)).allowed).toBe(true);
      await db.ping();
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      locker.release();
      await db.close();
    }
  });

  it('openDatabase picks PostgreSQL when DATABASE_URL is set, migrated and ready', async () => {
    const config = loadConfig({ DATABASE_URL: TEST_URL, COMPRESSO_DATA_DIR: '/nonexistent/never-created' });
    const db = await openDatabase(config, { schema: freshSchema() });
    try {
      expect(db.kind).toBe('postgres');
      expect(await db.countAccounts()).toBe(0);
    } finally {
      await db.close();
    }
  });
});

describe('README', () => {
  it('the PostgreSQL snippet runs as written against its own database', async () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const readme = readFileSync(join(here, '..', 'README.md'), 'utf8');
    const snippet = /### PostgreSQL[^\n]*\n+```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(snippet).toContain("from '@compresso/runtime/postgres'");
    const database = `cmp_readme_${run}`;
    await admin.query(`CREATE DATABASE "${database}"`);
    // Inside the package, so the import resolves exactly as it does for a user of the package.
    const file = join(here, '..', `.readme-snippet-${run}.ts`);
    writeFileSync(file, snippet!);
    try {
      const url = new URL(TEST_URL);
      url.pathname = `/${database}`;
      const stdout = await new Promise<string>((resolve, reject) => {
        execFile(
          process.execPath,
          [file],
          { env: { ...process.env, DATABASE_URL: url.toString() } },
          (error, out, err) => (error ? reject(new Error(`${error.message}\n${err}`)) : resolve(out)),
        );
      });
      expect(stdout).toBe('postgres 0\n');
      const check = new pg.Client({ connectionString: url.toString() });
      await check.connect();
      try {
        const { rows } = await check.query(
          "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'compresso'",
        );
        expect(rows[0].n).toBeGreaterThanOrEqual(6);
      } finally {
        await check.end();
      }
    } finally {
      rmSync(file, { force: true });
      await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    }
  });
});
