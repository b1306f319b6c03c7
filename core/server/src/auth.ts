import {
  type Account,
  type ApiKeyRecord,
  type Config,
  type Database,
  hashKey,
  type Logger,
  looksLikeKey,
  nextReset,
  planOf,
  quotaDay,
  sameHash,
  secondsUntilReset,
} from '@compresso/runtime';
import { CompressoError } from '@compresso/schema';
import type { Request, RequestHandler, Response } from 'express';

export interface AuthState {
  account: Account;
  key: ApiKeyRecord;
  limit: number;
  used: number;
  day: string;
  /** When the quota was read: what `day` and the reset are computed from (one reading at midnight). */
  at: Date;
}

export function authOf(res: Response): AuthState {
  const auth = res.locals.auth as AuthState | undefined;
  if (!auth) throw new Error('route reached without authentication');
  return auth;
}

/** last_used_at is written at most once a minute per key, so a busy key does not add a write per request. */
const TOUCH_INTERVAL_MS = 60_000;

export interface AuthOptions {
  /**
   * Answer even when the day's quota is used up (the request is still counted while there is room).
   * Only for revoking a key: a leaked key that burnt the quota must still be revocable by its owner.
   */
  allowOverQuota?: boolean;
  /**
   * Do not count this request (default: count it). For reading a batch job's progress and results:
   * the batch's items were counted when it was submitted, and polling must not burn the quota.
   */
  count?: boolean;
}

/**
 * Authentication, plan and quota, in that order, before any body is read.
 *
 * Quota policy: every request that passes authentication and the plan check counts against the
 * account's daily quota (all its keys together), whatever it answers — a 400 for a bad option or a
 * 415 for a non-image counts, because the upload was received and examined. Not counted: requests
 * refused before that (401 bad key, 403 no plan), 429 answers themselves, and 5xx answers (our fault:
 * the count is given back).
 */
export function requireApiKey(
  deps: { db: Database; config: Config; logger: Logger; now?: () => Date },
  options: AuthOptions = {},
): RequestHandler {
  const { db, config, logger } = deps;
  const clock = deps.now ?? (() => new Date());
  return async (req: Request, res: Response, next) => {
    const header = req.headers.authorization;
    if (!header) {
      throw new CompressoError('UNAUTHENTICATED', 'Send your API key as "Authorization: Bearer <key>".');
    }
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
    if (!match)
      throw new CompressoError('UNAUTHENTICATED', 'The Authorization header must be "Bearer <key>".');
    const secret = match[1]!;
    const invalid = () =>
      new CompressoError('INVALID_API_KEY', 'The API key is not valid or has been revoked.');
    if (!looksLikeKey(secret)) throw invalid();
    const hash = hashKey(secret);
    const found = await db.findActiveKeyByHash(hash);
    if (!found || !sameHash(found.key.hash, hash)) throw invalid();

    const plan = planOf(found.account.plan, config);
    if (!plan.api) {
      throw new CompressoError(
        'PLAN_REQUIRED',
        'The API is part of the Pro plan. Activate Pro on this account with a promo code, then retry.',
        { details: { plan: plan.id, required: 'pro' } },
      );
    }

    // The quota's day, its reset and Retry-After all come from this one reading of the clock.
    const now = clock();
    const day = quotaDay(now);
    const quota =
      options.count === false
        ? { allowed: true, used: await db.usageOn(found.account.id, day), counted: false }
        : { ...(await db.consumeQuota(found.account.id, day, plan.dailyRequests)), counted: true };
    const reset = secondsUntilReset(now);
    res.setHeader('RateLimit-Limit', String(plan.dailyRequests));
    res.setHeader('RateLimit-Remaining', String(Math.max(0, plan.dailyRequests - quota.used)));
    res.setHeader('RateLimit-Reset', String(reset));
    if (!quota.allowed && !options.allowOverQuota) {
      res.setHeader('Retry-After', String(reset));
      throw new CompressoError(
        'QUOTA_EXCEEDED',
        `The daily quota of ${plan.dailyRequests} API requests is used up; it resets at 00:00 UTC (${nextReset(now).toISOString()}).`,
        { details: { limit: plan.dailyRequests, used: quota.used, resets_at: nextReset(now).toISOString() } },
      );
    }
    if (quota.allowed && quota.counted) {
      res.on('finish', () => {
        if (res.statusCode >= 500) {
          db.refundQuota(found.account.id, day).catch((err) => logger.error({ err }, 'quota refund failed'));
        }
      });
    }
    db.touchApiKey(
      found.key.id,
      now.toISOString(),
      new Date(now.getTime() - TOUCH_INTERVAL_MS).toISOString(),
    ).catch((err) => logger.error({ err }, 'recording key use failed'));
    res.locals.auth = {
      account: found.account,
      key: found.key,
      limit: plan.dailyRequests,
      used: quota.used,
      day,
      at: now,
    } satisfies AuthState;
    next();
  };
}
