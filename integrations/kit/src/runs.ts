import { randomUUID } from 'node:crypto';
import type { Database, SqlRow } from '@compresso/runtime';
import { type KitSql, kitSql, num, numOrNull, strOrNull } from './sql.ts';

/**
 * A bulk run's life: `running` (driven by whichever worker holds its lease; `waitingUntil` set while it
 * waits for the quota's reset), `paused` and back, then `completed` or `cancelled` (or `failed`, when
 * the platform refused the listing for good). Only `running` and `paused` are active: one per site.
 */
export type RunState = 'running' | 'paused' | 'completed' | 'cancelled' | 'failed';

export interface BulkRun {
  id: string;
  site: string;
  state: RunState;
  /** Where listing resumes: the cursor after the last page whose every asset was processed. */
  cursor: string | null;
  /** Images on the site when the run started, if the platform can count them (null: unknown). */
  total: number | null;
  /** Assets listed and processed (committed page by page, with the cursor). */
  done: number;
  optimized: number;
  skipped: number;
  failed: number;
  /** Originals' and replacements' bytes of the optimized assets: saved = before − after. */
  bytesBefore: number;
  bytesAfter: number;
  /** While waiting for the Compresso quota's reset (epoch ms), and why. */
  waitingUntil: number | null;
  waitingReason: string | null;
  lastError: string | null;
  leaseOwner: string | null;
  leaseUntil: number;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
}

/** A page's worth of counts, added to the run with its cursor in one statement. */
export interface RunCounts {
  done: number;
  optimized: number;
  skipped: number;
  failed: number;
  bytesBefore: number;
  bytesAfter: number;
}

export const ZERO_COUNTS: RunCounts = {
  done: 0,
  optimized: 0,
  skipped: 0,
  failed: 0,
  bytesBefore: 0,
  bytesAfter: 0,
};

export interface RunStore {
  /** A new running run for the site, or the active one it already has (`created: false`). */
  start(site: string, now: number): Promise<{ run: BulkRun; created: boolean }>;
  get(id: string): Promise<BulkRun | undefined>;
  /** The site's running or paused run. */
  active(site: string): Promise<BulkRun | undefined>;
  /** The site's runs, newest first. */
  list(site: string, limit?: number): Promise<BulkRun[]>;
  /** Move a run from one of `from` to `to`; false when it was in none of them. */
  transition(id: string, from: readonly RunState[], to: RunState, now: number): Promise<boolean>;
  /** Take the lease of a running run (or renew one's own); undefined while another worker holds it, or when not running. */
  claim(id: string, owner: string, now: number, leaseMs: number): Promise<BulkRun | undefined>;
  release(id: string, owner: string): Promise<void>;
  /** Add a finished page's counts and move the cursor, while `owner` holds the lease. */
  commitPage(
    id: string,
    owner: string,
    cursor: string | null,
    counts: RunCounts,
    now: number,
  ): Promise<boolean>;
  /**
   * Correct an ended run's counts by a delta (fields may be negative): an image the run counted as
   * failed and that a later retry optimized moves from `failed` to `optimized`, so the run's totals
   * stay equal to the ledger's. No lease: ended runs have no driver.
   */
  adjustCounts(id: string, delta: RunCounts, now: number): Promise<boolean>;
  /** Say the run waits (until, why), or no longer (null). */
  setWaiting(
    id: string,
    owner: string,
    until: number | null,
    reason: string | null,
    now: number,
  ): Promise<boolean>;
  /** Record the catalog's size, while `owner` holds the lease. */
  setTotal(id: string, owner: string, total: number, now: number): Promise<boolean>;
  /** Running runs no worker holds (after a restart or a killed worker). */
  orphaned(now: number): Promise<BulkRun[]>;
  /** End a running run as `completed` or `failed`, while `owner` holds the lease. */
  finish(
    id: string,
    owner: string,
    state: 'completed' | 'failed',
    lastError: string | null,
    now: number,
  ): Promise<boolean>;
}

const toRun = (row: SqlRow): BulkRun => ({
  id: String(row.id),
  site: String(row.site),
  state: String(row.state) as RunState,
  cursor: strOrNull(row.cursor),
  total: numOrNull(row.total),
  done: num(row.done),
  optimized: num(row.optimized),
  skipped: num(row.skipped),
  failed: num(row.failed),
  bytesBefore: num(row.bytes_before),
  bytesAfter: num(row.bytes_after),
  waitingUntil: numOrNull(row.waiting_until),
  waitingReason: strOrNull(row.waiting_reason),
  lastError: strOrNull(row.last_error),
  leaseOwner: strOrNull(row.lease_owner),
  leaseUntil: num(row.lease_until),
  createdAt: num(row.created_at),
  updatedAt: num(row.updated_at),
  finishedAt: numOrNull(row.finished_at),
});

export function runStore(db: Database): RunStore {
  const sql: KitSql = kitSql(db);
  const get = async (id: string) => {
    const [row] = await sql.all('SELECT * FROM kit_runs WHERE id = ?', [id]);
    return row && toRun(row);
  };
  const active = async (site: string) => {
    const [row] = await sql.all(`SELECT * FROM kit_runs WHERE site = ? AND state IN ('running', 'paused')`, [
      site,
    ]);
    return row && toRun(row);
  };
  async function start(site: string, now: number): Promise<{ run: BulkRun; created: boolean }> {
    // The partial unique index (one running or paused run per site) decides between racing starts.
    const [row] = await sql.all(
      `INSERT INTO kit_runs (id, site, state, created_at, updated_at) VALUES (?, ?, 'running', ?, ?)
       ON CONFLICT DO NOTHING RETURNING *`,
      [`run_${randomUUID()}`, site, now, now],
    );
    if (row) return { run: toRun(row), created: true };
    const existing = await active(site);
    if (!existing) return start(site, now); // it ended between the two statements
    return { run: existing, created: false };
  }
  return {
    start,
    get,
    active,
    async list(site, limit = 20) {
      const rows = await sql.all(
        'SELECT * FROM kit_runs WHERE site = ? ORDER BY created_at DESC, id LIMIT ?',
        [site, Math.max(1, Math.min(100, Math.trunc(limit)))],
      );
      return rows.map(toRun);
    },
    async transition(id, from, to, now) {
      const ended = to === 'completed' || to === 'cancelled' || to === 'failed';
      const changed = await sql.run(
        `UPDATE kit_runs SET state = ?, updated_at = ?, waiting_until = NULL, waiting_reason = NULL${ended ? ', finished_at = ?' : ''}
         WHERE id = ? AND state IN (${from.map(() => '?').join(', ')})`,
        [to, now, ...(ended ? [now] : []), id, ...from],
      );
      return changed === 1;
    },
    async claim(id, owner, now, leaseMs) {
      const [row] = await sql.all(
        `UPDATE kit_runs SET lease_owner = ?, lease_until = ?, updated_at = ?
         WHERE id = ? AND state = 'running' AND (lease_owner IS NULL OR lease_owner = ? OR lease_until <= ?)
         RETURNING *`,
        [owner, now + leaseMs, now, id, owner, now],
      );
      return row && toRun(row);
    },
    async release(id, owner) {
      await sql.run(
        'UPDATE kit_runs SET lease_owner = NULL, lease_until = 0 WHERE id = ? AND lease_owner = ?',
        [id, owner],
      );
    },
    async commitPage(id, owner, cursor, c, now) {
      const changed = await sql.run(
        `UPDATE kit_runs SET cursor = ?, done = done + ?, optimized = optimized + ?, skipped = skipped + ?,
           failed = failed + ?, bytes_before = bytes_before + ?, bytes_after = bytes_after + ?, updated_at = ?
         WHERE id = ? AND lease_owner = ?`,
        [cursor, c.done, c.optimized, c.skipped, c.failed, c.bytesBefore, c.bytesAfter, now, id, owner],
      );
      return changed === 1;
    },
    async adjustCounts(id, c, now) {
      const changed = await sql.run(
        `UPDATE kit_runs SET done = done + ?, optimized = optimized + ?, skipped = skipped + ?, failed = failed + ?,
           bytes_before = bytes_before + ?, bytes_after = bytes_after + ?, updated_at = ?
         WHERE id = ?`,
        [c.done, c.optimized, c.skipped, c.failed, c.bytesBefore, c.bytesAfter, now, id],
      );
      return changed === 1;
    },
    async setWaiting(id, owner, until, reason, now) {
      const changed = await sql.run(
        'UPDATE kit_runs SET waiting_until = ?, waiting_reason = ?, updated_at = ? WHERE id = ? AND lease_owner = ?',
        [until, reason, now, id, owner],
      );
      return changed === 1;
    },
    async setTotal(id, owner, total, now) {
      const changed = await sql.run(
        'UPDATE kit_runs SET total = ?, updated_at = ? WHERE id = ? AND lease_owner = ?',
        [total, now, id, owner],
      );
      return changed === 1;
    },
    async orphaned(now) {
      const rows = await sql.all(
        `SELECT * FROM kit_runs WHERE state = 'running' AND (lease_owner IS NULL OR lease_until <= ?) ORDER BY created_at`,
        [now],
      );
      return rows.map(toRun);
    },
    async finish(id, owner, state, lastError, now) {
      const changed = await sql.run(
        `UPDATE kit_runs SET state = ?, last_error = ?, finished_at = ?, updated_at = ?, lease_owner = NULL, lease_until = 0,
           waiting_until = NULL, waiting_reason = NULL
         WHERE id = ? AND lease_owner = ? AND state = 'running'`,
        [state, lastError, now, now, id, owner],
      );
      return changed === 1;
    },
  };
}
