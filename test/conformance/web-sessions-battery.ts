import { createAccount } from '@compresso/runtime';
import { describe, expect, it } from 'vitest';
import { type OpenDatabase, withDatabase } from './database-battery-helpers.ts';

/**
 * What every backend's WebSessionStore must do (passwords, web sessions, reset tokens and web secrets). `open` returns a fresh, migrated, empty
 * Database; other stores are used only to set up (an account for a foreign key).
 */
export function describeWebSessionStoreBattery(name: string, open: OpenDatabase): void {
  describe(`WebSessionStore battery: ${name}`, () => {
    const withDb = withDatabase(open);

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
