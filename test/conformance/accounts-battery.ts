import {
  applyPromo,
  createAccount,
  createApiKey,
  createPromoCode,
  hashKey,
  listApiKeys,
  looksLikeKey,
  requireAccount,
  revokeApiKey,
} from '@compresso/runtime';
import { describe, expect, it } from 'vitest';
import { codeOf, type OpenDatabase, withDatabase } from './database-battery-helpers.ts';

/**
 * What every backend's AccountStore must do (accounts, promo codes and API keys). `open` returns a fresh, migrated, empty
 * Database; other stores are used only to set up (an account for a foreign key).
 */
export function describeAccountStoreBattery(name: string, open: OpenDatabase): void {
  describe(`AccountStore battery: ${name}`, () => {
    const withDb = withDatabase(open);

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
  });
}
