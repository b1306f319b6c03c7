import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { type Database, type IdempotencyStore, type StoredAnswer, sqliteDatabase } from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The battery of the Database's idempotency store (`db.idempotency`) on every backend: SQLite (two
 * databases on one file, as two processes would have) and PostgreSQL (two pools on one schema of
 * this run's own); and the core migration adopting a table the store made when it was a port of its
 * own.
 */
const ADMIN_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = randomBytes(4).toString('hex');
const schemas: string[] = [];
const dir = mkdtempSync(join(tmpdir(), 'compresso-idem-store-'));
const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1, connectionTimeoutMillis: 5000 });

afterAll(async () => {
  for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
});

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const answer = (status: number, text: string): StoredAnswer => ({
  status,
  headers: { 'content-type': 'text/plain', 'x-output-size': String(text.length) },
  body: new TextEncoder().encode(text),
  bodyKey: null,
});

/** Two Databases on one store of data, and how to run raw SQL on it before they migrate. */
interface Backend {
  open(): [Database, Database];
  /** Runs statements on the (not yet migrated) database the next open() uses. */
  raw(sql: string): Promise<void>;
}

function sqliteBackend(): Backend {
  const file = join(dir, `${randomBytes(3).toString('hex')}.sqlite`);
  return {
    open: () => [sqliteDatabase({ path: file }), sqliteDatabase({ path: file })],
    async raw(sql) {
      const db = new DatabaseSync(file);
      db.exec(sql);
      db.close();
    },
  };
}

function postgresBackend(): Backend {
  const schema = `idem_${run}_${schemas.length}`;
  schemas.push(schema);
  return {
    open: () => [
      postgresDatabase({ url: ADMIN_URL, schema, poolSize: 4 }),
      postgresDatabase({ url: ADMIN_URL, schema, poolSize: 4 }),
    ],
    async raw(sql) {
      await admin.query(
        `CREATE SCHEMA IF NOT EXISTS "${schema}"; SET search_path = "${schema}"; ${sql}; SET search_path = public`,
      );
    },
  };
}

const BACKENDS: Record<string, () => Backend> = { sqlite: sqliteBackend, postgres: postgresBackend };

describe.each(Object.keys(BACKENDS))('db.idempotency on %s', (backend) => {
  let dbs: Database[] = [];
  let a: IdempotencyStore;
  let b: IdempotencyStore;
  beforeAll(async () => {
    dbs = BACKENDS[backend]!().open();
    // Both migrate at once, as two processes starting together do.
    await Promise.all(dbs.map((db) => db.migrate()));
    [a, b] = dbs.map((db) => db.idempotency) as [IdempotencyStore, IdempotencyStore];
  });
  afterAll(async () => {
    await Promise.all(dbs.map((db) => db.close()));
  });
  const claim = (store: IdempotencyStore, key: string, fingerprint: string, nowMs: number, leaseMs = HOUR) =>
    store.claim({ scope: `s-${backend}`, key, fingerprint, nowMs, leaseMs, ttlMs: DAY });

  it('of 50 concurrent claims of one key over two connections exactly one wins; the rest read its record', async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => claim(i % 2 ? a : b, 'race', 'f1', 1_000)),
    );
    const winners = results.filter((r) => r.claimed);
    expect(winners).toHaveLength(1);
    for (const r of results.filter((x) => !x.claimed)) {
      if (r.claimed) continue;
      expect(r.record).toMatchObject({ fingerprint: 'f1', state: 'running', answer: undefined });
    }
  });

  it('an answer is recorded once by its owner and read back byte for byte; a stranger token changes nothing', async () => {
    const first = await claim(a, 'answer', 'f1', 1_000);
    if (!first.claimed) throw new Error('not claimed');
    expect(await b.complete(`s-${backend}`, 'answer', 'not-the-token', answer(200, 'nope'))).toBe(false);
    expect(await b.complete(`s-${backend}`, 'answer', first.token, answer(200, 'the answer'))).toBe(true);
    expect(await a.complete(`s-${backend}`, 'answer', first.token, answer(200, 'again'))).toBe(false);
    const again = await claim(b, 'answer', 'f1', 2_000);
    expect(again.claimed).toBe(false);
    if (again.claimed) return;
    expect(again.record.state).toBe('done');
    expect(again.record.answer?.status).toBe(200);
    expect(again.record.answer?.headers).toEqual({ 'content-type': 'text/plain', 'x-output-size': '10' });
    expect(new TextDecoder().decode(again.record.answer!.body!)).toBe('the answer');
    // Another fingerprint is reported as it is stored: the caller decides (422).
    const other = await claim(a, 'answer', 'f2', 3_000);
    expect(!other.claimed && other.record.fingerprint).toBe('f1');
  });

  it('a record expires after the time to live; a lost lease is taken over; a release frees the key', async () => {
    const first = await claim(a, 'ttl', 'f1', 10_000);
    if (!first.claimed) throw new Error('not claimed');
    await a.complete(`s-${backend}`, 'ttl', first.token, answer(400, 'bad option'));
    expect((await claim(b, 'ttl', 'f2', 10_000 + DAY - 1)).claimed).toBe(false);
    const later = await claim(b, 'ttl', 'f2', 10_000 + DAY);
    expect(later.claimed).toBe(true);

    const held = await claim(a, 'lease', 'f1', 5_000, 1_000);
    expect(held.claimed).toBe(true);
    expect((await claim(b, 'lease', 'f1', 5_999, 1_000)).claimed).toBe(false);
    const taken = await claim(b, 'lease', 'f1', 6_000, 1_000);
    expect(taken.claimed).toBe(true);
    // The first owner can no longer write: its token was replaced.
    if (held.claimed)
      expect(await a.complete(`s-${backend}`, 'lease', held.token, answer(200, 'late'))).toBe(false);

    const released = await claim(a, 'release', 'f1', 1_000);
    if (!released.claimed) throw new Error('not claimed');
    await a.release(`s-${backend}`, 'release', released.token);
    expect(await b.find(`s-${backend}`, 'release')).toBeUndefined();
    expect((await claim(b, 'release', 'f2', 1_001)).claimed).toBe(true);
  });

  it('keys are scoped: the same key in another scope is another record', async () => {
    const one = await a.claim({
      scope: `x-${backend}`,
      key: 'k',
      fingerprint: 'f',
      nowMs: 1,
      leaseMs: HOUR,
      ttlMs: DAY,
    });
    const two = await b.claim({
      scope: `y-${backend}`,
      key: 'k',
      fingerprint: 'g',
      nowMs: 1,
      leaseMs: HOUR,
      ttlMs: DAY,
    });
    expect([one.claimed, two.claimed]).toEqual([true, true]);
  });

  it('purge deletes what expired and returns the blob keys of their answers', async () => {
    const old = await a.claim({
      scope: `p-${backend}`,
      key: 'old',
      fingerprint: 'f',
      nowMs: 100,
      leaseMs: HOUR,
      ttlMs: DAY,
    });
    if (!old.claimed) throw new Error('not claimed');
    await a.complete(`p-${backend}`, 'old', old.token, {
      status: 200,
      headers: {},
      body: null,
      bodyKey: 'idempotency/x/1',
    });
    await a.claim({
      scope: `p-${backend}`,
      key: 'new',
      fingerprint: 'f',
      nowMs: 5 * DAY,
      leaseMs: HOUR,
      ttlMs: DAY,
    });
    const purged = await b.purge(4 * DAY);
    expect(purged.bodyKeys).toContain('idempotency/x/1');
    expect(await a.find(`p-${backend}`, 'old')).toBeUndefined();
    expect(await a.find(`p-${backend}`, 'new')).toBeDefined();
  });
});

describe.each(Object.keys(BACKENDS))('the core migration on %s', (backend) => {
  it('adopts the table (and its rows) the store made as a port of its own', async () => {
    const at = BACKENDS[backend]!();
    // What the separate store's own migration 1 left: its version table and idempotency_keys.
    const blob = backend === 'sqlite' ? 'BLOB' : 'bytea';
    const int = backend === 'sqlite' ? 'INTEGER' : 'bigint';
    await at.raw(`
      CREATE TABLE idempotency_migrations (version integer PRIMARY KEY);
      INSERT INTO idempotency_migrations (version) VALUES (1);
      CREATE TABLE idempotency_keys (
        scope text NOT NULL, idem_key text NOT NULL, fingerprint text NOT NULL, token text NOT NULL,
        state text NOT NULL, created_ms ${int} NOT NULL, locked_until_ms ${int} NOT NULL, status integer,
        headers text, body ${blob}, body_key text, PRIMARY KEY (scope, idem_key)
      );
      CREATE INDEX idempotency_keys_created ON idempotency_keys (created_ms);
      INSERT INTO idempotency_keys (scope, idem_key, fingerprint, token, state, created_ms, locked_until_ms, status, headers, body_key)
        VALUES ('s', 'kept', 'f1', 't1', 'done', 1000, 2000, 201, '{"x-a":"1"}', 'idempotency/k/1')`);
    const [db, other] = at.open();
    try {
      await db.migrate();
      await other.migrate();
      const kept = await db.idempotency.find('s', 'kept');
      expect(kept).toMatchObject({
        fingerprint: 'f1',
        state: 'done',
        answer: { status: 201, bodyKey: 'idempotency/k/1' },
      });
      const again = await other.idempotency.claim({
        scope: 's',
        key: 'kept',
        fingerprint: 'f1',
        nowMs: 1500,
        leaseMs: HOUR,
        ttlMs: DAY,
      });
      expect(again.claimed).toBe(false);
    } finally {
      await Promise.all([db.close(), other.close()]);
    }
  });
});
