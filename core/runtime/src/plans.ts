import type { Config } from './config.ts';
import type { PlanId } from './database.ts';

export interface Plan {
  id: PlanId;
  /** Whether the plan includes the /api/v1 API (and so the clients and the MCP server). */
  api: boolean;
  /** Authenticated API requests per UTC day. */
  dailyRequests: number;
}

export const PLAN_IDS: readonly PlanId[] = ['free', 'pro'];

export function isPlanId(value: unknown): value is PlanId {
  return typeof value === 'string' && (PLAN_IDS as readonly string[]).includes(value);
}

export function planOf(id: PlanId, config: Pick<Config, 'proDailyLimit'>): Plan {
  return id === 'pro'
    ? { id, api: true, dailyRequests: config.proDailyLimit }
    : { id: 'free', api: false, dailyRequests: 0 };
}

/** The quota day: the UTC calendar date, so every account resets at 00:00 UTC together. */
export function quotaDay(now: Date = new Date()): string {
  return now.toISOString().slice(0, 10);
}

/** The next 00:00 UTC after `now`. */
export function nextReset(now: Date = new Date()): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

/** Whole seconds until the next reset, at least 1 (a Retry-After of 0 invites a busy loop). */
export function secondsUntilReset(now: Date = new Date()): number {
  return Math.max(1, Math.ceil((nextReset(now).getTime() - now.getTime()) / 1000));
}
