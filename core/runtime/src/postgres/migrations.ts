import type { Migration, MigrationSet } from '../database.ts';
import { inOrder, migrationTable } from '../database.ts';
import { IDEMPOTENCY_TABLE_SQL } from '../idempotency-store.ts';
import type { PostgresConnection } from './connection.ts';

/**
 * Versioned migrations, applied in order inside one transaction each, under an advisory lock so
 * several processes starting at once neither race nor apply a version twice. Never edit a shipped
 * entry: add the next version. The tables mirror the SQLite backend's; timestamps are timestamptz
 * (returned to callers as ISO strings, like SQLite's), the quota day a date.
 */
export const CORE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE accounts (
        id text PRIMARY KEY,
        email text NOT NULL,
        plan text NOT NULL DEFAULT 'free',
        created_at timestamptz NOT NULL
      );
      CREATE UNIQUE INDEX accounts_email ON accounts (lower(email));
      CREATE TABLE api_keys (
        id text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts (id),
        name text NOT NULL,
        prefix text NOT NULL,
        hash text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL,
        last_used_at timestamptz,
        revoked_at timestamptz
      );
      CREATE INDEX api_keys_account ON api_keys (account_id);
      CREATE TABLE promo_codes (
        code text PRIMARY KEY,
        plan text NOT NULL,
        max_uses integer NOT NULL,
        uses integer NOT NULL DEFAULT 0,
        expires_at timestamptz,
        created_at timestamptz NOT NULL
      );
      CREATE TABLE promo_redemptions (
        code text NOT NULL REFERENCES promo_codes (code),
        account_id text NOT NULL REFERENCES accounts (id),
        redeemed_at timestamptz NOT NULL,
        PRIMARY KEY (code, account_id)
      );
      CREATE TABLE usage_daily (
        account_id text NOT NULL REFERENCES accounts (id),
        day date NOT NULL,
        count integer NOT NULL,
        PRIMARY KEY (account_id, day)
      );
    `,
  },
  {
    // Version 2: batch jobs (POST /api/v1/jobs) and their items.
    version: 2,
    sql: `
      CREATE TABLE batch_jobs (
        id text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts (id),
        source text NOT NULL,
        options text NOT NULL,
        total integer NOT NULL,
        quota_day date NOT NULL,
        created_at timestamptz NOT NULL
      );
      CREATE INDEX batch_jobs_account ON batch_jobs (account_id, created_at);
      CREATE TABLE batch_items (
        batch_id text NOT NULL REFERENCES batch_jobs (id),
        idx integer NOT NULL,
        name text NOT NULL,
        source_url text,
        status text NOT NULL,
        input_size bigint,
        output_size bigint,
        result text,
        error_code text,
        error_message text,
        finished_at timestamptz,
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
        account_id text PRIMARY KEY REFERENCES accounts (id),
        hash text NOT NULL,
        updated_at timestamptz NOT NULL
      );
      CREATE TABLE web_sessions (
        id_hash text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts (id),
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX web_sessions_account ON web_sessions (account_id);
      CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);
      CREATE TABLE password_reset_tokens (
        hash text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts (id),
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        used_at timestamptz
      );
      CREATE INDEX password_reset_tokens_expiry ON password_reset_tokens (expires_at);
      CREATE TABLE login_failures (
        subject text PRIMARY KEY,
        failures integer NOT NULL,
        last_failed_at timestamptz NOT NULL
      );
      CREATE TABLE web_secrets (
        name text PRIMARY KEY,
        value text NOT NULL
      );
    `,
  },
  {
    // Version 4: the web compressor's visitor allowance (2 and 3 belong to other changes; gaps are fine).
    version: 4,
    sql: `
      CREATE TABLE visitor_usage_daily (
        visitor text NOT NULL,
        day date NOT NULL,
        count integer NOT NULL,
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
        subject text PRIMARY KEY,
        attempts integer NOT NULL,
        last_ms bigint NOT NULL,
        lock_ms bigint NOT NULL,
        blocked_until_ms bigint NOT NULL
      );
      CREATE TABLE login_networks (
        subject text PRIMARY KEY,
        last_success_at timestamptz NOT NULL
      );
    `,
  },
  {
    // Version 6: the idempotency store's table, now a store of the Database (db.idempotency); a
    // database where it ran as a port of its own keeps its table and rows (see IDEMPOTENCY_TABLE_SQL).
    version: 6,
    sql: IDEMPOTENCY_TABLE_SQL.postgres,
  },
];

/** Any fixed number: it names "Compresso migrations" among the advisory locks of a shared database. */
export const MIGRATION_LOCK = 0x636d7030;

/**
 * Apply what is pending, in one transaction under the advisory lock: the core's migrations
 * (recorded in schema_migrations, as since the first release), then each registered set's (recorded
 * in `<namespace>_schema_migrations`), so several processes starting at once neither race nor apply
 * a version twice.
 */
export async function migratePostgres(
  conn: PostgresConnection,
  sets: readonly MigrationSet[],
): Promise<void> {
  await conn.transaction(async (client) => {
    // The 10 s statement limit is for request-time point queries; a migration (or waiting for
    // another process's) may take longer, so this transaction has none.
    await client.query('SET LOCAL statement_timeout = 0');
    // Transaction-scoped: released by COMMIT/ROLLBACK even if this process dies mid-migration.
    // Taken before CREATE SCHEMA too: "IF NOT EXISTS" is not safe against a concurrent creator.
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${conn.quotedSchema}`);
    const apply = async (table: string, list: readonly Migration[]) => {
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${table} (version integer PRIMARY KEY, applied_at timestamptz NOT NULL)`,
      );
      const done = new Set(
        (await client.query<{ version: number }>(`SELECT version FROM ${table}`)).rows.map((r) =>
          Number(r.version),
        ),
      );
      for (const migration of inOrder(list)) {
        if (done.has(migration.version)) continue;
        await client.query(migration.sql);
        await client.query(`INSERT INTO ${table} (version, applied_at) VALUES ($1, now())`, [
          migration.version,
        ]);
      }
    };
    await apply('schema_migrations', CORE_MIGRATIONS);
    for (const set of sets) await apply(migrationTable(set.namespace), set.postgres);
  });
}
