import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import type { Account, PlanId, SqliteSql, SqlValue } from '../database.ts';

export type Row = Record<string, SQLInputValue>;

/** One open SQLite file (or memory database) that every SQLite store of a Database shares. */
export interface SqliteConnection {
  db: DatabaseSync;
  /** A prepared statement, cached by its text: each is prepared once per connection. */
  stmt(sql: string): StatementSync;
  /** BEGIN IMMEDIATE … COMMIT, ROLLBACK on a throw. */
  transaction<T>(work: () => T): T;
  /** The same connection as the narrow SqliteSql handle integrations get. */
  sql: SqliteSql;
  close(): void;
}

/**
 * Open the file with the settings every store relies on. DatabaseSync blocks the event loop for the
 * length of each statement, so every query the stores make is a point lookup or a one-row write on
 * an indexed key (microseconds); nothing scans. WAL lets readers proceed during a write and makes a
 * commit one append; the busy timeout lets a second process (the CLI beside a running server) wait
 * for the lock instead of failing.
 */
export function openSqliteConnection(options: {
  path?: string;
  dataDir?: string;
  busyTimeoutMs?: number;
}): SqliteConnection {
  const path = options.path ?? join(options.dataDir ?? './.compresso-data', 'compresso.sqlite');
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path);
  db.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
  if (path !== ':memory:') db.exec('PRAGMA journal_mode = WAL');
  // NORMAL under WAL: a commit survives a process crash; only an OS crash can lose the last
  // commits, which for counters and keys is an acceptable trade for not fsyncing every request.
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA foreign_keys = ON');

  const cache = new Map<string, StatementSync>();
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
  const sql: SqliteSql = {
    run: (text, ...params: SqlValue[]) => ({ changes: Number(stmt(text).run(...params).changes) }),
    get: (text, ...params: SqlValue[]) => stmt(text).get(...params) as Row | undefined,
    all: (text, ...params: SqlValue[]) => stmt(text).all(...params) as Row[],
    transaction,
  };
  return {
    db,
    stmt,
    transaction,
    sql,
    close() {
      cache.clear();
      db.close();
    },
  };
}

export function toAccount(row: Row): Account {
  return {
    id: String(row.id),
    email: String(row.email),
    plan: String(row.plan) as PlanId,
    createdAt: String(row.created_at),
  };
}

/** The account columns a join selects as a_email, a_plan, a_created_at beside another table's row. */
export function joinedAccount(row: Row): Account {
  return toAccount({
    id: row.account_id ?? null,
    email: row.a_email ?? null,
    plan: row.a_plan ?? null,
    created_at: row.a_created_at ?? null,
  });
}

export function isUniqueViolation(error: unknown): boolean {
  return error instanceof Error && /UNIQUE constraint failed/i.test(error.message);
}
