import { isCompressoError } from '@compresso/schema';
import { describe, expect, it } from 'vitest';
import { hashKey, looksLikeKey } from './api-keys.ts';
import type { Database } from './database.ts';
import {
  applyPromo,
  createAccount,
  createApiKey,
  createPromoCode,
  listApiKeys,
  requireAccount,
  revokeApiKey,
} from './operator.ts';

async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    if (isCompressoError(error)) return error.code;
    throw error;
  }
  return 'no error';
}

/**
 * The behaviour every Database backend must have, run against each one (SQLite here; PostgreSQL when
 * its adapter exists). `open` returns a fresh, migrated, empty database.
 */
export function describeDatabaseBattery(name: string, open: () => Promise<Database>): void {
  describe(`Database battery: ${name}`, () => {
    const withDb = (test: (db: Database) => Promise<void>) => async () => {
      const db = await open();
      try {
        await test(db);
      } finally {
        await db.close();
      }
    };

    it(
      'keeps emails unique regardless of case',
      withDb(async (db) => {
        await createAccount(db, 'Case@Example.com');
        expect(await codeOf(createAccount(db, 'case@example.com'))).toBe('CONFLICT');
        expect(await codeOf(createAccount(db, 'not-an-email'))).toBe('INVALID_REQUEST');
        expect((await requireAccount(db, 'CASE@example.com')).email).toBe('Case@Example.com');
        expect(await codeOf(requireAccount(db, 'nobody@example.com'))).toBe('NOT_FOUND');
        expect(await db.countAccounts()).toBe(1);
      }),
    );

    it(
      'promo codes: plan, number of uses, expiry, one redemption per account',
      withDb(async (db) => {
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
      }),
    );

    it(
      'a promo code with one use left goes to exactly one of many concurrent redeemers',
      withDb(async (db) => {
        const emails = Array.from({ length: 10 }, (_, i) => `race${i}@x.io`);
        for (const email of emails) await createAccount(db, email);
        await createPromoCode(db, { code: 'ONCE', uses: 1 });
        const outcomes = await Promise.allSettled(emails.map((e) => applyPromo(db, e, 'ONCE')));
        expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
        expect((await db.findPromo('ONCE'))?.uses).toBe(1);
      }),
    );

    it(
      'keys: found by hash while active, listed without secrets, revoked only by their account',
      withDb(async (db) => {
        const a = await createAccount(db, 'ka@x.io');
        const b = await createAccount(db, 'kb@x.io');
        const { key, secret } = await createApiKey(db, a.id, 'laptop');
        expect(looksLikeKey(secret)).toBe(true);
        expect(key.prefix).toBe(secret.slice(0, 17));
        expect((await db.findActiveKeyByHash(hashKey(secret)))?.account.id).toBe(a.id);
        expect(JSON.stringify(await listApiKeys(db, a.id))).not.toContain(secret);
        expect(await listApiKeys(db, b.id)).toEqual([]);
        expect(await codeOf(revokeApiKey(db, key.id, b.id))).toBe('NOT_FOUND');
        await revokeApiKey(db, key.id, a.id);
        expect(await db.findActiveKeyByHash(hashKey(secret))).toBeUndefined();
        expect(await listApiKeys(db, a.id)).toEqual([]);
        expect((await listApiKeys(db, a.id, true))[0]?.revoked_at).not.toBeNull();
        expect(await codeOf(revokeApiKey(db, key.id))).toBe('NOT_FOUND');
      }),
    );

    it(
      'last use is recorded, at most once per interval',
      withDb(async (db) => {
        const a = await createAccount(db, 'touch@x.io');
        const { key } = await createApiKey(db, a.id);
        await db.touchApiKey(key.id, '2026-11-22T10:00:00.000Z', '2026-11-22T09:59:00.000Z');
        await db.touchApiKey(key.id, '2026-11-22T10:00:30.000Z', '2026-11-22T09:59:30.000Z');
        expect((await db.findApiKey(key.id))?.lastUsedAt).toBe('2026-11-22T10:00:00.000Z');
        await db.touchApiKey(key.id, '2026-11-22T10:01:30.000Z', '2026-11-22T10:00:30.000Z');
        expect((await db.findApiKey(key.id))?.lastUsedAt).toBe('2026-11-22T10:01:30.000Z');
      }),
    );

    it(
      'quota: counts up to the limit and no further, per account and day; refunds',
      withDb(async (db) => {
        const a = await createAccount(db, 'q@x.io');
        const b = await createAccount(db, 'q2@x.io');
        const results = [];
        for (let i = 0; i < 5; i++) results.push(await db.consumeQuota(a.id, '2026-11-22', 3));
        expect(results.map((r) => r.allowed)).toEqual([true, true, true, false, false]);
        expect(results.map((r) => r.used)).toEqual([1, 2, 3, 3, 3]);
        expect((await db.consumeQuota(a.id, '2026-11-23', 3)).used).toBe(1);
        expect((await db.consumeQuota(b.id, '2026-11-22', 3)).used).toBe(1);
        await db.refundQuota(a.id, '2026-11-22');
        expect(await db.usageOn(a.id, '2026-11-22')).toBe(2);
        expect(await db.usageOn(a.id, '2026-01-01')).toBe(0);
      }),
    );

    it(
      'quota: 600 concurrent calls against a limit of 500 allow exactly 500',
      withDb(async (db) => {
        const a = await createAccount(db, 'burst@x.io');
        const results = await Promise.all(
          Array.from({ length: 600 }, () => db.consumeQuota(a.id, '2026-11-22', 500)),
        );
        expect(results.filter((r) => r.allowed)).toHaveLength(500);
        expect(await db.usageOn(a.id, '2026-11-22')).toBe(500);
      }),
    );

    it(
      'visitor allowance: counts to the limit per visitor and day, refunds, prunes old days, holds under concurrency',
      withDb(async (db) => {
        const seq = [];
        for (let i = 0; i < 4; i++) seq.push(await db.consumeVisitorQuota('v1', '2026-11-22', 3));
        expect(seq.map((r) => [r.allowed, r.used])).toEqual([
          [true, 1],
          [true, 2],
          [true, 3],
          [false, 3],
        ]);
        expect((await db.consumeVisitorQuota('v2', '2026-11-22', 3)).used).toBe(1);
        expect((await db.consumeVisitorQuota('v1', '2026-11-23', 3)).used).toBe(1);
        await db.refundVisitorQuota('v1', '2026-11-22');
        expect(await db.consumeVisitorQuota('v1', '2026-11-22', 3)).toEqual({ allowed: true, used: 3 });
        expect(await db.visitorUsageOn('v1', '2026-11-22')).toBe(3);
        expect(await db.visitorUsageOn('nobody', '2026-11-22')).toBe(0);
        expect(await db.consumeVisitorQuota('v3', '2026-11-22', 0)).toEqual({ allowed: false, used: 0 });
        await db.pruneVisitorUsage('2026-11-23');
        // The pruned day starts again from nothing; the kept day keeps its count.
        expect((await db.consumeVisitorQuota('v1', '2026-11-22', 3)).used).toBe(1);
        expect((await db.consumeVisitorQuota('v1', '2026-11-23', 3)).used).toBe(2);
        const burst = await Promise.all(
          Array.from({ length: 60 }, () => db.consumeVisitorQuota('burst', '2026-11-22', 20)),
        );
        expect(burst.filter((r) => r.allowed)).toHaveLength(20);
      }),
    );

    it(
      'quota for batches: n at once, all or none, exact under concurrency; refunds of n',
      withDb(async (db) => {
        const a = await createAccount(db, 'qm@x.io');
        expect(await db.consumeQuotaMany(a.id, '2026-11-22', 10, 11)).toEqual({ allowed: false, used: 0 });
        expect(await db.consumeQuotaMany(a.id, '2026-11-22', 10, 4)).toEqual({ allowed: true, used: 4 });
        expect(await db.consumeQuotaMany(a.id, '2026-11-22', 10, 7)).toEqual({ allowed: false, used: 4 });
        expect(await db.consumeQuotaMany(a.id, '2026-11-22', 10, 6)).toEqual({ allowed: true, used: 10 });
        await db.refundQuota(a.id, '2026-11-22', 3);
        expect(await db.usageOn(a.id, '2026-11-22')).toBe(7);
        await db.refundQuota(a.id, '2026-11-22', 50);
        expect(await db.usageOn(a.id, '2026-11-22')).toBe(0);
        // 40 batches of 7 against 100: at most 14 fit, and exactly 98 are counted.
        const b = await createAccount(db, 'qm2@x.io');
        const results = await Promise.all(
          Array.from({ length: 40 }, () => db.consumeQuotaMany(b.id, '2026-11-22', 100, 7)),
        );
        expect(results.filter((r) => r.allowed)).toHaveLength(14);
        expect(await db.usageOn(b.id, '2026-11-22')).toBe(98);
      }),
    );

    it(
      'batch jobs: items recorded in order, each finished exactly once, queued ones listed',
      withDb(async (db) => {
        const a = await createAccount(db, 'batch@x.io');
        await db.insertBatch(
          {
            id: 'job_one',
            accountId: a.id,
            source: 'upload',
            options: '{"output_format":"webp"}',
            total: 3,
            quotaDay: '2026-11-22',
            createdAt: '2026-11-22T10:00:00.000Z',
          },
          [
            { index: 0, name: 'a.jpg', sourceUrl: null },
            { index: 1, name: 'b.png', sourceUrl: null },
            { index: 2, name: 'c.jpg', sourceUrl: 'https://example.com/c.jpg' },
          ],
        );
        const batch = await db.findBatch('job_one');
        expect(batch).toEqual({
          id: 'job_one',
          accountId: a.id,
          source: 'upload',
          options: '{"output_format":"webp"}',
          total: 3,
          quotaDay: '2026-11-22',
          createdAt: '2026-11-22T10:00:00.000Z',
        });
        expect(await db.findBatch('job_none')).toBeUndefined();
        expect(
          (await db.listBatchItems('job_one')).map((i) => [i.index, i.name, i.status, i.sourceUrl]),
        ).toEqual([
          [0, 'a.jpg', 'queued', null],
          [1, 'b.png', 'queued', null],
          [2, 'c.jpg', 'queued', 'https://example.com/c.jpg'],
        ]);
        const at = '2026-11-22T10:00:00.000Z';
        expect(await db.listQueuedBatchItems(10)).toEqual([
          { batchId: 'job_one', index: 0, createdAt: at },
          { batchId: 'job_one', index: 1, createdAt: at },
          { batchId: 'job_one', index: 2, createdAt: at },
        ]);
        // Pages for the reconciliation sweep: batches older than a cutoff, after the last item seen.
        await db.insertBatch(
          {
            id: 'job_new',
            accountId: a.id,
            source: 'upload',
            options: '{}',
            total: 1,
            quotaDay: '2026-11-22',
            createdAt: '2026-11-22T10:05:00.000Z',
          },
          [{ index: 0, name: 'n.jpg', sourceUrl: null }],
        );
        const page1 = await db.listQueuedBatchItems(2, { createdBefore: '2026-11-22T10:01:00.000Z' });
        expect(page1.map((i) => [i.batchId, i.index])).toEqual([
          ['job_one', 0],
          ['job_one', 1],
        ]);
        const page2 = await db.listQueuedBatchItems(2, {
          createdBefore: '2026-11-22T10:01:00.000Z',
          after: page1[1]!,
        });
        expect(page2.map((i) => [i.batchId, i.index])).toEqual([['job_one', 2]]);
        expect((await db.listQueuedBatchItems(10, { after: page2[0]! })).map((i) => i.batchId)).toEqual([
          'job_new',
        ]);
        // The cutoff is exclusive: a batch created at that very instant is still too young.
        expect(await db.listQueuedBatchItems(10, { createdBefore: '2026-11-22T10:00:00.000Z' })).toEqual([]);
        await db.finishBatchItem(
          'job_new',
          0,
          { status: 'failed', errorCode: 'X', errorMessage: 'x', inputSize: null },
          '2026-11-22T10:05:01.000Z',
        );

        const done = {
          status: 'done',
          inputSize: 1000,
          outputSize: 400,
          result: '{"savings_percent":60}',
        } as const;
        const now = '2026-11-22T10:00:05.000Z';
        // Two workers finishing one item at once (a retried or taken-over job): one write wins.
        const race = await Promise.all([
          db.finishBatchItem('job_one', 0, done, now),
          db.finishBatchItem('job_one', 0, { ...done, outputSize: 999 }, now),
        ]);
        expect(race.filter(Boolean)).toHaveLength(1);
        expect(
          await db.finishBatchItem(
            'job_one',
            0,
            { status: 'failed', errorCode: 'X', errorMessage: 'late', inputSize: null },
            now,
          ),
        ).toBe(false);
        expect(
          await db.finishBatchItem(
            'job_one',
            1,
            { status: 'failed', errorCode: 'CORRUPT_IMAGE', errorMessage: 'truncated', inputSize: 12 },
            now,
          ),
        ).toBe(true);
        const item0 = await db.findBatchItem('job_one', 0);
        expect(item0).toMatchObject({
          status: 'done',
          inputSize: 1000,
          result: '{"savings_percent":60}',
          finishedAt: now,
        });
        expect([400, 999]).toContain(item0?.outputSize);
        expect(await db.findBatchItem('job_one', 1)).toMatchObject({
          status: 'failed',
          errorCode: 'CORRUPT_IMAGE',
          errorMessage: 'truncated',
          inputSize: 12,
          outputSize: null,
        });
        expect(await db.findBatchItem('job_one', 7)).toBeUndefined();
        expect(await db.listQueuedBatchItems(10)).toEqual([{ batchId: 'job_one', index: 2, createdAt: at }]);
      }),
    );

    it(
      'stores password hashes, sessions by hash with expiry, and signs an account out everywhere',
      withDb(async (db) => {
        const account = await createAccount(db, 'web@example.com');
        const other = await createAccount(db, 'other@example.com');
        // A CLI-made account has no password until it sets one.
        expect(await db.findPasswordHash(account.id)).toBeUndefined();
        await db.setPasswordHash(account.id, 'scrypt$first', '2026-01-01T00:00:00.000Z');
        await db.setPasswordHash(account.id, 'scrypt$second', '2026-01-02T00:00:00.000Z');
        expect(await db.findPasswordHash(account.id)).toBe('scrypt$second');
        expect(await db.findPasswordHash(other.id)).toBeUndefined();

        const base = { accountId: account.id, createdAt: '2026-01-01T00:00:00.000Z' };
        await db.insertWebSession({ ...base, idHash: 'h1', expiresAt: '2026-01-02T00:00:00.000Z' });
        await db.insertWebSession({ ...base, idHash: 'h2', expiresAt: '2026-01-03T00:00:00.000Z' });
        await db.insertWebSession({
          accountId: other.id,
          createdAt: base.createdAt,
          idHash: 'h3',
          expiresAt: '2026-01-03T00:00:00.000Z',
        });
        const found = await db.findWebSession('h1', '2026-01-01T12:00:00.000Z');
        expect(found?.account).toEqual(account);
        expect(found?.session).toEqual({ ...base, idHash: 'h1', expiresAt: '2026-01-02T00:00:00.000Z' });
        expect(await db.findWebSession('h1', '2026-01-02T00:00:00.000Z')).toBeUndefined();
        expect(await db.findWebSession('nope', '2026-01-01T12:00:00.000Z')).toBeUndefined();
        await db.pruneWebSessions('2026-01-02T06:00:00.000Z');
        expect(await db.findWebSession('h1', '2026-01-01T12:00:00.000Z')).toBeUndefined();
        expect(await db.findWebSession('h2', '2026-01-01T12:00:00.000Z')).toBeDefined();
        await db.deleteWebSession('h2');
        expect(await db.findWebSession('h2', '2026-01-01T12:00:00.000Z')).toBeUndefined();
        await db.insertWebSession({ ...base, idHash: 'h4', expiresAt: '2026-01-03T00:00:00.000Z' });
        await db.deleteAccountWebSessions(account.id);
        expect(await db.findWebSession('h4', '2026-01-01T12:00:00.000Z')).toBeUndefined();
        expect((await db.findWebSession('h3', '2026-01-01T12:00:00.000Z'))?.account.id).toBe(other.id);
      }),
    );

    it(
      'uses a reset token once, and never after it expires',
      withDb(async (db) => {
        const account = await createAccount(db, 'reset@example.com');
        await db.insertResetToken('t1', account.id, '2026-01-01T00:00:00.000Z', '2026-01-01T00:30:00.000Z');
        await db.insertResetToken('t2', account.id, '2026-01-01T00:00:00.000Z', '2026-01-01T00:30:00.000Z');
        // Looking does not use it up.
        expect(await db.resetTokenUsable('t1', '2026-01-01T00:10:00.000Z')).toBe(true);
        expect(await db.resetTokenUsable('t1', '2026-01-01T00:10:00.000Z')).toBe(true);
        const uses = await Promise.all([
          db.consumeResetToken('t1', '2026-01-01T00:10:00.000Z'),
          db.consumeResetToken('t1', '2026-01-01T00:10:00.000Z'),
        ]);
        expect(uses.filter((u) => u === account.id)).toHaveLength(1);
        expect(uses.filter((u) => u === undefined)).toHaveLength(1);
        expect(await db.consumeResetToken('t2', '2026-01-01T00:30:00.000Z')).toBeUndefined();
        expect(await db.consumeResetToken('unknown', '2026-01-01T00:10:00.000Z')).toBeUndefined();
        expect(await db.resetTokenUsable('t1', '2026-01-01T00:10:00.000Z')).toBe(false); // used
        expect(await db.resetTokenUsable('t2', '2026-01-01T00:30:00.000Z')).toBe(false); // expired
        expect(await db.resetTokenUsable('t2', '2026-01-01T00:29:59.000Z')).toBe(true);
        expect(await db.resetTokenUsable('unknown', '2026-01-01T00:10:00.000Z')).toBe(false);
      }),
    );

    it(
      'attempts: counted before the try, free ones pass, then a block that doubles; refunds and a quiet window',
      withDb(async (db) => {
        const rule = { windowMs: 3_600_000, free: 3, baseLockMs: 30_000, maxLockMs: 120_000 };
        const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms).toISOString();
        const take = (ms: number, subject = 'acct:a') => db.takeAttempt(subject, at(ms), rule);
        expect(await take(0)).toEqual({ allowed: true, attempts: 1, blockedUntil: null });
        expect(await take(1)).toEqual({ allowed: true, attempts: 2, blockedUntil: null });
        // The attempt that reaches `free` passes and blocks what follows for the base lock.
        expect(await take(2)).toEqual({ allowed: true, attempts: 3, blockedUntil: at(30_002) });
        expect(await take(3)).toEqual({ allowed: false, attempts: 3, blockedUntil: at(30_002) });
        expect(await take(30_001)).toMatchObject({ allowed: false });
        // Past the block one more passes, and the block doubles, up to the cap.
        expect(await take(30_002)).toEqual({ allowed: true, attempts: 4, blockedUntil: at(90_002) });
        expect(await take(90_002)).toEqual({ allowed: true, attempts: 5, blockedUntil: at(210_002) });
        expect(await take(210_002)).toEqual({ allowed: true, attempts: 6, blockedUntil: at(330_002) });
        // Another subject is untouched.
        expect(await take(210_003, 'acct:b')).toEqual({ allowed: true, attempts: 1, blockedUntil: null });
        // A quiet window starts the count again.
        expect(await take(330_002 + 3_600_000)).toEqual({ allowed: true, attempts: 1, blockedUntil: null });
        // A refund below `free` lifts the block the refunded attempt set.
        await take(330_003 + 3_600_000);
        expect((await take(330_004 + 3_600_000)).blockedUntil).not.toBeNull();
        await db.refundAttempt('acct:a', rule.free);
        expect(await take(330_005 + 3_600_000)).toMatchObject({ allowed: true, attempts: 3 });
        await db.clearAttempts('acct:a');
        expect(await take(330_006 + 3_600_000)).toEqual({ allowed: true, attempts: 1, blockedUntil: null });
        // free: 1 blocks from the first attempt on.
        expect(await db.takeAttempt('one', at(0), { ...rule, free: 1 })).toEqual({
          allowed: true,
          attempts: 1,
          blockedUntil: at(30_000),
        });
      }),
    );

    it(
      'attempts: 25 concurrent tries against five free allow exactly five',
      withDb(async (db) => {
        const rule = { windowMs: 3_600_000, free: 5, baseLockMs: 30_000, maxLockMs: 900_000 };
        const now = '2026-01-01T00:00:00.000Z';
        const verdicts = await Promise.all(
          Array.from({ length: 25 }, () => db.takeAttempt('burst', now, rule)),
        );
        expect(verdicts.filter((v) => v.allowed)).toHaveLength(5);
        expect(
          verdicts
            .filter((v) => v.allowed)
            .map((v) => v.attempts)
            .sort(),
        ).toEqual([1, 2, 3, 4, 5]);
      }),
    );

    it(
      'remembers the networks an account signed in from, since a given time',
      withDb(async (db) => {
        expect(await db.knownLoginNetwork('acct+net', '2026-01-01T00:00:00.000Z')).toBe(false);
        await db.rememberLoginNetwork('acct+net', '2026-02-01T00:00:00.000Z');
        await db.rememberLoginNetwork('acct+net', '2026-01-15T00:00:00.000Z');
        expect(await db.knownLoginNetwork('acct+net', '2026-02-01T00:00:00.000Z')).toBe(true);
        expect(await db.knownLoginNetwork('acct+net', '2026-02-01T00:00:00.001Z')).toBe(false);
        expect(await db.knownLoginNetwork('acct+other', '2026-01-01T00:00:00.000Z')).toBe(false);
      }),
    );

    it(
      'keeps the first web secret stored under a name',
      withDb(async (db) => {
        const [a, b] = await Promise.all([db.webSecret('csrf', 'first'), db.webSecret('csrf', 'second')]);
        expect(a).toBe(b);
        expect(await db.webSecret('csrf', 'third')).toBe(a);
        expect(await db.webSecret('other', 'x')).toBe('x');
      }),
    );
  });
}
