import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { sqliteDatabase } from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeAccountStoreBattery } from './accounts-battery.ts';
import { describeAttemptStoreBattery } from './attempts-battery.ts';
import { describeBatchStoreBattery } from './batches-battery.ts';
import { describeBillingStoreBattery } from './billing-battery.ts';
import type { OpenDatabase } from './database-battery-helpers.ts';
import { describeExtensionStoreBattery } from './extension-battery.ts';
import { describeUsageStoreBattery } from './usage-battery.ts';
import { describeWebSessionStoreBattery } from './web-sessions-battery.ts';

/** Every store's battery on one backend. */
function describeDatabaseBatteries(name: string, open: OpenDatabase): void {
  describeAccountStoreBattery(name, open);
  describeUsageStoreBattery(name, open);
  describeBatchStoreBattery(name, open);
  describeWebSessionStoreBattery(name, open);
  describeAttemptStoreBattery(name, open);
  describeBillingStoreBattery(name, open);
}

/**
 * The database batteries (one per store) on every backend: SQLite in memory and as a WAL file, and the real
 * PostgreSQL (CI makes sure one answers at 127.0.0.1:5432 with a `test` database;
 * COMPRESSO_TEST_DATABASE_URL points elsewhere). Each PostgreSQL database the battery opens is a
 * throwaway schema, dropped at the end.
 */
const TEST_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const dir = mkdtempSync(join(tmpdir(), 'compresso-conformance-db-'));
const run = randomBytes(4).toString('hex');
const schemas: string[] = [];
const admin = new pg.Pool({ connectionString: TEST_URL, max: 2, connectionTimeoutMillis: 5000 });

beforeAll(async () => {
  try {
    await admin.query('SELECT 1');
  } catch (error) {
    throw new Error(
      `These tests need PostgreSQL at ${TEST_URL} (set COMPRESSO_TEST_DATABASE_URL to use another). ` +
        `Start it (apt-get install -y postgresql && service postgresql start) — ${(error as Error).message}`,
    );
  }
});

afterAll(async () => {
  for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
});

describeDatabaseBatteries('sqlite (in memory)', async () => {
  const db = sqliteDatabase({ path: ':memory:' });
  await db.migrate();
  return db;
});

let files = 0;
describeDatabaseBatteries('sqlite (file, WAL)', async () => {
  const db = sqliteDatabase({ path: join(dir, `battery-${++files}.sqlite`) });
  await db.migrate();
  return db;
});

describeDatabaseBatteries(`postgres (${TEST_URL.replace(/\/\/[^@/]*@/, '//')})`, async () => {
  const schema = `cmp_conf_${run}_${schemas.length + 1}`;
  schemas.push(schema);
  const db = postgresDatabase({ url: TEST_URL, schema });
  await db.migrate();
  return db;
});

describeExtensionStoreBattery('sqlite (file, WAL)', () => {
  const path = join(dir, `extension-${++files}.sqlite`);
  return (sets) => sqliteDatabase({ path, migrations: sets });
});

describeExtensionStoreBattery(`postgres (${TEST_URL.replace(/\/\/[^@/]*@/, '//')})`, () => {
  const schema = `cmp_conf_${run}_ext_${schemas.length + 1}`;
  schemas.push(schema);
  return (sets) => postgresDatabase({ url: TEST_URL, schema, migrations: sets });
});

/** Run `code` in a fresh Node process from the repository root (so package imports resolve as for a user). */
const inProcess = (code: string) =>
  new Promise<string>((done, fail) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', code],
      { cwd: resolve(import.meta.dirname, '../..'), env: { PATH: process.env.PATH ?? '' }, timeout: 30_000 },
      (error, stdout, stderr) =>
        error ? fail(new Error(`${error.message}\n${stderr}`)) : done(stdout.trim()),
    );
  });

describe('migrations at start', () => {
  // What `compresso serve` and `compresso worker` do when they start: several at once on one database.
  // Each process also registers an integration's migrations, as the Shopify app's processes will.
  const extension = `const { SHOP_MIGRATIONS } = await import('./test/conformance/extension-store.ts');`;

  it('four processes migrating one fresh PostgreSQL schema at once apply each migration once, the core and an integration alike', async () => {
    const schema = `cmp_conf_${run}_start`;
    schemas.push(schema);
    const code = `
      const { postgresDatabase } = await import('@compresso/runtime/postgres');
      ${extension}
      const db = postgresDatabase({ url: ${JSON.stringify(TEST_URL)}, schema: ${JSON.stringify(schema)}, poolSize: 1, migrations: [SHOP_MIGRATIONS] });
      await db.migrate();
      console.log(await db.countAccounts());
      await db.close();
    `;
    const outputs = await Promise.all(Array.from({ length: 4 }, () => inProcess(code)));
    expect(outputs).toEqual(['0', '0', '0', '0']);
    const versionsIn = async (name: string, table = 'schema_migrations') =>
      (await admin.query(`SELECT version FROM "${name}".${table} ORDER BY version`)).rows.map((r) =>
        Number(r.version),
      );
    // The versions one process alone applies, each once: the primary key refuses a second row, so a
    // race shows as a failed process above or a missing version here.
    const reference = `cmp_conf_${run}_reference`;
    schemas.push(reference);
    const alone = postgresDatabase({ url: TEST_URL, schema: reference });
    await alone.migrate();
    await alone.close();
    expect(await versionsIn(schema)).toEqual(await versionsIn(reference));
    expect(await versionsIn(schema, 'example_shop_schema_migrations')).toEqual([1, 2]);
  });

  it('four processes migrating one fresh SQLite file at once apply each migration once, the core and an integration alike', async () => {
    const path = join(dir, 'start.sqlite');
    const code = `
      const { sqliteDatabase } = await import('@compresso/runtime');
      ${extension}
      const db = sqliteDatabase({ path: ${JSON.stringify(path)}, migrations: [SHOP_MIGRATIONS] });
      await db.migrate();
      console.log(await db.countAccounts());
      await db.close();
    `;
    const outputs = await Promise.all(Array.from({ length: 4 }, () => inProcess(code)));
    expect(outputs).toEqual(['0', '0', '0', '0']);
    const versionsIn = (file: string, table = 'schema_migrations') => {
      const raw = new DatabaseSync(file);
      const rows = raw.prepare(`SELECT version FROM ${table} ORDER BY version`).all() as {
        version: number;
      }[];
      raw.close();
      return rows.map((r) => r.version);
    };
    const alone = sqliteDatabase({ path: join(dir, 'reference.sqlite') });
    await alone.migrate();
    await alone.close();
    expect(versionsIn(path)).toEqual(versionsIn(join(dir, 'reference.sqlite')));
    expect(versionsIn(path, 'example_shop_schema_migrations')).toEqual([1, 2]);
  });
});
