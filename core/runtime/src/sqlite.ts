import { BILLING_MIGRATIONS } from './billing.ts';
import { checkMigrationSet, type Database, type MigrationSet } from './database.ts';
import { sqliteIdempotencyStore } from './idempotency-store.ts';
import { sqliteAccountStore } from './sqlite/accounts.ts';
import { sqliteAttemptStore } from './sqlite/attempts.ts';
import { sqliteBatchStore } from './sqlite/batches.ts';
import { openSqliteConnection } from './sqlite/connection.ts';
import { migrateSqlite } from './sqlite/migrations.ts';
import { sqliteUsageStore } from './sqlite/usage.ts';
import { sqliteWebSessionStore } from './sqlite/web-sessions.ts';

export interface SqliteOptions {
  /** Database file; ':memory:' for a throwaway database. Default `<dataDir>/compresso.sqlite`. */
  path?: string;
  dataDir?: string;
  /** How long a write waits for another connection's lock, in ms. */
  busyTimeoutMs?: number;
  /** Integrations' migrations, applied by migrate() after the core's (as registerMigrations). */
  migrations?: readonly MigrationSet[];
}

/**
 * The embedded default: one SQLite file through Node's built-in node:sqlite, every store of the
 * port (sqlite/*.ts, one file each) on the one connection.
 */
export function sqliteDatabase(options: SqliteOptions = {}): Database {
  const conn = openSqliteConnection(options);
  // Every Database carries the billing tables (paid plans), under their own namespace and versions.
  const sets: MigrationSet[] = [BILLING_MIGRATIONS];
  let open = true;
  const database: Database = {
    kind: 'sqlite',
    backend: { kind: 'sqlite', sql: conn.sql },
    idempotency: sqliteIdempotencyStore(conn),
    registerMigrations(set) {
      checkMigrationSet(set, new Set(sets.map((s) => s.namespace)));
      sets.push(set);
    },
    async migrate() {
      migrateSqlite(conn, sets);
    },
    async ping() {
      conn.stmt('SELECT 1').get();
    },
    async close() {
      if (!open) return;
      open = false;
      conn.close();
    },
    ...sqliteAccountStore(conn),
    ...sqliteUsageStore(conn),
    ...sqliteBatchStore(conn),
    ...sqliteWebSessionStore(conn),
    ...sqliteAttemptStore(conn),
  };
  for (const set of options.migrations ?? []) database.registerMigrations(set);
  return database;
}
