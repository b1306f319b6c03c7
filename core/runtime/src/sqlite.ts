import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
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

export interface SqliteOptions {
  /** Database file; ':memory:' for a throwaway database. Default `<dataDir>/compresso.sqlite`. */
  path?: string;
  dataDir?: string;
  /** How long a write waits for another connection's lock, in ms. */
  busyTimeoutMs?: number;
}

/**
 * Versioned migrations, applied in order at start inside one transaction each. Never edit a shipped
 * entry: add the next version.
 */
const MIGRATIONS: { version: number; sql: string }[] = [
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
];

type Row = Record<string, SQLInputValue>;

function toAccount(row: Row): Account {
  return {
    id: String(row.id),
    email: String(row.email),
    plan: String(row.plan) as PlanId,
    createdAt: String(row.created_at),
  };
}

function toKey(row: Row): ApiKeyRecord {
  return {
    id: String(row.id),
    accountId: String(row.account_id),
    name: String(row.name),
    prefix: String(row.prefix),
    hash: String(row.hash),
    createdAt: String(row.created_at),
    lastUsedAt: row.last_used_at == null ? null : String(row.last_used_at),
    revokedAt: row.revoked_at == null ? null : String(row.revoked_at),
  };
}

function toPromo(row: Row): PromoCode {
  return {
    code: String(row.code),
    plan: String(row.plan) as PlanId,
    maxUses: Number(row.max_uses),
    uses: Number(row.uses),
    expiresAt: row.expires_at == null ? null : String(row.expires_at),
    createdAt: String(row.created_at),
  };
}

function isUniqueViolation(error: unknown): boolean {
  return error instanceof Error && /UNIQUE constraint failed/i.test(error.message);
}

/**
 * The embedded default: one SQLite file through Node's built-in node:sqlite. DatabaseSync blocks the
 * event loop for the length of each statement, so every query here is a point lookup or a one-row
 * write on an indexed key (microseconds); nothing scans. WAL lets readers proceed during a write and
 * makes a commit one append; the busy timeout lets a second process (the CLI beside a running server)
 * wait for the lock instead of failing.
 */
export function sqliteDatabase(options: SqliteOptions = {}): Database {
  const path = options.path ?? join(options.dataDir ?? './.compresso-data', 'compresso.sqlite');
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path);
  db.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
  if (path !== ':memory:') db.exec('PRAGMA journal_mode = WAL');
  // NORMAL under WAL: a commit survives a process crash; only an OS crash can lose the last
  // commits, which for counters and keys is an acceptable trade for not fsyncing every request.
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA foreign_keys = ON');

  const cache = new Map<string, ReturnType<DatabaseSync['prepare']>>();
  const stmt = (sql: string) => {
    let s = cache.get(sql);
    if (!s) {
      s = db.prepare(sql);
      cache.set(sql, s);
    }
    return s;
  };
  const transaction = <T>(work: () => T): T => {
    // IMMEDIATE takes the write lock up front, so two processes cannot both read and then both write.
    db.exec('BEGIN IMMEDIATE');
    try {
      const result = work();
      db.exec('COMMIT');
      return result;
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
  };
  let open = true;

  const toBatch = (row: Row): BatchRecord => ({
    id: String(row.id),
    accountId: String(row.account_id),
    source: String(row.source) as BatchRecord['source'],
    options: String(row.options),
    total: Number(row.total),
    quotaDay: String(row.quota_day),
    createdAt: String(row.created_at),
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
    finishedAt: strOrNull(row.finished_at),
  });

  const database: Database = {
    kind: 'sqlite',
    async migrate() {
      db.exec(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)',
      );
      for (const migration of MIGRATIONS) {
        transaction(() => {
          const done = stmt('SELECT 1 AS done FROM schema_migrations WHERE version = ?').get(
            migration.version,
          );
          if (done) return;
          db.exec(migration.sql);
          stmt('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(
            migration.version,
            new Date().toISOString(),
          );
        });
      }
    },
    async ping() {
      stmt('SELECT 1').get();
    },
    async close() {
      if (!open) return;
      open = false;
      cache.clear();
      db.close();
    },

    async countAccounts() {
      return Number((stmt('SELECT count(*) AS n FROM accounts').get() as Row).n);
    },
    async insertAccount(account) {
      try {
        stmt('INSERT INTO accounts (id, email, plan, created_at) VALUES (?, ?, ?, ?)').run(
          account.id,
          account.email,
          account.plan,
          account.createdAt,
        );
      } catch (error) {
        if (isUniqueViolation(error))
          throw new DuplicateError(`an account with email ${account.email} exists`);
        throw error;
      }
    },
    async findAccountById(id) {
      const row = stmt('SELECT * FROM accounts WHERE id = ?').get(id) as Row | undefined;
      return row && toAccount(row);
    },
    async findAccountByEmail(email) {
      const row = stmt('SELECT * FROM accounts WHERE lower(email) = lower(?)').get(email) as Row | undefined;
      return row && toAccount(row);
    },
    async setAccountPlan(accountId, plan) {
      stmt('UPDATE accounts SET plan = ? WHERE id = ?').run(plan, accountId);
    },

    async insertPromo(promo) {
      try {
        stmt(
          'INSERT INTO promo_codes (code, plan, max_uses, uses, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)',
        ).run(promo.code, promo.plan, promo.maxUses, promo.uses, promo.expiresAt, promo.createdAt);
      } catch (error) {
        if (isUniqueViolation(error)) throw new DuplicateError(`promo code ${promo.code} exists`);
        throw error;
      }
    },
    async findPromo(code) {
      const row = stmt('SELECT * FROM promo_codes WHERE code = ?').get(code) as Row | undefined;
      return row && toPromo(row);
    },
    async redeemPromo(code, accountId, now): Promise<RedeemOutcome> {
      return transaction((): RedeemOutcome => {
        const promoRow = stmt('SELECT * FROM promo_codes WHERE code = ?').get(code) as Row | undefined;
        if (!promoRow) return { ok: false, reason: 'unknown_code' };
        const accountRow = stmt('SELECT * FROM accounts WHERE id = ?').get(accountId) as Row | undefined;
        if (!accountRow) return { ok: false, reason: 'unknown_account' };
        const promo = toPromo(promoRow);
        if (promo.expiresAt !== null && promo.expiresAt <= now) return { ok: false, reason: 'expired' };
        if (
          stmt('SELECT 1 AS x FROM promo_redemptions WHERE code = ? AND account_id = ?').get(code, accountId)
        ) {
          return { ok: false, reason: 'already_redeemed' };
        }
        const counted = stmt(
          'UPDATE promo_codes SET uses = uses + 1 WHERE code = ? AND uses < max_uses RETURNING uses',
        ).get(code) as Row | undefined;
        if (!counted) return { ok: false, reason: 'used_up' };
        stmt('INSERT INTO promo_redemptions (code, account_id, redeemed_at) VALUES (?, ?, ?)').run(
          code,
          accountId,
          now,
        );
        stmt('UPDATE accounts SET plan = ? WHERE id = ?').run(promo.plan, accountId);
        return {
          ok: true,
          account: { ...toAccount(accountRow), plan: promo.plan },
          promo: { ...promo, uses: Number(counted.uses) },
        };
      });
    },

    async insertApiKey(key) {
      stmt(
        'INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, last_used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      ).run(
        key.id,
        key.accountId,
        key.name,
        key.prefix,
        key.hash,
        key.createdAt,
        key.lastUsedAt,
        key.revokedAt,
      );
    },
    async findActiveKeyByHash(hash) {
      const row = stmt(
        `SELECT k.*, a.email AS a_email, a.plan AS a_plan, a.created_at AS a_created_at
         FROM api_keys k JOIN accounts a ON a.id = k.account_id
         WHERE k.hash = ? AND k.revoked_at IS NULL`,
      ).get(hash) as Row | undefined;
      if (!row) return undefined;
      return {
        key: toKey(row),
        account: toAccount({
          id: row.account_id ?? null,
          email: row.a_email ?? null,
          plan: row.a_plan ?? null,
          created_at: row.a_created_at ?? null,
        }),
      };
    },
    async listApiKeys(accountId) {
      const rows = stmt('SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at, id').all(
        accountId,
      ) as Row[];
      return rows.map(toKey);
    },
    async findApiKey(id) {
      const row = stmt('SELECT * FROM api_keys WHERE id = ?').get(id) as Row | undefined;
      return row && toKey(row);
    },
    async revokeApiKey(id, now, accountId) {
      const result =
        accountId === undefined
          ? stmt('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(now, id)
          : stmt(
              'UPDATE api_keys SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL',
            ).run(now, id, accountId);
      return Number(result.changes) === 1;
    },
    async touchApiKey(id, now, staleBefore) {
      stmt(
        'UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)',
      ).run(now, id, staleBefore);
    },

    async consumeQuota(accountId, day, limit): Promise<QuotaResult> {
      if (limit < 1) return { allowed: false, used: await database.usageOn(accountId, day) };
      const row = stmt(
        `INSERT INTO usage_daily (account_id, day, count) VALUES (?, ?, 1)
         ON CONFLICT (account_id, day) DO UPDATE SET count = count + 1 WHERE count < ?
         RETURNING count`,
      ).get(accountId, day, limit) as Row | undefined;
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await database.usageOn(accountId, day) };
    },
    async refundQuota(accountId, day, n = 1) {
      stmt(
        'UPDATE usage_daily SET count = max(0, count - ?) WHERE account_id = ? AND day = ? AND count > 0',
      ).run(n, accountId, day);
    },
    async consumeQuotaMany(accountId, day, limit, n): Promise<QuotaResult> {
      if (n < 1 || n > limit) return { allowed: false, used: await database.usageOn(accountId, day) };
      // The insert's SELECT … WHERE keeps a first batch larger than the limit out too.
      const row = stmt(
        `INSERT INTO usage_daily (account_id, day, count) SELECT ?, ?, ? WHERE ? <= ?
         ON CONFLICT (account_id, day) DO UPDATE SET count = count + excluded.count WHERE count + excluded.count <= ?
         RETURNING count`,
      ).get(accountId, day, n, n, limit, limit) as Row | undefined;
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await database.usageOn(accountId, day) };
    },

    async insertBatch(batch, items) {
      transaction(() => {
        stmt(
          'INSERT INTO batch_jobs (id, account_id, source, options, total, quota_day, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        ).run(
          batch.id,
          batch.accountId,
          batch.source,
          batch.options,
          batch.total,
          batch.quotaDay,
          batch.createdAt,
        );
        const insert = stmt(
          "INSERT INTO batch_items (batch_id, idx, name, source_url, status) VALUES (?, ?, ?, ?, 'queued')",
        );
        for (const item of items) insert.run(batch.id, item.index, item.name, item.sourceUrl);
      });
    },
    async findBatch(id) {
      const row = stmt('SELECT * FROM batch_jobs WHERE id = ?').get(id) as Row | undefined;
      return row && toBatch(row);
    },
    async listBatchItems(batchId) {
      return (stmt('SELECT * FROM batch_items WHERE batch_id = ? ORDER BY idx').all(batchId) as Row[]).map(
        toItem,
      );
    },
    async findBatchItem(batchId, index) {
      const row = stmt('SELECT * FROM batch_items WHERE batch_id = ? AND idx = ?').get(batchId, index) as
        | Row
        | undefined;
      return row && toItem(row);
    },
    async finishBatchItem(batchId, index, outcome, now) {
      const result =
        outcome.status === 'done'
          ? stmt(
              `UPDATE batch_items SET status = 'done', input_size = ?, output_size = ?, result = ?, finished_at = ?
               WHERE batch_id = ? AND idx = ? AND status = 'queued'`,
            ).run(outcome.inputSize, outcome.outputSize, outcome.result, now, batchId, index)
          : stmt(
              `UPDATE batch_items SET status = 'failed', input_size = ?, error_code = ?, error_message = ?, finished_at = ?
               WHERE batch_id = ? AND idx = ? AND status = 'queued'`,
            ).run(outcome.inputSize, outcome.errorCode, outcome.errorMessage, now, batchId, index);
      return Number(result.changes) === 1;
    },
    async listQueuedBatchItems(limit, options = {}) {
      // Times are ISO 8601 strings in UTC (toISOString), so text order is time order; the row value
      // comparison is the keyset for the next page.
      const after = options.after;
      const rows = stmt(
        `SELECT i.batch_id, i.idx, b.created_at FROM batch_items i JOIN batch_jobs b ON b.id = i.batch_id
         WHERE i.status = 'queued' AND (? IS NULL OR b.created_at < ?)
           AND (? IS NULL OR (b.created_at, i.batch_id, i.idx) > (?, ?, ?))
         ORDER BY b.created_at, i.batch_id, i.idx LIMIT ?`,
      ).all(
        options.createdBefore ?? null,
        options.createdBefore ?? null,
        after ? 1 : null,
        after?.createdAt ?? null,
        after?.batchId ?? null,
        after?.index ?? null,
        limit,
      ) as Row[];
      return rows.map((r) => ({
        batchId: String(r.batch_id),
        index: Number(r.idx),
        createdAt: String(r.created_at),
      }));
    },
    async usageOn(accountId, day) {
      const row = stmt('SELECT count FROM usage_daily WHERE account_id = ? AND day = ?').get(
        accountId,
        day,
      ) as Row | undefined;
      return row ? Number(row.count) : 0;
    },

    async consumeVisitorQuota(visitor, day, limit): Promise<QuotaResult> {
      const usage = () => database.visitorUsageOn(visitor, day);
      if (limit < 1) return { allowed: false, used: await usage() };
      const row = stmt(
        `INSERT INTO visitor_usage_daily (visitor, day, count) VALUES (?, ?, 1)
         ON CONFLICT (visitor, day) DO UPDATE SET count = count + 1 WHERE count < ?
         RETURNING count`,
      ).get(visitor, day, limit) as Row | undefined;
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await usage() };
    },
    async visitorUsageOn(visitor, day) {
      const row = stmt('SELECT count FROM visitor_usage_daily WHERE visitor = ? AND day = ?').get(
        visitor,
        day,
      ) as Row | undefined;
      return row ? Number(row.count) : 0;
    },
    async refundVisitorQuota(visitor, day) {
      stmt(
        'UPDATE visitor_usage_daily SET count = count - 1 WHERE visitor = ? AND day = ? AND count > 0',
      ).run(visitor, day);
    },
    async pruneVisitorUsage(beforeDay) {
      stmt('DELETE FROM visitor_usage_daily WHERE day < ?').run(beforeDay);
    },

    async setPasswordHash(accountId, hash, now) {
      stmt(
        `INSERT INTO account_passwords (account_id, hash, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (account_id) DO UPDATE SET hash = excluded.hash, updated_at = excluded.updated_at`,
      ).run(accountId, hash, now);
    },
    async findPasswordHash(accountId) {
      const row = stmt('SELECT hash FROM account_passwords WHERE account_id = ?').get(accountId) as
        | Row
        | undefined;
      return row ? String(row.hash) : undefined;
    },
    async insertWebSession(session) {
      stmt('INSERT INTO web_sessions (id_hash, account_id, created_at, expires_at) VALUES (?, ?, ?, ?)').run(
        session.idHash,
        session.accountId,
        session.createdAt,
        session.expiresAt,
      );
    },
    async findWebSession(idHash, now) {
      const row = stmt(
        `SELECT s.*, a.email AS a_email, a.plan AS a_plan, a.created_at AS a_created_at
         FROM web_sessions s JOIN accounts a ON a.id = s.account_id
         WHERE s.id_hash = ? AND s.expires_at > ?`,
      ).get(idHash, now) as Row | undefined;
      if (!row) return undefined;
      return {
        session: {
          idHash: String(row.id_hash),
          accountId: String(row.account_id),
          createdAt: String(row.created_at),
          expiresAt: String(row.expires_at),
        },
        account: toAccount({
          id: row.account_id ?? null,
          email: row.a_email ?? null,
          plan: row.a_plan ?? null,
          created_at: row.a_created_at ?? null,
        }),
      };
    },
    async deleteWebSession(idHash) {
      stmt('DELETE FROM web_sessions WHERE id_hash = ?').run(idHash);
    },
    async deleteAccountWebSessions(accountId) {
      stmt('DELETE FROM web_sessions WHERE account_id = ?').run(accountId);
    },
    async pruneWebSessions(now) {
      stmt('DELETE FROM web_sessions WHERE expires_at <= ?').run(now);
      stmt('DELETE FROM password_reset_tokens WHERE expires_at <= ?').run(now);
    },
    async insertResetToken(hash, accountId, now, expiresAt) {
      stmt(
        'INSERT INTO password_reset_tokens (hash, account_id, created_at, expires_at) VALUES (?, ?, ?, ?)',
      ).run(hash, accountId, now, expiresAt);
    },
    async consumeResetToken(hash, now) {
      const row = stmt(
        `UPDATE password_reset_tokens SET used_at = ?
         WHERE hash = ? AND used_at IS NULL AND expires_at > ? RETURNING account_id`,
      ).get(now, hash, now) as Row | undefined;
      return row ? String(row.account_id) : undefined;
    },
    async resetTokenUsable(hash, now) {
      return (
        stmt(`SELECT 1 FROM password_reset_tokens WHERE hash = ? AND used_at IS NULL AND expires_at > ?`).get(
          hash,
          now,
        ) !== undefined
      );
    },
    async takeAttempt(subject, now, rule) {
      const params = takeAttemptParams(subject, now, rule);
      const row = stmt(takeAttemptSql((n) => `?${n}`)).get(...params) as Row | undefined;
      if (row)
        return {
          allowed: true,
          attempts: Number(row.attempts),
          blockedUntil: blockedUntilIso(row.blocked_until_ms),
        };
      const current = stmt('SELECT attempts, blocked_until_ms FROM throttle_attempts WHERE subject = ?').get(
        subject,
      ) as Row | undefined;
      return {
        allowed: false,
        attempts: Number(current?.attempts ?? 0),
        blockedUntil: blockedUntilIso(current?.blocked_until_ms),
      };
    },
    async refundAttempt(subject, free) {
      stmt(REFUND_ATTEMPT_SQL((n) => `?${n}`)).run(subject, Math.trunc(free));
    },
    async clearAttempts(subject) {
      stmt('DELETE FROM throttle_attempts WHERE subject = ?').run(subject);
    },
    async rememberLoginNetwork(subject, now) {
      stmt(
        `INSERT INTO login_networks (subject, last_success_at) VALUES (?, ?)
         ON CONFLICT (subject) DO UPDATE SET last_success_at = max(last_success_at, excluded.last_success_at)`,
      ).run(subject, now);
    },
    async knownLoginNetwork(subject, since) {
      return (
        stmt('SELECT 1 FROM login_networks WHERE subject = ? AND last_success_at >= ?').get(
          subject,
          since,
        ) !== undefined
      );
    },
    async webSecret(name, candidate) {
      stmt('INSERT INTO web_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING').run(
        name,
        candidate,
      );
      return String((stmt('SELECT value FROM web_secrets WHERE name = ?').get(name) as Row).value);
    },
  };
  return database;
}
