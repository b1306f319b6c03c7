import { CompressoError } from '@compresso/schema';
import pg from 'pg';
import type { Account, PlanId, PostgresSql } from '../database.ts';

export type Row = Record<string, unknown>;

/** The pool every PostgreSQL store of a Database shares, and the helpers they query through. */
export interface PostgresConnection {
  pool: pg.Pool;
  schema: string;
  quotedSchema: string;
  query(sql: string, params?: unknown[]): Promise<pg.QueryResult<Row>>;
  /** The first row, or undefined. */
  one(sql: string, params?: unknown[]): Promise<Row | undefined>;
  /** BEGIN … COMMIT on one pooled connection; ROLLBACK on a throw; a broken connection is discarded. */
  transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T>;
  /** The same pool as the narrow PostgresSql handle integrations get. */
  sql: PostgresSql;
}

export interface PostgresConnectionOptions {
  url: string;
  schema?: string;
  poolSize?: number;
  connectTimeoutMs?: number;
  statementTimeoutMs?: number;
}

export const iso = (value: unknown): string =>
  (value instanceof Date ? value : new Date(String(value))).toISOString();
export const isoOrNull = (value: unknown): string | null => (value == null ? null : iso(value));

export function toAccount(row: Row, prefix = ''): Account {
  return {
    id: String(row[`${prefix}id`]),
    email: String(row[`${prefix}email`]),
    plan: String(row[`${prefix}plan`]) as PlanId,
    createdAt: iso(row[`${prefix}created_at`]),
  };
}

/** 23505 is PostgreSQL's unique_violation. */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '23505';
}

/**
 * Errors that mean "the database cannot be reached now" (a restart, a failover, a terminated
 * backend, no free connection in time) rather than "this statement is wrong": connection exceptions
 * (SQLSTATE class 08), admin/crash shutdown and "cannot connect now" (57P01–57P03), socket errors,
 * and node-postgres's own connection messages.
 */
export function isUnavailable(error: unknown): boolean {
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
export function unavailable(error: unknown): unknown {
  if (!isUnavailable(error)) return error;
  return new CompressoError('SERVICE_UNAVAILABLE', 'The database is unavailable; retry in a few seconds.', {
    cause: error,
  });
}

export function quoteIdent(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) {
    throw new Error(
      `PostgreSQL schema: expected letters, digits and _ (at most 63), received ${JSON.stringify(name)}`,
    );
  }
  return `"${name}"`;
}

/**
 * The pool connects lazily: creating it never touches the network; migrate() or the first query does.
 */
export function openPostgresConnection(options: PostgresConnectionOptions): PostgresConnection {
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

  const sql: PostgresSql = {
    query: async (text, params) => {
      const result = await query(text, params);
      return { rows: result.rows, rowCount: result.rowCount ?? 0 };
    },
    transaction: (work) =>
      transaction((client) =>
        work({
          query: async (text, params) => {
            const result = await client.query<Row>(text, params);
            return { rows: result.rows, rowCount: result.rowCount ?? 0 };
          },
        }),
      ),
  };
  return { pool, schema, quotedSchema, query, one, transaction, sql };
}
