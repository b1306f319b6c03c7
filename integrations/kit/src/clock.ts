/**
 * Time as the kit sees it: waits for a platform's cost bucket, leases, the Compresso quota's reset.
 * Injected so tests run those waits on a virtual clock (no fixed sleeps), and so one clock can drive
 * the Compresso test server's quota day too.
 */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  /** Resolve after `ms` (at once for ≤ 0); reject with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      if (ms <= 0) return resolve();
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};
