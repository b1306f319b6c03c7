import { createAccount, type Database, type MigrationSet } from '@compresso/runtime';
import { describe, expect, it } from 'vitest';
import { SHOP_MIGRATIONS, shopStore } from './extension-store.ts';

/**
 * One storage place (a file, a PostgreSQL schema) that can be opened several times, like a process
 * restarting: each call gives a new, not yet migrated Database on the same data, with these sets.
 */
export type OpenStorage = (sets: MigrationSet[]) => Database;

async function versions(db: Database, table: string): Promise<number[]> {
  const sql = `SELECT version FROM ${table} ORDER BY version`;
  const rows =
    db.backend.kind === 'sqlite' ? db.backend.sql.all(sql) : (await db.backend.sql.query(sql)).rows;
  return rows.map((r) => Number(r.version));
}

/**
 * What a backend must offer an integration that owns tables (the runtime README's recipe): its
 * migrations applied with the core's, under its own namespace and version table, upgraded across
 * restarts, and its queries (statements and transactions) on the Database's connection.
 */
export function describeExtensionStoreBattery(name: string, storage: () => OpenStorage): void {
  describe(`an integration's own store and migrations: ${name}`, () => {
    it('runs its migrations after the core, in its own version table, once; a restart with a new version applies only that', async () => {
      const open = storage();
      const first = open([
        {
          ...SHOP_MIGRATIONS,
          sqlite: SHOP_MIGRATIONS.sqlite.slice(0, 1),
          postgres: SHOP_MIGRATIONS.postgres.slice(0, 1),
        },
      ]);
      try {
        await first.migrate();
        await first.migrate();
        expect(await versions(first, 'example_shop_schema_migrations')).toEqual([1]);
        // The core's own table is untouched by the integration's versions.
        expect(await versions(first, 'schema_migrations')).toEqual(expect.arrayContaining([1, 2, 3, 4, 5]));
        const account = await createAccount(first, 'shop-owner@example.com');
        expect(
          await shopStore(first).install({
            domain: 'a.example',
            accountId: account.id,
            installedAt: '2026-11-25T10:00:00.000Z',
          }),
        ).toBe(true);
      } finally {
        await first.close();
      }
      // The next release ships version 2: the data of version 1 is kept, the column added.
      const second = open([SHOP_MIGRATIONS]);
      try {
        await second.migrate();
        expect(await versions(second, 'example_shop_schema_migrations')).toEqual([1, 2]);
        expect(await shopStore(second).find('a.example')).toMatchObject({
          domain: 'a.example',
          imagesDone: 0,
          installedAt: '2026-11-25T10:00:00.000Z',
        });
      } finally {
        await second.close();
      }
    });

    it('its store answers on the backend: one install per shop, exact counts under concurrency, all-or-nothing transactions', async () => {
      const db = storage()([SHOP_MIGRATIONS]);
      try {
        await db.migrate();
        const shops = shopStore(db);
        const account = await createAccount(db, 'owner@example.com');
        const at = '2026-11-25T10:00:00.000Z';
        const installs = await Promise.all(
          Array.from({ length: 10 }, () =>
            shops.install({ domain: 'b.example', accountId: account.id, installedAt: at }),
          ),
        );
        expect(installs.filter(Boolean)).toHaveLength(1);
        await shops.install({ domain: 'c.example', accountId: account.id, installedAt: at });
        const totals = await Promise.all(Array.from({ length: 50 }, () => shops.countImages('b.example', 1)));
        expect(Math.max(...totals)).toBe(50);
        expect((await shops.find('b.example'))?.imagesDone).toBe(50);
        // A transaction that fails halfway leaves nothing behind: c.example is not deleted.
        await expect(shops.merge('c.example', 'nowhere.example')).rejects.toThrow(/no shop nowhere/);
        expect(await shops.find('c.example')).toBeDefined();
        await shops.countImages('c.example', 7);
        await shops.merge('c.example', 'b.example');
        expect(await shops.find('c.example')).toBeUndefined();
        expect((await shops.find('b.example'))?.imagesDone).toBe(57);
        // Its tables sit beside the core's: a foreign key to accounts holds.
        await expect(
          shops.install({ domain: 'd.example', accountId: 'acc_missing', installedAt: at }),
        ).rejects.toThrow();
      } finally {
        await db.close();
      }
    });

    it('refuses a bad or repeated namespace and repeated versions when registered, before anything runs', async () => {
      const db = storage()([]);
      try {
        db.registerMigrations(SHOP_MIGRATIONS);
        expect(() => db.registerMigrations(SHOP_MIGRATIONS)).toThrow(/example_shop is already registered/);
        expect(() => db.registerMigrations({ ...SHOP_MIGRATIONS, namespace: 'Shop-App' })).toThrow(
          /namespace must be/,
        );
        expect(() =>
          db.registerMigrations({
            namespace: 'twice',
            sqlite: [
              { version: 1, sql: '' },
              { version: 1, sql: '' },
            ],
            postgres: [],
          }),
        ).toThrow(/versions must be distinct/);
        await db.migrate();
        expect(await versions(db, 'example_shop_schema_migrations')).toEqual([1, 2]);
      } finally {
        await db.close();
      }
    });
  });
}
