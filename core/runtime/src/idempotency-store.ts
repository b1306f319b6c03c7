import { randomBytes } from 'node:crypto';
import type { PostgresConnection } from './postgres/connection.ts';
import type { SqliteConnection } from './sqlite/connection.ts';

/**
 * The idempotency store: the first answer to each `Idempotency-Key`, so a retried POST gets that
 * answer back instead of doing the work (and spending the quota) again. A narrow store of the
 * `Database` (`db.idempotency`), on its connection — the SQLite file's one connection, the PostgreSQL
 * pool — with its table made by the core migrations (version 6 on both backends).
 *
 * Exactness rests on one statement: `claim` is a single INSERT … ON CONFLICT DO UPDATE … WHERE
 * (the row is expired, or its owner's lease ran out) RETURNING token. Of any number of concurrent
 * claims of one key, in one process or many, exactly one gets its own token back; the others read
 * the row the winner wrote. `complete` and `release` are conditional on that token, so an owner whose
 * lease was taken over can no longer write.
 */
export interface IdempotencyStore {
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /** Records the answer; false when the claim was lost meanwhile (lease taken over). */
  complete(scope: string, key: string, token: string, answer: StoredAnswer): Promise<boolean>;
  /** Gives the key up (the work failed on our side): the next request with it runs afresh. */
  release(scope: string, key: string, token: string): Promise<void>;
  find(scope: string, key: string): Promise<IdempotencyRecord | undefined>;
  /**
   * Deletes records created at or before `beforeMs` (at most `limit` of them) and returns the blob
   * keys their answers were kept under, for the caller to delete from the blob store.
   */
  purge(beforeMs: number, limit?: number): Promise<{ deleted: number; bodyKeys: string[] }>;
}

export interface ClaimRequest {
  /** Whose keys these are (an API key id): the same key string from two callers never collides. */
  scope: string;
  key: string;
  /** A hash of the request (route, fields, file bytes): the same key with another request is refused. */
  fingerprint: string;
  nowMs: number;
  /** How long the claim holds without an answer before another request may take it over. */
  leaseMs: number;
  /** How long a record answers at all (24 h): an older one is replaced as if absent. */
  ttlMs: number;
}

export type ClaimResult = { claimed: true; token: string } | { claimed: false; record: IdempotencyRecord };

/** The first answer, as it is replayed: status, the headers that describe it, and its body. */
export interface StoredAnswer {
  status: number;
  headers: Record<string, string>;
  /** The body, when kept in the row; null when it is in the blob store under `bodyKey`. */
  body: Uint8Array | null;
  bodyKey: string | null;
}

export interface IdempotencyRecord {
  scope: string;
  key: string;
  fingerprint: string;
  state: 'running' | 'done';
  createdAtMs: number;
  lockedUntilMs: number;
  /** Present once `state` is `done`. */
  answer: StoredAnswer | undefined;
}

/**
 * The table, as core migration 6 creates it on each backend. `IF NOT EXISTS`: a database where the
 * store ran as a port of its own (its own `idempotency_migrations` table, left in place) already has
 * exactly this table, and the migration adopts it with its rows.
 */
export const IDEMPOTENCY_TABLE_SQL = {
  sqlite: `
    CREATE TABLE IF NOT EXISTS idempotency_keys (
      scope TEXT NOT NULL,
      idem_key TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      token TEXT NOT NULL,
      state TEXT NOT NULL,
      created_ms INTEGER NOT NULL,
      locked_until_ms INTEGER NOT NULL,
      status INTEGER,
      headers TEXT,
      body BLOB,
      body_key TEXT,
      PRIMARY KEY (scope, idem_key)
    );
    CREATE INDEX IF NOT EXISTS idempotency_keys_created ON idempotency_keys (created_ms);
  `,
  postgres: `
    CREATE TABLE IF NOT EXISTS idempotency_keys (
      scope text NOT NULL,
      idem_key text NOT NULL,
      fingerprint text NOT NULL,
      token text NOT NULL,
      state text NOT NULL,
      created_ms bigint NOT NULL,
      locked_until_ms bigint NOT NULL,
      status integer,
      headers text,
      body bytea,
      body_key text,
      PRIMARY KEY (scope, idem_key)
    );
    CREATE INDEX IF NOT EXISTS idempotency_keys_created ON idempotency_keys (created_ms);
  `,
} as const;

/**
 * One statement for both dialects (SQLite ≥ 3.35 and PostgreSQL both take UPSERT … WHERE and
 * RETURNING); only the placeholders differ. Parameters: scope, key, fingerprint, token, now,
 * lockedUntil, expiredBefore.
 */
const CLAIM_SQL = `
  INSERT INTO idempotency_keys (scope, idem_key, fingerprint, token, state, created_ms, locked_until_ms)
  VALUES ($1, $2, $3, $4, 'running', $5, $6)
  ON CONFLICT (scope, idem_key) DO UPDATE SET
    fingerprint = excluded.fingerprint, token = excluded.token, state = 'running',
    created_ms = excluded.created_ms, locked_until_ms = excluded.locked_until_ms,
    status = NULL, headers = NULL, body = NULL, body_key = NULL
  WHERE idempotency_keys.created_ms <= $7
     OR (idempotency_keys.state = 'running' AND idempotency_keys.locked_until_ms <= $5)
  RETURNING token`;

const COMPLETE_SQL = `
  UPDATE idempotency_keys SET state = 'done', status = $4, headers = $5, body = $6, body_key = $7
  WHERE scope = $1 AND idem_key = $2 AND token = $3 AND state = 'running'`;

const RELEASE_SQL = 'DELETE FROM idempotency_keys WHERE scope = $1 AND idem_key = $2 AND token = $3';

const FIND_SQL = 'SELECT * FROM idempotency_keys WHERE scope = $1 AND idem_key = $2';

const newToken = () => randomBytes(12).toString('base64url');

type Row = Record<string, unknown>;

function recordOf(row: Row): IdempotencyRecord {
  const state = String(row.state) === 'done' ? 'done' : 'running';
  const body = row.body == null ? null : new Uint8Array(row.body as Uint8Array);
  return {
    scope: String(row.scope),
    key: String(row.idem_key),
    fingerprint: String(row.fingerprint),
    state,
    createdAtMs: Number(row.created_ms),
    lockedUntilMs: Number(row.locked_until_ms),
    answer:
      state === 'done'
        ? {
            status: Number(row.status),
            headers: JSON.parse(String(row.headers ?? '{}')) as Record<string, string>,
            body,
            bodyKey: row.body_key == null ? null : String(row.body_key),
          }
        : undefined,
  };
}

/** A claim whose row vanished between the UPSERT and the read (released meanwhile) is tried again. */
const CLAIM_TRIES = 5;

/** How the store runs one statement (`$n` placeholders) on its backend. */
type Run = (sql: string, params: unknown[]) => Promise<{ rows: Row[]; changes: number }>;

function storeOver(run: Run): IdempotencyStore {
  const dialect = { run };
  return {
    async claim(request) {
      const token = newToken();
      for (let attempt = 0; attempt < CLAIM_TRIES; attempt++) {
        const { rows } = await dialect.run(CLAIM_SQL, [
          request.scope,
          request.key,
          request.fingerprint,
          token,
          request.nowMs,
          request.nowMs + request.leaseMs,
          request.nowMs - request.ttlMs,
        ]);
        if (rows[0] && String(rows[0].token) === token) return { claimed: true, token };
        const found = await dialect.run(FIND_SQL, [request.scope, request.key]);
        if (found.rows[0]) return { claimed: false, record: recordOf(found.rows[0]) };
      }
      throw new Error(
        `idempotency key ${request.key} kept changing hands; gave up after ${CLAIM_TRIES} tries`,
      );
    },
    async complete(scope, key, token, answer) {
      const { changes } = await dialect.run(COMPLETE_SQL, [
        scope,
        key,
        token,
        answer.status,
        JSON.stringify(answer.headers),
        // node-postgres sends a Buffer as bytea; node:sqlite takes either.
        answer.body ? Buffer.from(answer.body.buffer, answer.body.byteOffset, answer.body.byteLength) : null,
        answer.bodyKey,
      ]);
      return changes === 1;
    },
    async release(scope, key, token) {
      await dialect.run(RELEASE_SQL, [scope, key, token]);
    },
    async find(scope, key) {
      const { rows } = await dialect.run(FIND_SQL, [scope, key]);
      return rows[0] ? recordOf(rows[0]) : undefined;
    },
    async purge(beforeMs, limit = 1000) {
      const { rows } = await dialect.run(
        `DELETE FROM idempotency_keys WHERE (scope, idem_key) IN
           (SELECT scope, idem_key FROM idempotency_keys WHERE created_ms <= $1 LIMIT $2)
         RETURNING body_key`,
        [beforeMs, limit],
      );
      return {
        deleted: rows.length,
        bodyKeys: rows.map((r) => r.body_key).filter((k): k is string => typeof k === 'string'),
      };
    },
  };
}

/**
 * On the SQLite database's own connection: each statement a point write on the primary key, run
 * synchronously (node:sqlite); WAL and the busy timeout make another process's writes wait, not fail.
 */
export function sqliteIdempotencyStore(conn: SqliteConnection): IdempotencyStore {
  const numbered = new Map<string, string>();
  return storeOver(async (sql, params) => {
    let text = numbered.get(sql);
    if (text === undefined) {
      text = sql.replace(/\$(\d+)/g, '?$1');
      numbered.set(sql, text);
    }
    const statement = conn.stmt(text);
    const values = params as (string | number | null | Uint8Array)[];
    if (/RETURNING|^\s*SELECT/i.test(sql)) {
      const rows = statement.all(...values) as Row[];
      return { rows, changes: rows.length };
    }
    return { rows: [], changes: Number(statement.run(...values).changes) };
  });
}

/** On the PostgreSQL database's pool (its schema, its statement timeout, its unavailable mapping). */
export function postgresIdempotencyStore(conn: PostgresConnection): IdempotencyStore {
  return storeOver(async (sql, params) => {
    const result = await conn.query(sql, params);
    return { rows: result.rows, changes: result.rowCount ?? 0 };
  });
}
