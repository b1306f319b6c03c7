/**
 * The kit's own tests' backends: a SQLite file per database and the real PostgreSQL (a throwaway
 * schema per database, dropped at the end), each with the kit's migrations. Not exported.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Compresso } from '@compresso/client';
import { type Database, fileBlobStore, sqliteDatabase } from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import { proAccount, startTestServer } from '@compresso/server/testing';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { KIT_MIGRATIONS } from './migrations.ts';

export const TEST_DATABASE_URL =
  process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export interface Backend {
  name: string;
  /**
   * A fresh, migrated database. Called again with the same `place`, it opens the same data anew (a
   * process restarting).
   */
  open(place?: string): Promise<Database>;
  /** A new place (file or schema) for `open`. */
  place(): string;
}

/** Both backends, with cleanup registered on the calling test file's hooks. */
export function testBackends(): Backend[] {
  const dir = mkdtempSync(join(tmpdir(), 'compresso-kit-'));
  const run = randomBytes(4).toString('hex');
  const schemas = new Set<string>();
  let n = 0;
  const admin = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 1, connectionTimeoutMillis: 5000 });
  beforeAll(async () => {
    try {
      await admin.query('SELECT 1');
    } catch (error) {
      throw new Error(
        `These tests need PostgreSQL at ${TEST_DATABASE_URL} (set COMPRESSO_TEST_DATABASE_URL to use another). ` +
          `Start it (apt-get install -y postgresql && service postgresql start) — ${(error as Error).message}`,
      );
    }
  });
  afterAll(async () => {
    for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    rmSync(dir, { recursive: true, force: true });
  });
  const sqlite: Backend = {
    name: 'sqlite (file, WAL)',
    place: () => join(dir, `kit-${++n}.sqlite`),
    async open(place = sqlite.place()) {
      const db = sqliteDatabase({ path: place, migrations: [KIT_MIGRATIONS] });
      await db.migrate();
      return db;
    },
  };
  const postgres: Backend = {
    name: `postgres (${TEST_DATABASE_URL.replace(/\/\/[^@/]*@/, '//')})`,
    place: () => {
      const schema = `kit_test_${run}_${++n}`;
      schemas.add(schema);
      return schema;
    },
    async open(place = postgres.place()) {
      const db = postgresDatabase({
        url: TEST_DATABASE_URL,
        schema: place,
        poolSize: 4,
        migrations: [KIT_MIGRATIONS],
      });
      await db.migrate();
      return db;
    },
  };
  return [sqlite, postgres];
}

/** A blob store in a temporary directory, removed after the test file. */
export function testBlobDir(): () => ReturnType<typeof fileBlobStore> {
  const dir = mkdtempSync(join(tmpdir(), 'compresso-kit-blobs-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let n = 0;
  return () => fileBlobStore({ root: join(dir, `store-${++n}`) });
}

/**
 * A real Compresso server on a loopback port (the server's own test harness, a devDependency: the
 * kit itself reaches it only through @compresso/client), on the given clock so a quota wait can
 * cross midnight without waiting for it, with a Pro account and a client holding its key.
 */
export async function startCompresso(options: { now: () => number; dailyLimit?: number }): Promise<{
  url: string;
  client: Compresso;
  close(): Promise<void>;
}> {
  const server = await startTestServer({
    dbPath: ':memory:',
    now: () => new Date(options.now()),
    overrides: { logLevel: 'warn', ...(options.dailyLimit ? { proDailyLimit: options.dailyLimit } : {}) },
  });
  const { key } = await proAccount(server.db, 'kit@example.com');
  // One attempt per call: a transient failure is the pipeline's to count, not the client's to hide.
  const client = new Compresso(key, { baseUrl: server.url, maxRetries: 0 });
  return { url: server.url, client, close: () => server.close() };
}
