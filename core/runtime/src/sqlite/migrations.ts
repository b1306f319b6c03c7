import type { Migration, MigrationSet } from '../database.ts';
import { inOrder, migrationTable } from '../database.ts';
import { IDEMPOTENCY_TABLE_SQL } from '../idempotency-store.ts';
import type { SqliteConnection } from './connection.ts';

/**
 * Versioned migrations, applied in order at start inside one transaction each. Never edit a shipped
 * entry: add the next version.
 */
export const CORE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE accounts (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL,
        plan TEXT NOT NULL DEFAULT 'free',
        created_at TEXT NOT NULL
      );
      CREATE UNIQUE INDEX accounts_email ON accounts (lower(email));
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id),
        name TEXT NOT NULL,
        prefix TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        last_used_at TEXT,
        revoked_at TEXT
      );
      CREATE INDEX api_keys_account ON api_keys (account_id);
      CREATE TABLE promo_codes (
        code TEXT PRIMARY KEY,
        plan TEXT NOT NULL,
        max_uses INTEGER NOT NULL,
        uses INTEGER NOT NULL DEFAULT 0,
        expires_at TEXT,
        created_at TEXT NOT NULL
      );
      CREATE TABLE promo_redemptions (
        code TEXT NOT NULL REFERENCES promo_codes (code),
        account_id TEXT NOT NULL REFERENCES accounts (id),
        redeemed_at TEXT NOT NULL,
        PRIMARY KEY (code, account_id)
      );
      CREATE TABLE usage_daily (
        account_id TEXT NOT NULL REFERENCES accounts (id),
        day TEXT NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (account_id, day)
      );
    `,
  },
  {
    // Version 2: batch jobs (POST /api/v1/jobs) and their items.
    version: 2,
    sql: `
      CREATE TABLE batch_jobs (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id),
        source TEXT NOT NULL,
        options TEXT NOT NULL,
        total INTEGER NOT NULL,
        quota_day TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
      CREATE INDEX batch_jobs_account ON batch_jobs (account_id, created_at);
      CREATE TABLE batch_items (
        batch_id TEXT NOT NULL REFERENCES batch_jobs (id),
        idx INTEGER NOT NULL,
        name TEXT NOT NULL,
        source_url TEXT,
        status TEXT NOT NULL,
        input_size INTEGER,
        output_size INTEGER,
        result TEXT,
        error_code TEXT,
        error_message TEXT,
        finished_at TEXT,
        PRIMARY KEY (batch_id, idx)
      );
      CREATE INDEX batch_items_queued ON batch_items (status, batch_id) WHERE status = 'queued';
    `,
  },
  {
    // Version 3: the web pages' accounts: passwords, browser sessions, reset tokens, log-in throttling.
    version: 3,
    sql: `
      CREATE TABLE account_passwords (
        account_id TEXT PRIMARY KEY REFERENCES accounts (id),
        hash TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE web_sessions (
        id_hash TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id),
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
      );
      CREATE INDEX web_sessions_account ON web_sessions (account_id);
      CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);
      CREATE TABLE password_reset_tokens (
        hash TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id),
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at TEXT
      );
      CREATE INDEX password_reset_tokens_expiry ON password_reset_tokens (expires_at);
      CREATE TABLE login_failures (
        subject TEXT PRIMARY KEY,
        failures INTEGER NOT NULL,
        last_failed_at TEXT NOT NULL
      );
      CREATE TABLE web_secrets (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL
      );
    `,
  },
  {
    // Version 4: the web compressor's visitor allowance (2 and 3 belong to other changes; gaps are fine).
    version: 4,
    sql: `
      CREATE TABLE visitor_usage_daily (
        visitor TEXT NOT NULL,
        day TEXT NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (visitor, day)
      );
    `,
  },
  {
    // Version 5: throttles counted before the attempt (one atomic statement, see attempts-sql.ts)
    // replace login_failures, which counted failures after the password check; and the networks
    // an account has signed in from, which its own lock-out spares.
    version: 5,
    sql: `
      DROP TABLE login_failures;
      CREATE TABLE throttle_attempts (
        subject TEXT PRIMARY KEY,
        attempts INTEGER NOT NULL,
        last_ms INTEGER NOT NULL,
        lock_ms INTEGER NOT NULL,
        blocked_until_ms INTEGER NOT NULL
      );
      CREATE TABLE login_networks (
        subject TEXT PRIMARY KEY,
        last_success_at TEXT NOT NULL
      );
    `,
  },
  {
    // Version 6: the idempotency store's table, now a store of the Database (db.idempotency); a
    // database where it ran as a port of its own keeps its table and rows (see IDEMPOTENCY_TABLE_SQL).
    version: 6,
    sql: IDEMPOTENCY_TABLE_SQL.sqlite,
  },
];

/**
 * Apply what is pending: the core's migrations (recorded in schema_migrations, as since the first
 * release), then each registered set's (recorded in `<namespace>_schema_migrations`), each migration
 * in its own IMMEDIATE transaction, so two processes starting at once cannot both apply one.
 */
export function migrateSqlite(conn: SqliteConnection, sets: readonly MigrationSet[]): void {
  const apply = (table: string, list: readonly Migration[]) => {
    conn.db.exec(
      `CREATE TABLE IF NOT EXISTS ${table} (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`,
    );
    for (const migration of inOrder(list)) {
      conn.transaction(() => {
        if (conn.stmt(`SELECT 1 AS done FROM ${table} WHERE version = ?`).get(migration.version)) return;
        conn.db.exec(migration.sql);
        conn
          .stmt(`INSERT INTO ${table} (version, applied_at) VALUES (?, ?)`)
          .run(migration.version, new Date().toISOString());
      });
    }
  };
  apply('schema_migrations', CORE_MIGRATIONS);
  for (const set of sets) apply(migrationTable(set.namespace), set.sqlite);
}
