/**
 * Uploads are buffered whole (the engine needs the complete image), so the memory they hold is the
 * sum of every upload in flight. Each one is bounded by maxUploadBytes; this bounds their sum. Without
 * it one account could send its whole daily quota at once: 500 × 50 MB is more memory than the host
 * has (measured before this existed: 20 parallel 40 MB uploads took the server from 157 to 661 MB).
 *
 * A request reserves its bytes before its body is read, so a refused upload costs nothing: with
 * `Expect: 100-continue` its body is never even sent.
 *
 * Fairness: one account may hold at most half the budget, so a burst from one account leaves the
 * other half for everyone else instead of locking them out. Half, not less, because the engine only
 * works on a few images at once anyway: uploads beyond that merely wait in memory, and a single-user
 * server should not be throttled much below the whole budget.
 */
export type Reservation = { ok: true; release: () => void } | { ok: false; reason: 'server' | 'account' };

export interface UploadBudget {
  /** Bytes the budget holds in all. */
  readonly limit: number;
  /** Bytes one account may hold (half the limit). */
  readonly accountLimit: number;
  /** Bytes reserved by uploads in flight now. */
  readonly reserved: number;
  /** Uploads in flight now. */
  readonly uploads: number;
  /** Bytes reserved now by one account's uploads. */
  reservedBy(owner: string): number;
  /**
   * Reserve `bytes` for one upload of `owner` (an account id): a release function (safe to call more
   * than once), or the reason it does not fit now. An upload is always admitted when nothing else is
   * in flight, and an account's first upload is bound only by the whole budget, so no upload within
   * the size limit can be refused forever.
   */
  tryReserve(bytes: number, owner?: string): Reservation;
}

export function createUploadBudget(limitBytes: number): UploadBudget {
  if (!Number.isFinite(limitBytes) || limitBytes < 1) {
    throw new RangeError(`upload budget: expected a positive number of bytes, received ${limitBytes}`);
  }
  const accountLimit = Math.floor(limitBytes / 2);
  let reserved = 0;
  let uploads = 0;
  const byOwner = new Map<string, { bytes: number; uploads: number }>();
  return {
    limit: limitBytes,
    accountLimit,
    get reserved() {
      return reserved;
    },
    get uploads() {
      return uploads;
    },
    reservedBy(owner) {
      return byOwner.get(owner)?.bytes ?? 0;
    },
    tryReserve(bytes, owner) {
      const size = Math.max(0, Math.ceil(bytes));
      if (uploads > 0 && reserved + size > limitBytes) return { ok: false, reason: 'server' };
      const mine = owner === undefined ? undefined : byOwner.get(owner);
      if (mine && mine.bytes + size > accountLimit) return { ok: false, reason: 'account' };
      reserved += size;
      uploads += 1;
      let entry = mine;
      if (owner !== undefined && !entry) {
        entry = { bytes: 0, uploads: 0 };
        byOwner.set(owner, entry);
      }
      if (entry) {
        entry.bytes += size;
        entry.uploads += 1;
      }
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        reserved -= size;
        uploads -= 1;
        if (entry && owner !== undefined) {
          entry.bytes -= size;
          entry.uploads -= 1;
          // Forget idle accounts, so the map only ever holds accounts with uploads in flight.
          if (entry.uploads === 0) byOwner.delete(owner);
        }
      };
      return { ok: true, release };
    },
  };
}

/** Seconds a refused client is asked to wait: about how long an upload ahead of it takes to finish. */
export const BUSY_RETRY_AFTER_SECONDS = 2;
