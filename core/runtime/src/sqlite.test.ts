import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import { isCompressoError } from '@compresso/schema';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeySecret, hashKey, looksLikeKey, sameHash } from './api-keys.ts';
import {
  applyPromo,
  createAccount,
  createApiKey,
  createPromoCode,
  listApiKeys,
  requireAccount,
  revokeApiKey,
} from './operator.ts';
import { nextReset, quotaDay, secondsUntilReset } from './plans.ts';
import { sqliteDatabase } from './sqlite.ts';

const dir = mkdtempSync(join(tmpdir(), 'compresso-runtime-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    if (isCompressoError(error)) return error.code;
    throw error;
  }
  return 'no error';
}

describe('sqliteDatabase', () => {
  it('applies migrations once, in WAL mode, and reopens without reapplying', async () => {
    const path = join(dir, 'migrate.sqlite');
    const db = sqliteDatabase({ path });
    await db.migrate();
    await db.migrate();
    await createAccount(db, 'a@example.com');
    await db.close();
    const again = sqliteDatabase({ path });
    await again.migrate();
    expect(await again.countAccounts()).toBe(1);
    await again.close();
    const raw = new DatabaseSync(path);
    expect(raw.prepare('SELECT version FROM schema_migrations').all()).toEqual([{ version: 1 }]);
    expect(raw.prepare('PRAGMA journal_mode').get()).toEqual({ journal_mode: 'wal' });
    raw.close();
  });

  it('keeps emails unique regardless of case', async () => {
    const db = sqliteDatabase({ path: ':memory:' });
    await db.migrate();
    await createAccount(db, 'Case@Example.com');
    expect(await codeOf(createAccount(db, 'case@example.com'))).toBe('CONFLICT');
    expect(await codeOf(createAccount(db, 'not-an-email'))).toBe('INVALID_REQUEST');
    expect((await requireAccount(db, 'CASE@example.com')).email).toBe('Case@Example.com');
    expect(await codeOf(requireAccount(db, 'nobody@example.com'))).toBe('NOT_FOUND');
    await db.close();
  });

  it('promo codes: plan, number of uses, expiry, one redemption per account', async () => {
    const db = sqliteDatabase({ path: ':memory:' });
    await db.migrate();
    for (const email of ['p1@x.io', 'p2@x.io', 'p3@x.io']) await createAccount(db, email);
    await createPromoCode(db, { code: 'TWICE', plan: 'pro', uses: 2 });
    await createPromoCode(db, { code: 'OLD', uses: 5, expiresAt: '2020-01-01' });
    expect(await codeOf(createPromoCode(db, { code: 'TWICE' }))).toBe('CONFLICT');
    expect(await codeOf(createPromoCode(db, { code: 'x', uses: 0, expiresAt: 'soon' }))).toBe(
      'INVALID_REQUEST',
    );

    expect((await applyPromo(db, 'p1@x.io', 'TWICE')).plan).toBe('pro');
    expect(await codeOf(applyPromo(db, 'p1@x.io', 'TWICE'))).toBe('CONFLICT');
    expect((await applyPromo(db, 'p2@x.io', 'TWICE')).plan).toBe('pro');
    expect(await codeOf(applyPromo(db, 'p3@x.io', 'TWICE'))).toBe('INVALID_REQUEST');
    expect(await codeOf(applyPromo(db, 'p3@x.io', 'OLD'))).toBe('INVALID_REQUEST');
    expect(await codeOf(applyPromo(db, 'p3@x.io', 'NOPE'))).toBe('NOT_FOUND');
    expect((await requireAccount(db, 'p3@x.io')).plan).toBe('free');
    expect((await db.findPromo('TWICE'))?.uses).toBe(2);
    await db.close();
  });

  it('keys: stored as a hash only, listed without secrets, revoked only by their account', async () => {
    const path = join(dir, 'keys.sqlite');
    const db = sqliteDatabase({ path });
    await db.migrate();
    const a = await createAccount(db, 'ka@x.io');
    const b = await createAccount(db, 'kb@x.io');
    const { key, secret } = await createApiKey(db, a.id, 'laptop');
    expect(looksLikeKey(secret)).toBe(true);
    expect(key.prefix).toBe(secret.slice(0, 17));
    const found = await db.findActiveKeyByHash(hashKey(secret));
    expect(found?.account.id).toBe(a.id);
    expect(await listApiKeys(db, b.id)).toEqual([]);
    expect(await codeOf(revokeApiKey(db, key.id, b.id))).toBe('NOT_FOUND');
    await revokeApiKey(db, key.id, a.id);
    expect(await db.findActiveKeyByHash(hashKey(secret))).toBeUndefined();
    expect(await listApiKeys(db, a.id)).toEqual([]);
    expect((await listApiKeys(db, a.id, true))[0]?.revoked_at).not.toBeNull();
    await db.close();
    // Nothing in the file is the secret.
    const raw = new DatabaseSync(path);
    expect(JSON.stringify(raw.prepare('SELECT * FROM api_keys').all())).not.toContain(secret);
    raw.close();
  });

  it('quota: counts up to the limit and no further, per account and day; refunds', async () => {
    const db = sqliteDatabase({ path: ':memory:' });
    await db.migrate();
    const a = await createAccount(db, 'q@x.io');
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await db.consumeQuota(a.id, '2026-11-22', 3));
    expect(results.map((r) => r.allowed)).toEqual([true, true, true, false, false]);
    expect(results.map((r) => r.used)).toEqual([1, 2, 3, 3, 3]);
    expect((await db.consumeQuota(a.id, '2026-11-23', 3)).used).toBe(1);
    await db.refundQuota(a.id, '2026-11-22');
    expect(await db.usageOn(a.id, '2026-11-22')).toBe(2);
    await db.close();
  });

  it('quota stays exact with four threads writing the same file through their own connections', async () => {
    const path = join(dir, 'threads.sqlite');
    const db = sqliteDatabase({ path });
    await db.migrate();
    const account = await createAccount(db, 'threads@x.io');
    const moduleUrl = new URL('./sqlite.ts', import.meta.url).href;
    // Each worker is a separate connection, like separate server processes sharing one database.
    const code = `
      const { workerData, parentPort } = require('node:worker_threads');
      import(workerData.moduleUrl).then(async ({ sqliteDatabase }) => {
        const db = sqliteDatabase({ path: workerData.path, busyTimeoutMs: 10000 });
        let allowed = 0;
        for (let i = 0; i < 150; i++) if ((await db.consumeQuota(workerData.account, '2026-11-22', 500)).allowed) allowed++;
        await db.close();
        parentPort.postMessage(allowed);
      });`;
    const counts = await Promise.all(
      Array.from(
        { length: 4 },
        () =>
          new Promise<number>((resolve, reject) => {
            const worker = new Worker(code, {
              eval: true,
              workerData: { moduleUrl, path, account: account.id },
            });
            worker.once('message', resolve);
            worker.once('error', reject);
          }),
      ),
    );
    expect(counts.reduce((s, n) => s + n, 0)).toBe(500);
    expect(await db.usageOn(account.id, '2026-11-22')).toBe(500);
    await db.close();
  });
});

describe('keys and days', () => {
  it('generates distinct high-entropy keys and compares hashes in constant time', () => {
    const a = generateKeySecret();
    const b = generateKeySecret();
    expect(a.secret).not.toBe(b.secret);
    expect(a.hash).toBe(hashKey(a.secret));
    expect(a.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(sameHash(a.hash, a.hash)).toBe(true);
    expect(sameHash(a.hash, b.hash)).toBe(false);
    expect(looksLikeKey(`${a.secret}x`)).toBe(false);
  });

  it('the quota day is the UTC date and resets at 00:00 UTC', () => {
    const late = new Date('2026-11-22T23:59:30.000Z');
    expect(quotaDay(late)).toBe('2026-11-22');
    expect(nextReset(late).toISOString()).toBe('2026-11-23T00:00:00.000Z');
    expect(secondsUntilReset(late)).toBe(30);
  });
});
