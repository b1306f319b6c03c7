import { BILLING_MIGRATIONS } from './billing.ts';
import { checkMigrationSet, type Database, type MigrationSet } from './database.ts';
import { postgresIdempotencyStore } from './idempotency-store.ts';
import { postgresAccountStore } from './postgres/accounts.ts';
import { postgresAttemptStore } from './postgres/attempts.ts';
import { postgresBatchStore } from './postgres/batches.ts';
import { openPostgresConnection } from './postgres/connection.ts';
import { migratePostgres } from './postgres/migrations.ts';
import { postgresUsageStore } from './postgres/usage.ts';
import { postgresWebSessionStore } from './postgres/web-sessions.ts';

export interface PostgresOptions {
  /** `postgres://user:password@host:port/database` (DATABASE_URL). */
  url: string;
  /**
   * Schema holding Compresso's tables; created by migrate(). Default `public`. Tests give each run a
   * throwaway schema; an operator can put Compresso beside other applications in one database.
   */
  schema?: string;
  /** Connections in the pool. Default 10: each query is a point lookup, so a few connections serve many requests. */
  poolSize?: number;
  /** How long to wait for a connection before failing (so /readyz answers instead of hanging), in ms. Default 5000. */
  connectTimeoutMs?: number;
  /** Longest a single statement may run, in ms. Default 10 000: every statement here is a point query; one that takes longer is stuck on a lock. */
  statementTimeoutMs?: number;
  /** Integrations' migrations, applied by migrate() after the core's (as registerMigrations). */
  migrations?: readonly MigrationSet[];
}

/**
 * The PostgreSQL backend (DATABASE_URL), for running several server processes on one database. Same
 * port, same guarantees as the SQLite file: every atomic rule (quota, promo uses) is one statement or
 * one short transaction in the database, never a read-then-write in the process, so it holds however
 * many processes share the load. The pool connects lazily: creating the backend never touches the
 * network; migrate() or the first query does.
 */
export function postgresDatabase(options: PostgresOptions): Database {
  const conn = openPostgresConnection(options);
  // Every Database carries the billing tables (paid plans), under their own namespace and versions.
  const sets: MigrationSet[] = [BILLING_MIGRATIONS];
  let closed: Promise<void> | undefined;
  const database: Database = {
    kind: 'postgres',
    backend: { kind: 'postgres', sql: conn.sql },
    idempotency: postgresIdempotencyStore(conn),
    registerMigrations(set) {
      checkMigrationSet(set, new Set(sets.map((s) => s.namespace)));
      sets.push(set);
    },
    migrate() {
      return migratePostgres(conn, sets);
    },
    async ping() {
      await conn.query('SELECT 1');
    },
    close() {
      closed ??= conn.pool.end();
      return closed;
    },
    ...postgresAccountStore(conn),
    ...postgresUsageStore(conn),
    ...postgresBatchStore(conn),
    ...postgresWebSessionStore(conn),
    ...postgresAttemptStore(conn),
  };
  for (const set of options.migrations ?? []) database.registerMigrations(set);
  return database;
}
