/**
 * Uploads are buffered whole (the engine needs the complete image), so the memory they hold is the
 * sum of every upload in flight. Each one is bounded by maxUploadBytes; this bounds their sum. Without
 * it one account could send its whole daily quota at once: 500 × 50 MB is more memory than the host
 * has (measured before this existed: 20 parallel 40 MB uploads took the server from 157 to 661 MB).
 *
 * A request reserves its bytes before its body is read, so a refused upload costs nothing: with
 * `Expect: 100-continue` its body is never even sent.
 */
export interface UploadBudget {
  /** Bytes the budget holds in all. */
  readonly limit: number;
  /** Bytes reserved by uploads in flight now. */
  readonly reserved: number;
  /** Uploads in flight now. */
  readonly uploads: number;
  /**
   * Reserve `bytes` for one upload: a release function (safe to call more than once), or undefined
   * when they do not fit now. An upload is always admitted when nothing else is in flight, so no
   * single upload within the size limit can be refused forever.
   */
  tryReserve(bytes: number): (() => void) | undefined;
}

export function createUploadBudget(limitBytes: number): UploadBudget {
  if (!Number.isFinite(limitBytes) || limitBytes < 1) {
    throw new RangeError(`upload budget: expected a positive number of bytes, received ${limitBytes}`);
  }
  let reserved = 0;
  let uploads = 0;
  return {
    limit: limitBytes,
    get reserved() {
      return reserved;
    },
    get uploads() {
      return uploads;
    },
    tryReserve(bytes) {
      const size = Math.max(0, Math.ceil(bytes));
      if (uploads > 0 && reserved + size > limitBytes) return undefined;
      reserved += size;
      uploads += 1;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        reserved -= size;
        uploads -= 1;
      };
    },
  };
}

/** Seconds a refused client is asked to wait: about how long an upload ahead of it takes to finish. */
export const BUSY_RETRY_AFTER_SECONDS = 2;
