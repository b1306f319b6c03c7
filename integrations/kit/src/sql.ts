import type { Database, SqlRow } from '@compresso/runtime';

/**
 * The kit's statements, written once with `?` parameters, on whichever backend the Database is —
 * the runtime's recipe for an integration's own store (`db.backend`), with the two dialects' common
 * ground: `INSERT … ON CONFLICT … DO UPDATE … WHERE … RETURNING` and partial indexes exist on both.
 * Every guarantee the kit needs (a lease taken once, a count added once) is one such statement, so
 * no transaction spans a round trip.
 */
export interface KitSql {
  readonly kind: 'sqlite' | 'postgres';
  all(sql: string, params?: readonly unknown[]): Promise<SqlRow[]>;
  /** Rows changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
}

const toPostgres = (sql: string) => {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
};

type SqliteParam = string | number | bigint | null | Uint8Array;
const toSqlite = (params: readonly unknown[]): SqliteParam[] =>
  params.map((p) => (p === undefined ? null : typeof p === 'boolean' ? (p ? 1 : 0) : (p as SqliteParam)));

export function kitSql(db: Database): KitSql {
  const backend = db.backend;
  if (backend.kind === 'sqlite') {
    const { sql } = backend;
    return {
      kind: 'sqlite',
      all: async (text, params = []) => sql.all(text, ...toSqlite(params)),
      run: async (text, params = []) => sql.run(text, ...toSqlite(params)).changes,
    };
  }
  const { sql } = backend;
  return {
    kind: 'postgres',
    all: async (text, params = []) => (await sql.query(toPostgres(text), [...params])).rows,
    run: async (text, params = []) => (await sql.query(toPostgres(text), [...params])).rowCount,
  };
}

/** PostgreSQL's bigint comes back as a string; SQLite's INTEGER as a number. */
export const num = (value: unknown): number => (value === null || value === undefined ? 0 : Number(value));
export const numOrNull = (value: unknown): number | null =>
  value === null || value === undefined ? null : Number(value);
export const strOrNull = (value: unknown): string | null =>
  value === null || value === undefined ? null : String(value);
