import type { SqlBackend, SqlRow, SqlValue } from '@compresso/runtime';

/**
 * One way to run the app's statements on either backend: written with `?` parameters, numbered
 * `$1…` for PostgreSQL. The statements are plain enough (point reads and writes, ON CONFLICT, no
 * dialect-specific functions) to be the same text on both; values that differ in kind between the
 * two (booleans, timestamps) are normalised by the callers' row mappers.
 */
export interface AppSql {
  run(sql: string, ...params: SqlValue[]): Promise<number>;
  get(sql: string, ...params: SqlValue[]): Promise<SqlRow | undefined>;
  all(sql: string, ...params: SqlValue[]): Promise<SqlRow[]>;
}

function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

export function appSql(backend: SqlBackend): AppSql {
  if (backend.kind === 'sqlite') {
    const { sql } = backend;
    return {
      run: async (text, ...params) => sql.run(text, ...params).changes,
      get: async (text, ...params) => sql.get(text, ...params),
      all: async (text, ...params) => sql.all(text, ...params),
    };
  }
  const { sql } = backend;
  return {
    run: async (text, ...params) => (await sql.query(numbered(text), params)).rowCount,
    get: async (text, ...params) => (await sql.query(numbered(text), params)).rows[0],
    all: async (text, ...params) => (await sql.query(numbered(text), params)).rows,
  };
}

/** A timestamp column as an ISO string, whichever backend returned it. */
export function isoOf(value: unknown): string | undefined {
  if (value === null || value === undefined) return undefined;
  return value instanceof Date ? value.toISOString() : new Date(String(value)).toISOString();
}

/** A boolean column (SQLite stores 0/1). */
export function boolOf(value: unknown): boolean {
  return value === true || value === 1 || value === 1n || value === '1' || value === 't';
}
