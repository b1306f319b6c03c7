import { createHash } from 'node:crypto';
import type { BlobStore } from '@compresso/runtime';

/** SHA-256 of bytes, hex: the ledger's content hash and the backups' checksum. */
export const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

export interface Backup {
  key: string;
  site: string;
  assetId: string;
  /** SHA-256 (hex) of the original bytes; also the key's last segment. */
  checksum: string;
  size: number;
  contentType: string;
  filename: string;
  /** Epoch milliseconds. */
  createdAt: number;
}

/** A backup that cannot be trusted: its bytes do not match their checksum, or its record is missing. */
export class BackupError extends Error {
  readonly code: 'CORRUPT' | 'MISSING';
  constructor(code: 'CORRUPT' | 'MISSING', message: string) {
    super(message);
    this.name = 'BackupError';
    this.code = code;
  }
}

export interface BackupStoreOptions {
  blobs: BlobStore;
  /** Key prefix in the blob store (default `kit-backups`). */
  prefix?: string;
  /**
   * Days a backup is kept after it was made; null (default) keeps it for ever. `prune` deletes the
   * older ones — the kit's `pruneBackups` only those of assets no longer in flight.
   */
  retentionDays?: number | null;
}

export interface BackupStore {
  readonly retentionDays: number | null;
  /**
   * Keep an original. The key comes from the site, the asset and the bytes' checksum, so a second
   * put of the same original (a run again after a crash) writes the same backup, not another.
   */
  put(
    site: string,
    assetId: string,
    bytes: Uint8Array,
    facts: { contentType: string; filename: string; now: number },
  ): Promise<Backup>;
  /** The backup's record, when both its bytes and record are there. */
  head(key: string): Promise<Backup | undefined>;
  /** The original bytes, checked against the checksum (BackupError CORRUPT when they differ). */
  read(key: string): Promise<{ backup: Backup; bytes: Uint8Array }>;
  delete(key: string): Promise<void>;
  /** Every backup of a site. */
  list(site: string): AsyncIterable<Backup>;
  /** Delete every backup of a site (shop/redact); how many. */
  eraseSite(site: string): Promise<number>;
  /** Backups older than the retention at `now` (none when kept for ever). */
  expired(site: string, now: number): Promise<Backup[]>;
}

const segment = (text: string) => Buffer.from(text, 'utf8').toString('base64url');
const DAY_MS = 86_400_000;

/** The backup store on the runtime's blob store (files or S3): bytes at the key, a JSON record beside them. */
export function backupStore(options: BackupStoreOptions): BackupStore {
  const { blobs } = options;
  const prefix = options.prefix ?? 'kit-backups';
  const retentionDays = options.retentionDays ?? null;
  if (retentionDays !== null && !(Number.isFinite(retentionDays) && retentionDays > 0))
    throw new RangeError(
      `backupStore: retentionDays must be a positive number or null, received ${retentionDays}`,
    );
  const sitePrefix = (site: string) => `${prefix}/${segment(site)}/`;
  const recordKey = (key: string) => `${key}.json`;

  async function head(key: string): Promise<Backup | undefined> {
    const record = await blobs.get(recordKey(key));
    if (!record) return undefined;
    if (!(await blobs.head(key))) return undefined;
    return JSON.parse(Buffer.from(record.bytes).toString('utf8')) as Backup;
  }

  async function* list(site: string): AsyncIterable<Backup> {
    for await (const entry of blobs.list(sitePrefix(site))) {
      if (!entry.key.endsWith('.json')) continue;
      const backup = await head(entry.key.slice(0, -'.json'.length));
      if (backup) yield backup;
    }
  }

  return {
    retentionDays,
    async put(site, assetId, bytes, facts) {
      const checksum = sha256(bytes);
      const key = `${sitePrefix(site)}${segment(assetId)}/${checksum}`;
      const existing = await head(key);
      if (existing) return existing;
      const backup: Backup = {
        key,
        site,
        assetId,
        checksum,
        size: bytes.byteLength,
        contentType: facts.contentType,
        filename: facts.filename,
        createdAt: facts.now,
      };
      // Bytes first, then the record: a record always names bytes that are there.
      await blobs.put(key, bytes, { contentType: facts.contentType });
      await blobs.put(recordKey(key), Buffer.from(JSON.stringify(backup)), {
        contentType: 'application/json',
      });
      return backup;
    },
    head,
    async read(key) {
      const backup = await head(key);
      if (!backup) throw new BackupError('MISSING', `backup ${key} is missing`);
      const blob = await blobs.get(key);
      if (!blob) throw new BackupError('MISSING', `backup ${key} is missing its bytes`);
      const bytes = new Uint8Array(blob.bytes);
      const actual = sha256(bytes);
      if (actual !== backup.checksum || bytes.byteLength !== backup.size)
        throw new BackupError(
          'CORRUPT',
          `backup ${key}: checksum ${actual} (${bytes.byteLength} bytes) is not the recorded ${backup.checksum} (${backup.size} bytes)`,
        );
      return { backup, bytes };
    },
    async delete(key) {
      // The record first: without it the bytes are no longer a backup, never a record without bytes.
      await blobs.delete(recordKey(key));
      await blobs.delete(key);
    },
    list,
    async eraseSite(site) {
      const keys: string[] = [];
      for await (const entry of blobs.list(sitePrefix(site))) keys.push(entry.key);
      for (const key of keys.filter((k) => k.endsWith('.json'))) await blobs.delete(key);
      for (const key of keys.filter((k) => !k.endsWith('.json'))) await blobs.delete(key);
      return keys.filter((k) => !k.endsWith('.json')).length;
    },
    async expired(site, now) {
      if (retentionDays === null) return [];
      const old: Backup[] = [];
      for await (const backup of list(site))
        if (backup.createdAt + retentionDays * DAY_MS <= now) old.push(backup);
      return old;
    },
  };
}
