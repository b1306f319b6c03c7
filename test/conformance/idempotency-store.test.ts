import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type IdempotencyStore,
  postgresIdempotencyStore,
  type StoredAnswer,
  sqliteIdempotencyStore,
} from '@compresso/runtime';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The battery every IdempotencyStore backend passes: SQLite (two connections on one file, as two
 * processes would have) and PostgreSQL (two pools on one schema of this run's own).
 */
const ADMIN_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `idem_${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'compresso-idem-store-'));
const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1, connectionTimeoutMillis: 5000 });

afterAll(async () => {
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
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

const BACKENDS: Record<string, () => Promise<[IdempotencyStore, IdempotencyStore]>> = {
  sqlite: async () => {
    const file = join(dir, `${randomBytes(3).toString('hex')}.sqlite`);
    return [sqliteIdempotencyStore({ path: file }), sqliteIdempotencyStore({ path: file })];
  },
  postgres: async () => [
    await postgresIdempotencyStore({ url: ADMIN_URL, schema }),
    await postgresIdempotencyStore({ url: ADMIN_URL, schema }),
  ],
};

describe.each(Object.keys(BACKENDS))('IdempotencyStore on %s', (backend) => {
  let a: IdempotencyStore;
  let b: IdempotencyStore;
  beforeAll(async () => {
    [a, b] = await BACKENDS[backend]!();
    // Both migrate at once, as two processes starting together do.
    await Promise.all([a.migrate(), b.migrate()]);
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
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
