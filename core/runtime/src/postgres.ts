import { CompressoError } from '@compresso/schema';
import pg from 'pg';
import { blockedUntilIso, REFUND_ATTEMPT_SQL, takeAttemptParams, takeAttemptSql } from './attempts-sql.ts';
import type {
  Account,
  ApiKeyRecord,
  BatchItemRecord,
  BatchRecord,
  Database,
  PlanId,
  PromoCode,
  QuotaResult,
  RedeemOutcome,
} from './database.ts';
import { DuplicateError } from './database.ts';

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
}

/**
 * Versioned migrations, applied in order inside one transaction each, under an advisory lock so
 * several processes starting at once neither race nor apply a version twice. Never edit a shipped
 * entry: add the next version. The tables mirror the SQLite backend's; timestamps are timestamptz
 * (returned to callers as ISO strings, like SQLite's), the quota day a date.
 */
const MIGRATIONS: { version: number; sql: string }[] = [
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
];

/** Any fixed number: it names "Compresso migrations" among the advisory locks of a shared database. */
const MIGRATION_LOCK = 0x636d7030;

type Row = Record<string, unknown>;

const iso = (value: unknown): string =>
  (value instanceof Date ? value : new Date(String(value))).toISOString();
const isoOrNull = (value: unknown): string | null => (value == null ? null : iso(value));

function toAccount(row: Row, prefix = ''): Account {
  return {
    id: String(row[`${prefix}id`]),
    email: String(row[`${prefix}email`]),
    plan: String(row[`${prefix}plan`]) as PlanId,
    createdAt: iso(row[`${prefix}created_at`]),
  };
}

function toKey(row: Row): ApiKeyRecord {
  return {
    id: String(row.id),
    accountId: String(row.account_id),
    name: String(row.name),
    prefix: String(row.prefix),
    hash: String(row.hash),
    createdAt: iso(row.created_at),
    lastUsedAt: isoOrNull(row.last_used_at),
    revokedAt: isoOrNull(row.revoked_at),
  };
}

function toPromo(row: Row): PromoCode {
  return {
    code: String(row.code),
    plan: String(row.plan) as PlanId,
    maxUses: Number(row.max_uses),
    uses: Number(row.uses),
    expiresAt: isoOrNull(row.expires_at),
    createdAt: iso(row.created_at),
  };
}

/** 23505 is PostgreSQL's unique_violation. */
function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '23505';
}

/**
 * Errors that mean "the database cannot be reached now" (a restart, a failover, a terminated
 * backend, no free connection in time) rather than "this statement is wrong": connection exceptions
 * (SQLSTATE class 08), admin/crash shutdown and "cannot connect now" (57P01–57P03), socket errors,
 * and node-postgres's own connection messages.
 */
function isUnavailable(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return true;
  if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'EAI_AGAIN'].includes(code))
    return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  return /Connection terminated|timeout exceeded when trying to connect|connection error|Connection ended/i.test(
    message,
  );
}

/**
 * An outage becomes SERVICE_UNAVAILABLE (503, "retry shortly") instead of a 500 "bug" for every
 * request that hits it; the pool reconnects by itself once the database is back.
 */
function unavailable(error: unknown): unknown {
  if (!isUnavailable(error)) return error;
  return new CompressoError('SERVICE_UNAVAILABLE', 'The database is unavailable; retry in a few seconds.', {
    cause: error,
  });
}

function quoteIdent(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) {
    throw new Error(
      `PostgreSQL schema: expected letters, digits and _ (at most 63), received ${JSON.stringify(name)}`,
    );
  }
  return `"${name}"`;
}

/**
 * The PostgreSQL backend (DATABASE_URL), for running several server processes on one database. Same
 * port, same guarantees as the SQLite file: every atomic rule (quota, promo uses) is one statement or
 * one short transaction in the database, never a read-then-write in the process, so it holds however
 * many processes share the load. The pool connects lazily: creating the backend never touches the
 * network; migrate() or the first query does.
 */
export function postgresDatabase(options: PostgresOptions): Database {
  const schema = options.schema ?? 'public';
  const quotedSchema = quoteIdent(schema);
  const statementTimeout = Math.trunc(options.statementTimeoutMs ?? 10_000);
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
    // Set per connection at startup, so no query can run against another schema by accident.
    options: `-c search_path=${quotedSchema} -c statement_timeout=${statementTimeout}`,
  });
  // An idle connection dropped by the server (restart, failover) emits 'error' on the pool; without a
  // listener that would crash the process. The pool discards the connection and the next query opens
  // a new one; a real outage shows in the failing queries and in /readyz.
  pool.on('error', () => {});

  const query = async (sql: string, params: unknown[] = []): Promise<pg.QueryResult<Row>> =>
    pool.query<Row>(sql, params).catch((error: unknown) => {
      throw unavailable(error);
    });
  const one = async (sql: string, params: unknown[] = []): Promise<Row | undefined> =>
    (await query(sql, params)).rows[0];

  const transaction = async <T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect().catch((error: unknown) => {
      throw unavailable(error);
    });
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      // A connection that failed goes away (release(error)), not back to the pool for the next caller.
      if (isUnavailable(error)) broken = error as Error;
      else await client.query('ROLLBACK').catch(() => {});
      throw unavailable(error);
    } finally {
      client.release(broken);
    }
  };

  let closed: Promise<void> | undefined;

  // node-postgres parses a date column into a Date at local midnight: read it back in local time.
  const dateText = (value: unknown): string =>
    value instanceof Date
      ? `${value.getFullYear()}-${String(value.getMonth() + 1).padStart(2, '0')}-${String(value.getDate()).padStart(2, '0')}`
      : String(value);
  const toBatch = (row: Row): BatchRecord => ({
    id: String(row.id),
    accountId: String(row.account_id),
    source: String(row.source) as BatchRecord['source'],
    options: String(row.options),
    total: Number(row.total),
    quotaDay: dateText(row.quota_day),
    createdAt: iso(row.created_at),
  });
  const numOrNull = (v: unknown) => (v == null ? null : Number(v));
  const strOrNull = (v: unknown) => (v == null ? null : String(v));
  const toItem = (row: Row): BatchItemRecord => ({
    batchId: String(row.batch_id),
    index: Number(row.idx),
    name: String(row.name),
    sourceUrl: strOrNull(row.source_url),
    status: String(row.status) as BatchItemRecord['status'],
    inputSize: numOrNull(row.input_size),
    outputSize: numOrNull(row.output_size),
    result: strOrNull(row.result),
    errorCode: strOrNull(row.error_code),
    errorMessage: strOrNull(row.error_message),
    finishedAt: isoOrNull(row.finished_at),
  });

  const database: Database = {
    kind: 'postgres',
    async migrate() {
      await transaction(async (client) => {
        // The 10 s statement limit is for request-time point queries; a migration (or waiting for
        // another process's) may take longer, so this transaction has none.
        await client.query('SET LOCAL statement_timeout = 0');
        // Transaction-scoped: released by COMMIT/ROLLBACK even if this process dies mid-migration.
        // Taken before CREATE SCHEMA too: "IF NOT EXISTS" is not safe against a concurrent creator.
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
        await client.query(`CREATE SCHEMA IF NOT EXISTS ${quotedSchema}`);
        await client.query(
          'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL)',
        );
        const done = new Set(
          (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) =>
            Number(r.version),
          ),
        );
        for (const migration of MIGRATIONS) {
          if (done.has(migration.version)) continue;
          await client.query(migration.sql);
          await client.query('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, now())', [
            migration.version,
          ]);
        }
      });
    },
    async ping() {
      await query('SELECT 1');
    },
    close() {
      closed ??= pool.end();
      return closed;
    },

    async countAccounts() {
      return Number((await one('SELECT count(*)::int AS n FROM accounts'))?.n ?? 0);
    },
    async insertAccount(account) {
      try {
        await query('INSERT INTO accounts (id, email, plan, created_at) VALUES ($1, $2, $3, $4)', [
          account.id,
          account.email,
          account.plan,
          account.createdAt,
        ]);
      } catch (error) {
        if (isUniqueViolation(error))
          throw new DuplicateError(`an account with email ${account.email} exists`);
        throw error;
      }
    },
    async findAccountById(id) {
      const row = await one('SELECT * FROM accounts WHERE id = $1', [id]);
      return row && toAccount(row);
    },
    async findAccountByEmail(email) {
      const row = await one('SELECT * FROM accounts WHERE lower(email) = lower($1)', [email]);
      return row && toAccount(row);
    },
    async setAccountPlan(accountId, plan) {
      await query('UPDATE accounts SET plan = $1 WHERE id = $2', [plan, accountId]);
    },

    async insertPromo(promo) {
      try {
        await query(
          'INSERT INTO promo_codes (code, plan, max_uses, uses, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
          [promo.code, promo.plan, promo.maxUses, promo.uses, promo.expiresAt, promo.createdAt],
        );
      } catch (error) {
        if (isUniqueViolation(error)) throw new DuplicateError(`promo code ${promo.code} exists`);
        throw error;
      }
    },
    async findPromo(code) {
      const row = await one('SELECT * FROM promo_codes WHERE code = $1', [code]);
      return row && toPromo(row);
    },
    async redeemPromo(code, accountId, now): Promise<RedeemOutcome> {
      return transaction(async (client): Promise<RedeemOutcome> => {
        // FOR UPDATE serialises redeemers of one code: the second waits for the first to commit and
        // then sees its use and its redemption row, so uses never exceed max_uses.
        const promoRow = (
          await client.query<Row>('SELECT * FROM promo_codes WHERE code = $1 FOR UPDATE', [code])
        ).rows[0];
        if (!promoRow) return { ok: false, reason: 'unknown_code' };
        const accountRow = (await client.query<Row>('SELECT * FROM accounts WHERE id = $1', [accountId]))
          .rows[0];
        if (!accountRow) return { ok: false, reason: 'unknown_account' };
        const promo = toPromo(promoRow);
        if (promo.expiresAt !== null && Date.parse(promo.expiresAt) <= Date.parse(now)) {
          return { ok: false, reason: 'expired' };
        }
        const redeemed = await client.query(
          'SELECT 1 FROM promo_redemptions WHERE code = $1 AND account_id = $2',
          [code, accountId],
        );
        if (redeemed.rowCount) return { ok: false, reason: 'already_redeemed' };
        const counted = (
          await client.query<Row>(
            'UPDATE promo_codes SET uses = uses + 1 WHERE code = $1 AND uses < max_uses RETURNING uses',
            [code],
          )
        ).rows[0];
        if (!counted) return { ok: false, reason: 'used_up' };
        await client.query(
          'INSERT INTO promo_redemptions (code, account_id, redeemed_at) VALUES ($1, $2, $3)',
          [code, accountId, now],
        );
        await client.query('UPDATE accounts SET plan = $1 WHERE id = $2', [promo.plan, accountId]);
        return {
          ok: true,
          account: { ...toAccount(accountRow), plan: promo.plan },
          promo: { ...promo, uses: Number(counted.uses) },
        };
      });
    },

    async insertApiKey(key) {
      await query(
        'INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, last_used_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
        [key.id, key.accountId, key.name, key.prefix, key.hash, key.createdAt, key.lastUsedAt, key.revokedAt],
      );
    },
    async findActiveKeyByHash(hash) {
      const row = await one(
        `SELECT k.*, a.id AS a_id, a.email AS a_email, a.plan AS a_plan, a.created_at AS a_created_at
         FROM api_keys k JOIN accounts a ON a.id = k.account_id
         WHERE k.hash = $1 AND k.revoked_at IS NULL`,
        [hash],
      );
      if (!row) return undefined;
      return { key: toKey(row), account: toAccount(row, 'a_') };
    },
    async listApiKeys(accountId) {
      const { rows } = await query('SELECT * FROM api_keys WHERE account_id = $1 ORDER BY created_at, id', [
        accountId,
      ]);
      return rows.map(toKey);
    },
    async findApiKey(id) {
      const row = await one('SELECT * FROM api_keys WHERE id = $1', [id]);
      return row && toKey(row);
    },
    async revokeApiKey(id, now, accountId) {
      const result =
        accountId === undefined
          ? await query('UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [now, id])
          : await query(
              'UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND account_id = $3 AND revoked_at IS NULL',
              [now, id, accountId],
            );
      return result.rowCount === 1;
    },
    async touchApiKey(id, now, staleBefore) {
      await query(
        'UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)',
        [now, id, staleBefore],
      );
    },

    async consumeQuota(accountId, day, limit): Promise<QuotaResult> {
      if (limit < 1) return { allowed: false, used: await database.usageOn(accountId, day) };
      // One statement: the row lock taken by ON CONFLICT DO UPDATE makes concurrent callers queue on
      // the (account, day) row, and each re-checks `count < limit` against the committed value, so
      // the count can never pass the limit across connections or processes.
      const row = await one(
        `INSERT INTO usage_daily (account_id, day, count) VALUES ($1, $2, 1)
         ON CONFLICT (account_id, day) DO UPDATE SET count = usage_daily.count + 1
         WHERE usage_daily.count < $3
         RETURNING count`,
        [accountId, day, limit],
      );
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await database.usageOn(accountId, day) };
    },
    async refundQuota(accountId, day, n = 1) {
      await query(
        'UPDATE usage_daily SET count = greatest(0, count - $3) WHERE account_id = $1 AND day = $2 AND count > 0',
        [accountId, day, n],
      );
    },
    async consumeQuotaMany(accountId, day, limit, n): Promise<QuotaResult> {
      if (n < 1 || n > limit) return { allowed: false, used: await database.usageOn(accountId, day) };
      // consumeQuota's single statement, n at a time: the row lock serialises concurrent batches.
      const row = await one(
        `INSERT INTO usage_daily (account_id, day, count) VALUES ($1, $2, $3)
         ON CONFLICT (account_id, day) DO UPDATE SET count = usage_daily.count + EXCLUDED.count
         WHERE usage_daily.count + EXCLUDED.count <= $4
         RETURNING count`,
        [accountId, day, n, limit],
      );
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await database.usageOn(accountId, day) };
    },

    async insertBatch(batch, items) {
      await transaction(async (client) => {
        await client.query(
          'INSERT INTO batch_jobs (id, account_id, source, options, total, quota_day, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
          [
            batch.id,
            batch.accountId,
            batch.source,
            batch.options,
            batch.total,
            batch.quotaDay,
            batch.createdAt,
          ],
        );
        // One statement for all items: a 500-item batch is one round trip, not 500.
        await client.query(
          `INSERT INTO batch_items (batch_id, idx, name, source_url, status)
           SELECT $1, i, n, u, 'queued' FROM unnest($2::int[], $3::text[], $4::text[]) AS t (i, n, u)`,
          [batch.id, items.map((i) => i.index), items.map((i) => i.name), items.map((i) => i.sourceUrl)],
        );
      });
    },
    async findBatch(id) {
      const row = await one('SELECT * FROM batch_jobs WHERE id = $1', [id]);
      return row && toBatch(row);
    },
    async listBatchItems(batchId) {
      return (await query('SELECT * FROM batch_items WHERE batch_id = $1 ORDER BY idx', [batchId])).rows.map(
        toItem,
      );
    },
    async findBatchItem(batchId, index) {
      const row = await one('SELECT * FROM batch_items WHERE batch_id = $1 AND idx = $2', [batchId, index]);
      return row && toItem(row);
    },
    async finishBatchItem(batchId, index, outcome, now) {
      const result =
        outcome.status === 'done'
          ? await query(
              `UPDATE batch_items SET status = 'done', input_size = $3, output_size = $4, result = $5, finished_at = $6
               WHERE batch_id = $1 AND idx = $2 AND status = 'queued'`,
              [batchId, index, outcome.inputSize, outcome.outputSize, outcome.result, now],
            )
          : await query(
              `UPDATE batch_items SET status = 'failed', input_size = $3, error_code = $4, error_message = $5, finished_at = $6
               WHERE batch_id = $1 AND idx = $2 AND status = 'queued'`,
              [batchId, index, outcome.inputSize, outcome.errorCode, outcome.errorMessage, now],
            );
      return result.rowCount === 1;
    },
    async listQueuedBatchItems(limit, options = {}) {
      const after = options.after;
      const { rows } = await query(
        `SELECT i.batch_id, i.idx, b.created_at FROM batch_items i JOIN batch_jobs b ON b.id = i.batch_id
         WHERE i.status = 'queued' AND ($2::timestamptz IS NULL OR b.created_at < $2::timestamptz)
           AND ($3::timestamptz IS NULL OR (b.created_at, i.batch_id, i.idx) > ($3::timestamptz, $4::text, $5::int))
         ORDER BY b.created_at, i.batch_id, i.idx LIMIT $1`,
        [
          limit,
          options.createdBefore ?? null,
          after?.createdAt ?? null,
          after?.batchId ?? null,
          after?.index ?? null,
        ],
      );
      return rows.map((r) => ({
        batchId: String(r.batch_id),
        index: Number(r.idx),
        createdAt: iso(r.created_at),
      }));
    },
    async usageOn(accountId, day) {
      const row = await one('SELECT count FROM usage_daily WHERE account_id = $1 AND day = $2', [
        accountId,
        day,
      ]);
      return row ? Number(row.count) : 0;
    },

    async consumeVisitorQuota(visitor, day, limit): Promise<QuotaResult> {
      const usage = () => database.visitorUsageOn(visitor, day);
      if (limit < 1) return { allowed: false, used: await usage() };
      // The same single statement as consumeQuota: the row lock serialises concurrent callers.
      const row = await one(
        `INSERT INTO visitor_usage_daily (visitor, day, count) VALUES ($1, $2, 1)
         ON CONFLICT (visitor, day) DO UPDATE SET count = visitor_usage_daily.count + 1
         WHERE visitor_usage_daily.count < $3
         RETURNING count`,
        [visitor, day, limit],
      );
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await usage() };
    },
    async refundVisitorQuota(visitor, day) {
      await query(
        'UPDATE visitor_usage_daily SET count = count - 1 WHERE visitor = $1 AND day = $2 AND count > 0',
        [visitor, day],
      );
    },
    async visitorUsageOn(visitor, day) {
      const row = await one('SELECT count FROM visitor_usage_daily WHERE visitor = $1 AND day = $2', [
        visitor,
        day,
      ]);
      return row ? Number(row.count) : 0;
    },
    async pruneVisitorUsage(beforeDay) {
      await query('DELETE FROM visitor_usage_daily WHERE day < $1', [beforeDay]);
    },

    async setPasswordHash(accountId, hash, now) {
      await query(
        `INSERT INTO account_passwords (account_id, hash, updated_at) VALUES ($1, $2, $3)
         ON CONFLICT (account_id) DO UPDATE SET hash = excluded.hash, updated_at = excluded.updated_at`,
        [accountId, hash, now],
      );
    },
    async findPasswordHash(accountId) {
      const row = await one('SELECT hash FROM account_passwords WHERE account_id = $1', [accountId]);
      return row ? String(row.hash) : undefined;
    },
    async insertWebSession(session) {
      await query(
        'INSERT INTO web_sessions (id_hash, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4)',
        [session.idHash, session.accountId, session.createdAt, session.expiresAt],
      );
    },
    async findWebSession(idHash, now) {
      const row = await one(
        `SELECT s.*, a.id AS a_id, a.email AS a_email, a.plan AS a_plan, a.created_at AS a_created_at
         FROM web_sessions s JOIN accounts a ON a.id = s.account_id
         WHERE s.id_hash = $1 AND s.expires_at > $2`,
        [idHash, now],
      );
      if (!row) return undefined;
      return {
        session: {
          idHash: String(row.id_hash),
          accountId: String(row.account_id),
          createdAt: iso(row.created_at),
          expiresAt: iso(row.expires_at),
        },
        account: toAccount(row, 'a_'),
      };
    },
    async deleteWebSession(idHash) {
      await query('DELETE FROM web_sessions WHERE id_hash = $1', [idHash]);
    },
    async deleteAccountWebSessions(accountId) {
      await query('DELETE FROM web_sessions WHERE account_id = $1', [accountId]);
    },
    async pruneWebSessions(now) {
      await query('DELETE FROM web_sessions WHERE expires_at <= $1', [now]);
      await query('DELETE FROM password_reset_tokens WHERE expires_at <= $1', [now]);
    },
    async insertResetToken(hash, accountId, now, expiresAt) {
      await query(
        'INSERT INTO password_reset_tokens (hash, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4)',
        [hash, accountId, now, expiresAt],
      );
    },
    async consumeResetToken(hash, now) {
      const row = await one(
        `UPDATE password_reset_tokens SET used_at = $1
         WHERE hash = $2 AND used_at IS NULL AND expires_at > $1 RETURNING account_id`,
        [now, hash],
      );
      return row ? String(row.account_id) : undefined;
    },
    async resetTokenUsable(hash, now) {
      const row = await one(
        `SELECT 1 FROM password_reset_tokens WHERE hash = $1 AND used_at IS NULL AND expires_at > $2`,
        [hash, now],
      );
      return row !== undefined;
    },
    async takeAttempt(subject, now, rule) {
      // Typed placeholders: the statement does arithmetic on them, which PostgreSQL cannot infer.
      const types = ['text', 'bigint', 'bigint', 'integer', 'bigint', 'bigint'];
      const row = await one(
        takeAttemptSql((n) => `$${n}::${types[n - 1]}`),
        takeAttemptParams(subject, now, rule),
      );
      if (row)
        return {
          allowed: true,
          attempts: Number(row.attempts),
          blockedUntil: blockedUntilIso(row.blocked_until_ms),
        };
      const current = await one(
        'SELECT attempts, blocked_until_ms FROM throttle_attempts WHERE subject = $1',
        [subject],
      );
      return {
        allowed: false,
        attempts: Number(current?.attempts ?? 0),
        blockedUntil: blockedUntilIso(current?.blocked_until_ms),
      };
    },
    async refundAttempt(subject, free) {
      await query(
        REFUND_ATTEMPT_SQL((n) => (n === 1 ? '$1::text' : `$${n}::integer`)),
        [subject, Math.trunc(free)],
      );
    },
    async clearAttempts(subject) {
      await query('DELETE FROM throttle_attempts WHERE subject = $1', [subject]);
    },
    async rememberLoginNetwork(subject, now) {
      await query(
        `INSERT INTO login_networks (subject, last_success_at) VALUES ($1, $2)
         ON CONFLICT (subject) DO UPDATE SET
           last_success_at = GREATEST(login_networks.last_success_at, excluded.last_success_at)`,
        [subject, now],
      );
    },
    async knownLoginNetwork(subject, since) {
      return (
        (await one('SELECT 1 FROM login_networks WHERE subject = $1 AND last_success_at >= $2', [
          subject,
          since,
        ])) !== undefined
      );
    },
    async webSecret(name, candidate) {
      await query('INSERT INTO web_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
        name,
        candidate,
      ]);
      return String((await one('SELECT value FROM web_secrets WHERE name = $1', [name]))?.value);
    },
  };
  return database;
}
