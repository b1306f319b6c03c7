import {
  backupStore,
  type Clock,
  createOptimizer,
  type PlatformPort,
  systemClock,
} from '@compresso/integration-kit';
import type { BlobStore, Database, Logger } from '@compresso/runtime';
import type { ShopStore } from './shop-store.ts';

const DAY_MS = 86_400_000;

/** Where the worker keeps originals (worker.ts makes its backup store with the same prefix). */
export const BACKUP_PREFIX = 'shopify-backups';

export interface BackupPruner {
  /**
   * Delete the shop's originals older than its `backupRetentionDays` (none when it keeps them for
   * ever), of settled images only; how many. `at` is the time they are judged at (default now).
   */
  prune(shop: string, at?: number): Promise<number>;
  /** `prune`, at most once a day per shop in this process: the worker calls it as it works on a shop. */
  pruneIfDue(shop: string): Promise<number>;
}

/**
 * The merchant's backup retention (Settings → Keep originals for): the kit's `pruneBackups` with a
 * backup store of the shop's retention. Only images that are settled (optimized, skipped, failed or
 * restored) lose their original, and their ledger row forgets the key, so the dashboard no longer
 * offers Compare or Restore for them.
 */
export function backupPruner(deps: {
  db: Database;
  blobs: BlobStore;
  port: PlatformPort;
  shops: ShopStore;
  logger: Logger;
  clock?: Clock;
}): BackupPruner {
  const clock = deps.clock ?? systemClock;
  const last = new Map<string, number>();
  async function prune(shop: string, at = clock.now()): Promise<number> {
    const days = (await deps.shops.find(shop))?.settings.backupRetentionDays ?? null;
    if (days === null) return 0;
    const optimizer = createOptimizer({
      db: deps.db,
      backups: backupStore({ blobs: deps.blobs, prefix: BACKUP_PREFIX, retentionDays: days }),
      port: deps.port,
      clock: { ...clock, now: () => at },
      client() {
        throw new Error('pruning backups compresses nothing');
      },
      settings: () => ({ enabled: false }),
    });
    const pruned = await optimizer.pruneBackups(shop);
    if (pruned)
      deps.logger.info({ shop, pruned, retention_days: days }, 'originals past the retention deleted');
    return pruned;
  }
  return {
    prune,
    async pruneIfDue(shop) {
      const now = clock.now();
      if (now - (last.get(shop) ?? Number.NEGATIVE_INFINITY) < DAY_MS) return 0;
      last.set(shop, now);
      return prune(shop, now);
    },
  };
}
