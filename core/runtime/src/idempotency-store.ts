import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

/**
 * The idempotency store: the first answer to each `Idempotency-Key`, so a retried POST gets that
 * answer back instead of doing the work (and spending the quota) again. A port of its own, beside
 * the `Database` rather than inside it: it owns its one table and its own migrations on both
 * backends (`sqliteIdempotencyStore()` on the same file as the database, through its own connection;
 * `postgresIdempotencyStore()` in the same schema, through its own small pool).
 *
 * Exactness rests on one statement: `claim` is a single INSERT … ON CONFLICT DO UPDATE … WHERE
 * (the row is expired, or its owner's lease ran out) RETURNING token. Of any number of concurrent
 * claims of one key, in one process or many, exactly one gets its own token back; the others read
 * the row the winner wrote. `complete` and `release` are conditional on that token, so an owner whose
 * lease was taken over can no longer write.
 */
export interface IdempotencyStore {
  readonly kind: 'sqlite' | 'postgres';
  /** Creates the table (its own versioned migrations, under a lock on PostgreSQL). */
  migrate(): Promise<void>;
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
  close(): Promise<void>;
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

/** Never edit a shipped entry: add the next version (as the database's migrations). */
const MIGRATIONS: { version: number; sqlite: string; postgres: string }[] = [
  {
    version: 1,
    sqlite: `
      CREATE TABLE idempotency_keys (
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
      CREATE INDEX idempotency_keys_created ON idempotency_keys (created_ms);
    `,
    postgres: `
      CREATE TABLE idempotency_keys (
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
      CREATE INDEX idempotency_keys_created ON idempotency_keys (created_ms);
    `,
  },
];

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

interface Dialect {
  kind: IdempotencyStore['kind'];
  run(sql: string, params: unknown[]): Promise<{ rows: Row[]; changes: number }>;
  migrate(): Promise<void>;
  close(): Promise<void>;
}

function storeOver(dialect: Dialect): IdempotencyStore {
  return {
    kind: dialect.kind,
    migrate: () => dialect.migrate(),
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
    close: () => dialect.close(),
  };
}

export interface SqliteIdempotencyOptions {
  /** The database file (the one `sqliteDatabase()` uses); ':memory:' for a throwaway store. */
  path?: string;
  dataDir?: string;
  busyTimeoutMs?: number;
}

/**
 * On the embedded SQLite file, through a connection of its own: WAL and the busy timeout make its
 * writes wait for the database's (and another process's) rather than fail. Statements run
 * synchronously (node:sqlite), each a point write on the primary key.
 */
export function sqliteIdempotencyStore(options: SqliteIdempotencyOptions = {}): IdempotencyStore {
  const path = options.path ?? join(options.dataDir ?? './.compresso-data', 'compresso.sqlite');
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path);
  db.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
  if (path !== ':memory:') db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  const cache = new Map<string, ReturnType<DatabaseSync['prepare']>>();
  let open = true;
  return storeOver({
    kind: 'sqlite',
    async run(sql, params) {
      let statement = cache.get(sql);
      if (!statement) {
        statement = db.prepare(sql.replace(/\$(\d+)/g, '?$1'));
        cache.set(sql, statement);
      }
      const values = params as (string | number | null | Uint8Array)[];
      if (/RETURNING|^\s*SELECT/i.test(sql)) {
        const rows = statement.all(...values) as Row[];
        return { rows, changes: rows.length };
      }
      const result = statement.run(...values);
      return { rows: [], changes: Number(result.changes) };
    },
    async migrate() {
      db.exec('BEGIN IMMEDIATE');
      try {
        db.exec('CREATE TABLE IF NOT EXISTS idempotency_migrations (version INTEGER PRIMARY KEY)');
        const done = new Set(
          (db.prepare('SELECT version FROM idempotency_migrations').all() as Row[]).map((r) =>
            Number(r.version),
          ),
        );
        for (const migration of MIGRATIONS) {
          if (done.has(migration.version)) continue;
          db.exec(migration.sqlite);
          db.prepare('INSERT INTO idempotency_migrations (version) VALUES (?)').run(migration.version);
        }
        db.exec('COMMIT');
      } catch (error) {
        db.exec('ROLLBACK');
        throw error;
      }
    },
    async close() {
      if (!open) return;
      open = false;
      cache.clear();
      db.close();
    },
  });
}

export interface PostgresIdempotencyOptions {
  url: string;
  /** The schema the database's tables are in (default `public`). */
  schema?: string;
  /** Connections of its own (default 4): a claim and an answer per idempotent request. */
  poolSize?: number;
  connectTimeoutMs?: number;
}

/** Names "Compresso idempotency migrations" among the advisory locks of a shared database. */
const MIGRATION_LOCK = 0x636d7031;

/** On PostgreSQL, in the database's schema, through a small pool of its own. */
export async function postgresIdempotencyStore(
  options: PostgresIdempotencyOptions,
): Promise<IdempotencyStore> {
  const { default: pg } = await import('pg');
  const schema = options.schema ?? 'public';
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new Error(
      `PostgreSQL schema: expected letters, digits and _ (at most 63), received ${JSON.stringify(schema)}`,
    );
  }
  const { CompressoError } = await import('@compresso/schema');
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 4,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
    options: `-c search_path="${schema}" -c statement_timeout=10000`,
  });
  pool.on('error', () => {});
  const unavailable = (error: unknown) => {
    const e = error as { code?: unknown; message?: unknown };
    const code = typeof e?.code === 'string' ? e.code : '';
    const down =
      code.startsWith('08') ||
      ['57P01', '57P02', '57P03', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE'].includes(code) ||
      /Connection terminated|timeout exceeded when trying to connect|Connection ended/i.test(
        String(e?.message),
      );
    return down
      ? new CompressoError('SERVICE_UNAVAILABLE', 'The database is unavailable; retry in a few seconds.', {
          cause: error,
        })
      : error;
  };
  let closed: Promise<void> | undefined;
  return storeOver({
    kind: 'postgres',
    async run(sql, params) {
      try {
        const result = await pool.query<Row>(sql, params);
        return { rows: result.rows, changes: result.rowCount ?? 0 };
      } catch (error) {
        throw unavailable(error);
      }
    },
    async migrate() {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query('SET LOCAL statement_timeout = 0');
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
        await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
        await client.query(
          'CREATE TABLE IF NOT EXISTS idempotency_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL)',
        );
        const done = new Set(
          (await client.query<Row>('SELECT version FROM idempotency_migrations')).rows.map((r) =>
            Number(r.version),
          ),
        );
        for (const migration of MIGRATIONS) {
          if (done.has(migration.version)) continue;
          await client.query(migration.postgres);
          await client.query('INSERT INTO idempotency_migrations (version, applied_at) VALUES ($1, now())', [
            migration.version,
          ]);
        }
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw unavailable(error);
      } finally {
        client.release();
      }
    },
    close() {
      closed ??= pool.end();
      return closed;
    },
  });
}

/**
 * The store the configuration asks for, migrated: PostgreSQL with DATABASE_URL, else the embedded
 * SQLite file — the same place `openDatabase` chooses.
 */
export async function openIdempotencyStore(
  config: { dataDir: string; databaseUrl?: string | undefined },
  options: { schema?: string } = {},
): Promise<IdempotencyStore> {
  const store = config.databaseUrl
    ? await postgresIdempotencyStore({
        url: config.databaseUrl,
        ...(options.schema ? { schema: options.schema } : {}),
      })
    : sqliteIdempotencyStore({ dataDir: config.dataDir });
  try {
    await store.migrate();
  } catch (error) {
    await store.close().catch(() => {});
    throw error;
  }
  return store;
}
