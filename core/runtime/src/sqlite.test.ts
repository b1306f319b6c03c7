import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeySecret, hashKey, looksLikeKey, sameHash } from './api-keys.ts';
import { applyPromo, createAccount, createApiKey, createPromoCode, promoExpiry } from './operator.ts';
import { nextReset, quotaDay, secondsUntilReset } from './plans.ts';
import { sqliteDatabase } from './sqlite.ts';

const dir = mkdtempSync(join(tmpdir(), 'compresso-runtime-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The Database battery runs on SQLite (memory and WAL file) and PostgreSQL in test/conformance/database.test.ts.

describe('sqliteDatabase', () => {
  it('stores keys as hashes: nothing in the file is the secret', async () => {
    const path = join(dir, 'keys.sqlite');
    const db = sqliteDatabase({ path });
    await db.migrate();
    const account = await createAccount(db, 'file@x.io');
    const { secret } = await createApiKey(db, account.id);
    await db.close();
    const raw = new DatabaseSync(path);
    const rows = JSON.stringify(raw.prepare('SELECT * FROM api_keys').all());
    raw.close();
    expect(rows).toContain(hashKey(secret));
    expect(rows).not.toContain(secret);
  });

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
    // Other versions may exist beside these; each is recorded once, in order.
    const versions = raw
      .prepare('SELECT version FROM schema_migrations ORDER BY rowid')
      .all()
      .map((r) => Number(r.version));
    expect(versions).toEqual([...new Set(versions)].sort((a, b) => a - b));
    expect(versions).toEqual(expect.arrayContaining([1, 4]));
    expect(raw.prepare('PRAGMA journal_mode').get()).toEqual({ journal_mode: 'wal' });
    raw.close();
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

describe('promo expiry', () => {
  it('a bare date means through the end of that UTC day; a time is exact; impossible dates are refused', () => {
    expect(promoExpiry('2027-01-31')?.toISOString()).toBe('2027-02-01T00:00:00.000Z');
    expect(promoExpiry('2027-12-31')?.toISOString()).toBe('2028-01-01T00:00:00.000Z');
    expect(promoExpiry('2027-01-31T12:00:00Z')?.toISOString()).toBe('2027-01-31T12:00:00.000Z');
    expect(promoExpiry('2027-02-30')).toBeUndefined();
    expect(promoExpiry('soon')).toBeUndefined();
  });

  it('a code expiring "2026-11-22" still works late on the 22nd and not on the 23rd', async () => {
    const db = sqliteDatabase({ path: ':memory:' });
    await db.migrate();
    await createAccount(db, 'late@x.io');
    await createAccount(db, 'later@x.io');
    await createPromoCode(db, { code: 'LASTDAY', uses: 5, expiresAt: '2026-11-22' });
    expect((await applyPromo(db, 'late@x.io', 'LASTDAY', new Date('2026-11-22T23:59:00Z'))).plan).toBe('pro');
    await expect(applyPromo(db, 'later@x.io', 'LASTDAY', new Date('2026-11-23T00:00:01Z'))).rejects.toThrow(
      /expired/,
    );
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
