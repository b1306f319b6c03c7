import { describe, expect, it } from 'vitest';
import { type OpenDatabase, withDatabase } from './database-battery-helpers.ts';

/**
 * What every backend's AttemptStore must do (attempt throttles and sign-in networks). `open` returns a fresh, migrated, empty
 * Database; other stores are used only to set up (an account for a foreign key).
 */
export function describeAttemptStoreBattery(name: string, open: OpenDatabase): void {
  describe(`AttemptStore battery: ${name}`, () => {
    const withDb = withDatabase(open);

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
  });
}
