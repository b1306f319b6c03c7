import type { Database, SqlRow } from '@compresso/runtime';
import { type KitSql, kitSql, num, numOrNull, strOrNull } from './sql.ts';

/**
 * Where an asset stands:
 * - `new`: seen, nothing kept yet;
 * - `backed_up`: its original is in the backup store (`backup_key`), the platform still serves it;
 * - `replacing`: a smaller file was made (`pending_hash`) and is being put in place — after a crash
 *   the next run tells from the platform's bytes whether it went through;
 * - `optimized`: the platform serves our file (`current_hash`); an event for that hash is our own;
 * - `skipped`: compression would not save enough (`reason`), the original stays;
 * - `failed`: the platform or the server refused it for good (`last_error`), or retries ran out;
 * - `restored`: the original was put back on request, and stays (it is not compressed again).
 */
export type AssetState = 'new' | 'backed_up' | 'replacing' | 'optimized' | 'skipped' | 'failed' | 'restored';

export const ASSET_STATES: readonly AssetState[] = [
  'new',
  'backed_up',
  'replacing',
  'optimized',
  'skipped',
  'failed',
  'restored',
];

export interface AssetRecord {
  site: string;
  assetId: string;
  state: AssetState;
  reason: string | null;
  contentType: string | null;
  filename: string | null;
  /** SHA-256 (hex) and size of the original: the bytes before we changed anything. */
  originalHash: string | null;
  originalSize: number | null;
  /** What the platform serves now, as far as the kit knows. */
  currentHash: string | null;
  currentSize: number | null;
  /** The replacement being put in place (state `replacing`). */
  pendingHash: string | null;
  pendingSize: number | null;
  /** Where the original's backup is (the backup store's key). */
  backupKey: string | null;
  attempts: number;
  lastError: string | null;
  leaseOwner: string | null;
  leaseUntil: number;
  /** Whether the kit has changed the alt text; `altBefore` is the merchant's own, kept for undo. */
  altChanged: boolean;
  altBefore: string | null;
  altWritten: string | null;
  createdAt: number;
  updatedAt: number;
}

/** The fields a lease holder may change. */
export type AssetPatch = Partial<
  Pick<
    AssetRecord,
    | 'state'
    | 'reason'
    | 'contentType'
    | 'filename'
    | 'originalHash'
    | 'originalSize'
    | 'currentHash'
    | 'currentSize'
    | 'pendingHash'
    | 'pendingSize'
    | 'backupKey'
    | 'attempts'
    | 'lastError'
    | 'altChanged'
    | 'altBefore'
    | 'altWritten'
  >
>;

const COLUMNS: Record<keyof AssetPatch, string> = {
  state: 'state',
  reason: 'reason',
  contentType: 'content_type',
  filename: 'filename',
  originalHash: 'original_hash',
  originalSize: 'original_size',
  currentHash: 'current_hash',
  currentSize: 'current_size',
  pendingHash: 'pending_hash',
  pendingSize: 'pending_size',
  backupKey: 'backup_key',
  attempts: 'attempts',
  lastError: 'last_error',
  altChanged: 'alt_changed',
  altBefore: 'alt_before',
  altWritten: 'alt_written',
};

export interface LedgerTotals {
  /** Assets per state. */
  states: Record<AssetState, number>;
  /** Originals and current sizes of the optimized assets: the bytes saved is their difference. */
  bytesBefore: number;
  bytesAfter: number;
}

export interface ListAssetsOptions {
  state?: AssetState;
  /** Continue after this asset id (ids in byte order). */
  after?: string;
  limit?: number;
}

export interface AssetLedger {
  get(site: string, assetId: string): Promise<AssetRecord | undefined>;
  /**
   * Take the asset's lease for `leaseMs` (creating its record when new): the record, or undefined
   * while another owner's lease runs. One statement, so of any number of claimants exactly one wins.
   */
  claim(
    site: string,
    assetId: string,
    owner: string,
    now: number,
    leaseMs: number,
  ): Promise<AssetRecord | undefined>;
  /** Change fields while `owner` still holds the lease; false when it was lost (taken by another after it ran out). */
  update(site: string, assetId: string, owner: string, patch: AssetPatch, now: number): Promise<boolean>;
  /** Give the lease up (a no-op unless `owner` holds it). */
  release(site: string, assetId: string, owner: string): Promise<void>;
  list(site: string, options?: ListAssetsOptions): Promise<AssetRecord[]>;
  totals(site: string): Promise<LedgerTotals>;
  /** Forget a site's assets, runs and alt text batches (uninstall, shop/redact); the number of asset records removed. */
  eraseSite(site: string): Promise<number>;
}

const toRecord = (row: SqlRow): AssetRecord => ({
  site: String(row.site),
  assetId: String(row.asset_id),
  state: String(row.state) as AssetState,
  reason: strOrNull(row.reason),
  contentType: strOrNull(row.content_type),
  filename: strOrNull(row.filename),
  originalHash: strOrNull(row.original_hash),
  originalSize: numOrNull(row.original_size),
  currentHash: strOrNull(row.current_hash),
  currentSize: numOrNull(row.current_size),
  pendingHash: strOrNull(row.pending_hash),
  pendingSize: numOrNull(row.pending_size),
  backupKey: strOrNull(row.backup_key),
  attempts: num(row.attempts),
  lastError: strOrNull(row.last_error),
  leaseOwner: strOrNull(row.lease_owner),
  leaseUntil: num(row.lease_until),
  altChanged: num(row.alt_changed) === 1,
  altBefore: strOrNull(row.alt_before),
  altWritten: strOrNull(row.alt_written),
  createdAt: num(row.created_at),
  updatedAt: num(row.updated_at),
});

/** The asset ledger on the runtime database (register KIT_MIGRATIONS before `migrate()`). */
export function assetLedger(db: Database): AssetLedger {
  const sql: KitSql = kitSql(db);
  return {
    async get(site, assetId) {
      const [row] = await sql.all('SELECT * FROM kit_assets WHERE site = ? AND asset_id = ?', [
        site,
        assetId,
      ]);
      return row && toRecord(row);
    },
    async claim(site, assetId, owner, now, leaseMs) {
      const [row] = await sql.all(
        `INSERT INTO kit_assets (site, asset_id, lease_owner, lease_until, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (site, asset_id) DO UPDATE SET lease_owner = excluded.lease_owner, lease_until = excluded.lease_until
         WHERE kit_assets.lease_owner IS NULL OR kit_assets.lease_owner = excluded.lease_owner OR kit_assets.lease_until <= ?
         RETURNING *`,
        [site, assetId, owner, now + leaseMs, now, now, now],
      );
      return row && toRecord(row);
    },
    async update(site, assetId, owner, patch, now) {
      const entries = Object.entries(patch).filter(([, value]) => value !== undefined) as [
        keyof AssetPatch,
        unknown,
      ][];
      const sets = entries.map(([field]) => `${COLUMNS[field]} = ?`);
      const values = entries.map(([field, value]) => (field === 'altChanged' ? (value ? 1 : 0) : value));
      const changed = await sql.run(
        `UPDATE kit_assets SET ${[...sets, 'updated_at = ?'].join(', ')} WHERE site = ? AND asset_id = ? AND lease_owner = ?`,
        [...values, now, site, assetId, owner],
      );
      return changed === 1;
    },
    async release(site, assetId, owner) {
      await sql.run(
        'UPDATE kit_assets SET lease_owner = NULL, lease_until = 0 WHERE site = ? AND asset_id = ? AND lease_owner = ?',
        [site, assetId, owner],
      );
    },
    async list(site, { state, after, limit = 100 } = {}) {
      const where = ['site = ?'];
      const params: unknown[] = [site];
      if (state) {
        where.push('state = ?');
        params.push(state);
      }
      if (after !== undefined) {
        where.push('asset_id > ?');
        params.push(after);
      }
      const rows = await sql.all(
        `SELECT * FROM kit_assets WHERE ${where.join(' AND ')} ORDER BY asset_id LIMIT ?`,
        [...params, Math.max(1, Math.min(1000, Math.trunc(limit)))],
      );
      return rows.map(toRecord);
    },
    async totals(site) {
      const states = Object.fromEntries(ASSET_STATES.map((s) => [s, 0])) as Record<AssetState, number>;
      for (const row of await sql.all(
        'SELECT state, COUNT(*) AS n FROM kit_assets WHERE site = ? GROUP BY state',
        [site],
      ))
        states[String(row.state) as AssetState] = num(row.n);
      const [sums] = await sql.all(
        `SELECT COALESCE(SUM(original_size), 0) AS bytes_before, COALESCE(SUM(current_size), 0) AS bytes_after
         FROM kit_assets WHERE site = ? AND state = 'optimized'`,
        [site],
      );
      return { states, bytesBefore: num(sums?.bytes_before), bytesAfter: num(sums?.bytes_after) };
    },
    async eraseSite(site) {
      await sql.run('DELETE FROM kit_runs WHERE site = ?', [site]);
      await sql.run('DELETE FROM kit_alt_changes WHERE site = ?', [site]);
      await sql.run('DELETE FROM kit_alt_batches WHERE site = ?', [site]);
      return sql.run('DELETE FROM kit_assets WHERE site = ?', [site]);
    },
  };
}
