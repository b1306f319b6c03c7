import { randomUUID } from 'node:crypto';
import { type Compresso, CompressoError, RateLimitError } from '@compresso/client';
import type { Database } from '@compresso/runtime';
import { BackupError, type BackupStore, sha256 } from './backups.ts';
import { type Clock, systemClock } from './clock.ts';
import {
  type AssetLedger,
  type AssetPatch,
  type AssetRecord,
  type AssetState,
  assetLedger,
} from './ledger.ts';
import { isPlatformError } from './platform-error.ts';
import { type PlatformPort, sameImageKind } from './port.ts';

/** A site's compression settings (the merchant's choices), read at the start of each asset's work. */
export interface SiteSettings {
  /** Auto-compression on (default true). A bulk run asks anyway: it is the merchant's explicit request. */
  enabled?: boolean;
  quality?: number | 'auto';
  maxDimension?: number;
  /** Remove EXIF/XMP/IPTC (server default true). */
  stripExif?: boolean;
  /** Replace only when the result is at least this share smaller, in percent (default 5). */
  minSavingsPercent?: number;
  /** … and at least this many bytes smaller (default 512): a re-upload for less is not worth it. */
  minSavingsBytes?: number;
}

/** The steps of one asset's work, in order; `afterStep` hears each as it completes. */
export const PIPELINE_STEPS = [
  'claimed',
  'fetched',
  'backed-up',
  'compressed',
  'intent-recorded',
  'replaced',
  'recorded',
] as const;
export type PipelineStep = (typeof PIPELINE_STEPS)[number];

export type OptimizeOutcome =
  /** This call put a smaller file in place (or found that a crashed run had, and recorded it). */
  | { kind: 'optimized'; before: number; after: number }
  /**
   * Nothing to do: the platform serves what the ledger already settled — our own replacement (the
   * event it caused), a skipped or restored original, or a failure not asked to be retried.
   */
  | { kind: 'unchanged'; state: AssetState; before: number | null; after: number | null }
  /** Compressed, but not replaced: not smaller by the threshold, or the server changed the format. */
  | { kind: 'skipped'; reason: 'not_smaller' | 'format_changed'; before: number; after: number }
  /** Auto-compression is off for the site. */
  | { kind: 'disabled' }
  /** Another worker holds the asset's lease (a webhook and a bulk run on one asset): it does the work. */
  | { kind: 'busy' }
  /** The site's Compresso quota ran out: nothing spent, nothing failed; try again after `resetAt`. */
  | { kind: 'quota'; resetAt: Date }
  /** A transient failure (platform or server unavailable, throttled): counted as an attempt, try later. */
  | { kind: 'retry'; error: string; retryAfterMs?: number | undefined; attempts: number }
  /** Refused for good (not an image, rejected by the platform, retries spent): recorded with its reason. */
  | { kind: 'failed'; error: string };

export interface OptimizerOptions {
  db: Database;
  backups: BackupStore;
  port: PlatformPort;
  /** The Compresso client for a site (each site has its own key, and so its own quota). */
  client(site: string): Compresso | Promise<Compresso>;
  settings(site: string): SiteSettings | Promise<SiteSettings>;
  clock?: Clock;
  /** This worker's lease owner id (default: a random one per optimizer). */
  owner?: string;
  /** How long an asset's lease lasts (default 10 minutes: longer than one asset's work, including an upload). */
  leaseMs?: number;
  /** Transient failures an asset may have before it is failed for good (default 5). */
  maxAttempts?: number;
  /** Called after each step; tests stop a run there to show a crash at any point loses nothing. */
  afterStep?(step: PipelineStep, at: { site: string; assetId: string }): void | Promise<void>;
}

export interface OptimizeOptions {
  signal?: AbortSignal;
  /** Try an asset the ledger records as failed again (the merchant's retry button). */
  retryFailed?: boolean;
  /** Ignore `enabled: false` (a bulk run is an explicit request). */
  force?: boolean;
}

export interface Optimizer {
  readonly ledger: AssetLedger;
  readonly owner: string;
  /** fetch → hash → skip what the ledger knows → back up → compress → replace when smaller → record. */
  optimize(site: string, assetId: string, options?: OptimizeOptions): Promise<OptimizeOutcome>;
  /** Put the original back from its verified backup, check the platform serves it byte for byte, record `restored`. */
  restore(site: string, assetId: string, options?: { signal?: AbortSignal }): Promise<RestoreOutcome>;
  /** Set alt text, keeping the merchant's own for undo the first time the kit changes it. */
  setAltText(site: string, assetId: string, altText: string | null): Promise<void>;
  /** Put back the alt text the asset had before the kit first changed it. */
  undoAltText(site: string, assetId: string): Promise<boolean>;
  /** Delete backups past the retention whose assets are settled, and forget their keys in the ledger. */
  pruneBackups(site: string): Promise<number>;
  /**
   * Forget the site: its ledger, its runs and every backup (Shopify's shop/redact). Stop its work
   * first (uninstall): an asset in flight meanwhile could write its record again.
   */
  eraseSite(site: string): Promise<{ assets: number; backups: number }>;
}

export type RestoreOutcome =
  | { kind: 'restored'; size: number }
  | { kind: 'busy' }
  | { kind: 'no-backup' }
  | { kind: 'failed'; error: string };

/** Thrown inside when the lease was taken over (ours ran out): stop, the new holder finishes. */
class LeaseLost extends Error {}

const DEFAULT_LEASE_MS = 10 * 60_000;
const typeOfFormat = (format: string) => `image/${format === 'jpg' ? 'jpeg' : format}`;
const message = (error: unknown) =>
  error instanceof CompressoError || isPlatformError(error)
    ? `${error.code}: ${error.message}`
    : error instanceof Error
      ? error.message
      : String(error);

export function createOptimizer(options: OptimizerOptions): Optimizer {
  const { backups, port } = options;
  const ledger = assetLedger(options.db);
  const clock = options.clock ?? systemClock;
  const owner = options.owner ?? `kit-${randomUUID()}`;
  /** Assets this optimizer is working on right now (site NUL asset id). */
  const inFlight = new Set<string>();
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const maxAttempts = options.maxAttempts ?? 5;

  async function write(site: string, assetId: string, patch: AssetPatch): Promise<void> {
    if (!(await ledger.update(site, assetId, owner, patch, clock.now()))) throw new LeaseLost();
  }
  const step = async (name: PipelineStep, site: string, assetId: string) =>
    options.afterStep?.(name, { site, assetId });

  /** A transient failure: one more attempt spent, failed for good once they run out. */
  async function transient(
    site: string,
    assetId: string,
    record: AssetRecord,
    error: unknown,
    retryAfterMs?: number,
  ): Promise<OptimizeOutcome> {
    const attempts = record.attempts + 1;
    if (attempts >= maxAttempts) {
      await write(site, assetId, {
        attempts,
        state: 'failed',
        lastError: `gave up after ${attempts} attempts: ${message(error)}`,
      });
      return { kind: 'failed', error: message(error) };
    }
    await write(site, assetId, { attempts, lastError: message(error) });
    return { kind: 'retry', error: message(error), retryAfterMs, attempts };
  }

  async function optimizeClaimed(
    site: string,
    assetId: string,
    claimed: AssetRecord,
    settings: SiteSettings,
    opts: OptimizeOptions,
  ): Promise<OptimizeOutcome> {
    let record = claimed;
    await step('claimed', site, assetId);
    let fetched: Awaited<ReturnType<PlatformPort['fetchAsset']>>;
    try {
      fetched = await port.fetchAsset(site, assetId, { signal: opts.signal });
    } catch (error) {
      if (isPlatformError(error) && error.retryable)
        return transient(site, assetId, record, error, error.retryAfterMs);
      await write(site, assetId, { state: 'failed', lastError: message(error) });
      return { kind: 'failed', error: message(error) };
    }
    const { asset, bytes } = fetched;
    const hash = sha256(bytes);
    await step('fetched', site, assetId);

    // What the ledger already knows about these bytes.
    if (
      (record.state === 'optimized' || record.state === 'skipped' || record.state === 'restored') &&
      hash === record.currentHash
    )
      return {
        kind: 'unchanged',
        state: record.state,
        before: record.originalSize,
        after: record.currentSize,
      };
    if (record.state === 'failed' && hash === record.originalHash && !opts.retryFailed)
      return { kind: 'unchanged', state: 'failed', before: record.originalSize, after: record.currentSize };
    if (record.state === 'replacing' && hash === record.pendingHash) {
      // A run that crashed after the platform took our file: finish its record, compress nothing.
      await write(site, assetId, {
        state: 'optimized',
        currentHash: record.pendingHash,
        currentSize: record.pendingSize,
        pendingHash: null,
        pendingSize: null,
        lastError: null,
      });
      await step('recorded', site, assetId);
      return { kind: 'optimized', before: record.originalSize ?? 0, after: record.pendingSize ?? 0 };
    }
    if (hash !== record.originalHash) {
      // Bytes the ledger has never seen: the first sight of this asset, or a new file the merchant
      // uploaded in its place. Either way these are the original now.
      const fresh: AssetPatch = {
        state: 'new',
        reason: null,
        contentType: asset.contentType,
        filename: asset.filename,
        originalHash: hash,
        originalSize: bytes.byteLength,
        currentHash: hash,
        currentSize: bytes.byteLength,
        pendingHash: null,
        pendingSize: null,
        backupKey: null,
        attempts: 0,
        lastError: null,
      };
      await write(site, assetId, fresh);
      record = { ...record, ...fresh } as AssetRecord;
    }

    // Back up before anything is replaced; a backup made by a crashed run is reused (same key).
    if (!(record.backupKey && (await backups.head(record.backupKey)))) {
      const backup = await backups.put(site, assetId, bytes, {
        contentType: asset.contentType,
        filename: asset.filename,
        now: clock.now(),
      });
      await write(site, assetId, { state: 'backed_up', backupKey: backup.key });
      record = { ...record, state: 'backed_up', backupKey: backup.key };
    }
    await step('backed-up', site, assetId);

    // Compress. The idempotency key is the same for the same original and settings, so a run again
    // after a crash gets the server's first answer back, and the quota is spent once.
    const client = await options.client(site);
    const idempotencyKey = `kit-${sha256(new TextEncoder().encode(JSON.stringify([site, assetId, hash, asset.filename, compressOptions(settings)])))}`;
    let result: Awaited<ReturnType<Compresso['compress']>>;
    try {
      result = await client.compress(bytes, {
        ...compressOptions(settings),
        filename: asset.filename,
        output: false,
        idempotencyKey,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    } catch (error) {
      if (error instanceof RateLimitError && error.quotaExceeded)
        return { kind: 'quota', resetAt: error.resetAt ?? new Date(clock.now() + 3_600_000) };
      if (error instanceof RateLimitError)
        return transient(site, assetId, record, error, (error.retryAfter ?? 1) * 1000);
      const status = error instanceof CompressoError ? error.status : undefined;
      if (status !== undefined && status < 500 && status !== 408) {
        // The server refused the image or the settings: retrying the same request cannot help.
        await write(site, assetId, { state: 'failed', lastError: message(error) });
        return { kind: 'failed', error: message(error) };
      }
      return transient(site, assetId, record, error);
    }
    await step('compressed', site, assetId);

    const before = bytes.byteLength;
    const after = result.data.byteLength;
    const minPercent = settings.minSavingsPercent ?? 5;
    const minBytes = settings.minSavingsBytes ?? 512;
    const reason = !sameImageKind(typeOfFormat(result.format), asset.contentType)
      ? ('format_changed' as const)
      : before - after < minBytes || after > before * (1 - minPercent / 100)
        ? ('not_smaller' as const)
        : undefined;
    if (reason) {
      await write(site, assetId, {
        state: 'skipped',
        reason,
        currentHash: hash,
        currentSize: before,
        lastError: null,
      });
      await step('recorded', site, assetId);
      return { kind: 'skipped', reason, before, after };
    }

    // Say what is about to be put in place before doing it: after a crash past this point, the bytes
    // the platform serves tell whether the replacement went through.
    const outHash = sha256(result.data);
    await write(site, assetId, { state: 'replacing', pendingHash: outHash, pendingSize: after });
    await step('intent-recorded', site, assetId);
    try {
      await port.replaceAsset(
        site,
        assetId,
        { bytes: result.data, contentType: asset.contentType, filename: asset.filename },
        { signal: opts.signal },
      );
    } catch (error) {
      if (isPlatformError(error) && error.retryable)
        return transient(site, assetId, record, error, error.retryAfterMs);
      // Refused (the platform could not process it): the original is still what it serves.
      await write(site, assetId, {
        state: 'failed',
        lastError: message(error),
        pendingHash: null,
        pendingSize: null,
        currentHash: hash,
        currentSize: before,
      });
      return { kind: 'failed', error: message(error) };
    }
    await step('replaced', site, assetId);
    await write(site, assetId, {
      state: 'optimized',
      reason: null,
      currentHash: outHash,
      currentSize: after,
      pendingHash: null,
      pendingSize: null,
      attempts: 0,
      lastError: null,
    });
    await step('recorded', site, assetId);
    return { kind: 'optimized', before, after };
  }

  async function withLease<T>(
    site: string,
    assetId: string,
    busy: T,
    work: (record: AssetRecord) => Promise<T>,
  ): Promise<T> {
    // The ledger's lease is per owner, and an owner may take its own lease again (a restarted worker
    // with a fixed owner id picks up where it was). Two calls of this one optimizer on the same asset
    // at once would therefore both pass the claim: the second waits its turn by answering busy.
    const key = `${site}\u0000${assetId}`;
    if (inFlight.has(key)) return busy;
    inFlight.add(key);
    try {
      const claimed = await ledger.claim(site, assetId, owner, clock.now(), leaseMs);
      if (!claimed) return busy;
      try {
        return await work(claimed);
      } catch (error) {
        if (error instanceof LeaseLost) return busy;
        throw error;
      } finally {
        await ledger.release(site, assetId, owner);
      }
    } finally {
      inFlight.delete(key);
    }
  }

  return {
    ledger,
    owner,
    async optimize(site, assetId, opts = {}) {
      const settings = await options.settings(site);
      if (settings.enabled === false && !opts.force) return { kind: 'disabled' };
      return withLease<OptimizeOutcome>(site, assetId, { kind: 'busy' }, (record) =>
        optimizeClaimed(site, assetId, record, settings, opts),
      );
    },

    async restore(site, assetId, opts = {}) {
      return withLease<RestoreOutcome>(site, assetId, { kind: 'busy' }, async (record) => {
        if (!record.backupKey) return { kind: 'no-backup' };
        let original: Awaited<ReturnType<BackupStore['read']>>;
        try {
          original = await backups.read(record.backupKey);
        } catch (error) {
          if (error instanceof BackupError) {
            await write(site, assetId, { lastError: `restore: ${error.message}` });
            return error.code === 'MISSING'
              ? { kind: 'no-backup' }
              : { kind: 'failed', error: error.message };
          }
          throw error;
        }
        const live = await port.fetchAsset(site, assetId, { signal: opts.signal });
        if (sha256(live.bytes) !== original.backup.checksum) {
          // The current file stays until the platform takes the original back.
          await port.replaceAsset(
            site,
            assetId,
            {
              bytes: original.bytes,
              contentType: original.backup.contentType,
              filename: original.backup.filename,
            },
            { signal: opts.signal },
          );
          const check = await port.fetchAsset(site, assetId, { signal: opts.signal });
          if (sha256(check.bytes) !== original.backup.checksum) {
            const error = `restore: the platform serves ${sha256(check.bytes)}, not the original ${original.backup.checksum}`;
            await write(site, assetId, { lastError: error });
            return { kind: 'failed', error };
          }
        }
        await write(site, assetId, {
          state: 'restored',
          currentHash: original.backup.checksum,
          currentSize: original.backup.size,
          pendingHash: null,
          pendingSize: null,
          lastError: null,
        });
        return { kind: 'restored', size: original.backup.size };
      });
    },

    async setAltText(site, assetId, altText) {
      const done = await withLease(site, assetId, false, async (record) => {
        const before = record.altChanged
          ? record.altBefore
          : (await port.fetchAsset(site, assetId)).asset.altText;
        // Recorded first: a crash after the platform call still leaves the merchant's text for undo.
        await write(site, assetId, { altChanged: true, altBefore: before ?? null, altWritten: altText });
        await port.setAltText(site, assetId, altText);
        return true;
      });
      if (!done) throw new Error(`setAltText: ${assetId} is being worked on; try again`);
    },

    async undoAltText(site, assetId) {
      return withLease(site, assetId, false, async (record) => {
        if (!record.altChanged) return false;
        await port.setAltText(site, assetId, record.altBefore);
        await write(site, assetId, { altChanged: false, altBefore: null, altWritten: null });
        return true;
      });
    },

    async pruneBackups(site) {
      let pruned = 0;
      for (const backup of await backups.expired(site, clock.now())) {
        const done = await withLease(site, backup.assetId, false, async (record) => {
          // Only settled assets: one in flight may still need its original.
          if (record.state === 'new' || record.state === 'backed_up' || record.state === 'replacing')
            return false;
          if (record.backupKey === backup.key) await write(site, backup.assetId, { backupKey: null });
          await backups.delete(backup.key);
          return true;
        });
        if (done) pruned++;
      }
      return pruned;
    },

    async eraseSite(site) {
      const assets = await ledger.eraseSite(site);
      return { assets, backups: await backups.eraseSite(site) };
    },
  };
}

/** The settings as the client's compress options (the file keeps its format: platforms tie the extension to it). */
function compressOptions(settings: SiteSettings): {
  quality?: number | 'auto';
  maxDimension?: number;
  stripExif?: boolean;
} {
  return {
    ...(settings.quality !== undefined ? { quality: settings.quality } : {}),
    ...(settings.maxDimension !== undefined ? { maxDimension: settings.maxDimension } : {}),
    ...(settings.stripExif !== undefined ? { stripExif: settings.stripExif } : {}),
  };
}
