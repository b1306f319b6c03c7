import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sqliteDatabase } from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
// The battery stays beside the Database port it describes (its cases grow with the port); it is not
// exported from the package entry, so the runtime never loads vitest.
import { describeDatabaseBattery } from '../../core/runtime/src/database-battery.ts';

/**
 * The database battery on every backend: SQLite in memory and as a WAL file, and the real
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

describeDatabaseBattery('sqlite (in memory)', async () => {
  const db = sqliteDatabase({ path: ':memory:' });
  await db.migrate();
  return db;
});

let files = 0;
describeDatabaseBattery('sqlite (file, WAL)', async () => {
  const db = sqliteDatabase({ path: join(dir, `battery-${++files}.sqlite`) });
  await db.migrate();
  return db;
});

describeDatabaseBattery(`postgres (${TEST_URL.replace(/\/\/[^@/]*@/, '//')})`, async () => {
  const schema = `cmp_conf_${run}_${schemas.length + 1}`;
  schemas.push(schema);
  const db = postgresDatabase({ url: TEST_URL, schema });
  await db.migrate();
  return db;
});
