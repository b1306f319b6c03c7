import { createAccount } from '@compresso/runtime';
import { describe, expect, it } from 'vitest';
import { type OpenDatabase, withDatabase } from './database-battery-helpers.ts';

/**
 * What every backend's UsageStore must do (daily quota and the visitor allowance). `open` returns a fresh, migrated, empty
 * Database; other stores are used only to set up (an account for a foreign key).
 */
export function describeUsageStoreBattery(name: string, open: OpenDatabase): void {
  describe(`UsageStore battery: ${name}`, () => {
    const withDb = withDatabase(open);

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
  });
}
