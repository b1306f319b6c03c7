import type { Clock } from '../clock.ts';

/**
 * A virtual clock for tests: `sleep(ms)` moves time forward to the sleeper's wake-up at once (and
 * yields to the event loop), so a wait for a cost bucket, a lease or the quota's reset takes no real
 * time and no test waits on the wall clock. `advance` moves it by hand (a lease running out).
 */
export interface ManualClock extends Clock {
  advance(ms: number): void;
  /** Total virtual milliseconds slept, by every caller. */
  readonly slept: number;
}

export function manualClock(start = Date.parse('2026-11-25T10:00:00.000Z')): ManualClock {
  let now = start;
  let slept = 0;
  return {
    now: () => now,
    get slept() {
      return slept;
    },
    advance(ms) {
      now += ms;
    },
    async sleep(ms, signal) {
      if (signal?.aborted) throw signal.reason;
      await new Promise((resolve) => setImmediate(resolve));
      if (signal?.aborted) throw signal.reason;
      if (ms > 0) {
        slept += ms;
        now += ms;
      }
    },
  };
}
