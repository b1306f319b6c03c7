import type { Clock } from './clock.ts';
import { PlatformError } from './platform-error.ts';

/**
 * A platform's budget as it reports it after a call — Shopify's `extensions.cost.throttleStatus`
 * (points in a leaky bucket, `restoreRate` points a second). Platforms without one report nothing.
 */
export interface ThrottleStatus {
  maximumAvailable: number;
  currentlyAvailable: number;
  /** Points restored per second. */
  restoreRate: number;
}

/**
 * The pacing hook an adapter calls around each platform request: `acquire` before sending a call of
 * an estimated cost (it waits when the budget is short), `observe` with what the platform reported.
 * One pacer serves every site; it keeps a budget per site (Shopify's bucket is per shop and app).
 */
export interface Pacer {
  acquire(site: string, cost: number, signal?: AbortSignal): Promise<void>;
  observe(site: string, status: ThrottleStatus): void;
}

/** A pacer that never waits: for platforms without a budget, or adapters that pace themselves. */
export const noPacer: Pacer = {
  acquire: async () => {},
  observe: () => {},
};

export interface CostPacerOptions {
  clock: Clock;
  /**
   * Share of the bucket left for the site's other apps and the merchant's own admin (default 0.5):
   * a bulk run never spends the whole bucket. Shopify's restore rate is shared by every app of a shop.
   */
  reserve?: number;
}

/**
 * Keeps each call's cost within what the site's bucket holds above the reserve: from the last status
 * the platform reported, the points restored since (at `restoreRate`), less what calls acquired since
 * then spent. Waits for the shortfall's restore time when short. Until the platform has reported
 * once, calls go out unpaced (the first answer carries the status).
 */
export function costPacer(options: CostPacerOptions): Pacer {
  const { clock } = options;
  const reserve = options.reserve ?? 0.5;
  if (!(reserve >= 0 && reserve < 1))
    throw new RangeError(`costPacer: reserve must be in [0, 1), received ${reserve}`);
  const budgets = new Map<string, { status: ThrottleStatus; available: number; at: number }>();
  const estimate = (site: string) => {
    const budget = budgets.get(site);
    if (!budget) return undefined;
    const restored = ((clock.now() - budget.at) / 1000) * budget.status.restoreRate;
    budget.available = Math.min(budget.status.maximumAvailable, budget.available + restored);
    budget.at = clock.now();
    return budget;
  };
  return {
    async acquire(site, cost, signal) {
      for (;;) {
        const budget = estimate(site);
        if (!budget) return;
        const { maximumAvailable, restoreRate } = budget.status;
        // A call dearer than the bucket above the reserve still goes once the bucket is full.
        const needed = Math.min(maximumAvailable, cost + maximumAvailable * reserve);
        if (budget.available >= needed) {
          budget.available -= cost;
          return;
        }
        const waitMs = Math.ceil(((needed - budget.available) / Math.max(restoreRate, 0.001)) * 1000);
        await clock.sleep(waitMs, signal);
      }
    },
    observe(site, status) {
      // Calls acquired here but not yet answered are spent in our estimate and not yet in the
      // platform's: keep the lower of the two, so a burst in flight cannot overdraw the bucket.
      const budget = estimate(site);
      const available = budget
        ? Math.min(budget.available, status.currentlyAvailable)
        : status.currentlyAvailable;
      budgets.set(site, { status, available, at: clock.now() });
    },
  };
}

export interface PacedCallOptions {
  pacer: Pacer;
  clock: Clock;
  site: string;
  cost: number;
  signal?: AbortSignal | undefined;
  /** THROTTLED answers waited out before giving up (default 20): a throttle is never a failure, but a loop must end. */
  maxThrottled?: number;
}

/**
 * One platform call through the pacer: acquire, send, and on THROTTLED wait (the platform's hint,
 * else a second) and send again. Adapters wrap each request in it; they report statuses through
 * `pacer.observe` as answers arrive.
 */
export async function pacedCall<T>(options: PacedCallOptions, send: () => Promise<T>): Promise<T> {
  const limit = options.maxThrottled ?? 20;
  for (let throttled = 0; ; throttled++) {
    await options.pacer.acquire(options.site, options.cost, options.signal);
    try {
      return await send();
    } catch (error) {
      if (!(error instanceof PlatformError) || error.code !== 'THROTTLED' || throttled >= limit) throw error;
      await options.clock.sleep(error.retryAfterMs ?? 1000, options.signal);
    }
  }
}
