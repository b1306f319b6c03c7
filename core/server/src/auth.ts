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
import { idempotencyKeyOf } from './idempotency-key.ts';

export interface AuthState {
  account: Account;
  key: ApiKeyRecord;
  limit: number;
  used: number;
  day: string;
  /** When the quota was read: what `day` and the reset are computed from (one reading at midnight). */
  at: Date;
  /**
   * Counts the request now, once (429 when the quota is used up); set only when counting was
   * deferred to the idempotency layer (`AuthOptions.idempotent` and an Idempotency-Key header).
   */
  countNow?: () => Promise<void>;
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
  /**
   * The route is idempotent by `Idempotency-Key` (compress, info, jobs): with the header, counting
   * waits until the idempotency layer claims the key (`AuthState.countNow`), so a replay is free.
   */
  idempotent?: boolean;
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
        // Payment is named only where the site offers it (the STRIPE_* settings).
        config.stripeSecretKey
          ? 'The API is part of the Pro plan. Subscribe or enter a promo code in the account area, then retry.'
          : 'The API is part of the Pro plan. Activate Pro on this account with a promo code, then retry.',
        { details: { plan: plan.id, required: 'pro' } },
      );
    }

    // The quota's day, its reset and Retry-After all come from this one reading of the clock.
    const now = clock();
    const day = quotaDay(now);
    const limit = plan.dailyRequests;
    const reset = secondsUntilReset(now);
    const rateHeaders = (used: number) => {
      res.setHeader('RateLimit-Limit', String(limit));
      res.setHeader('RateLimit-Remaining', String(Math.max(0, limit - used)));
      res.setHeader('RateLimit-Reset', String(reset));
    };
    const refuse = (used: number) => {
      res.setHeader('Retry-After', String(reset));
      return new CompressoError(
        'QUOTA_EXCEEDED',
        `The daily quota of ${limit} API requests is used up; it resets at 00:00 UTC (${nextReset(now).toISOString()}).`,
        { details: { limit, used, resets_at: nextReset(now).toISOString() } },
      );
    };
    const refundOn5xx = () => {
      res.on('finish', () => {
        if (res.statusCode >= 500) {
          db.refundQuota(found.account.id, day).catch((err) => logger.error({ err }, 'quota refund failed'));
        }
      });
    };
    // A request carrying Idempotency-Key is counted by the idempotency layer once it has claimed the
    // key (idempotency.ts): a retry answered from the first answer is not counted again.
    const deferred = options.idempotent === true && idempotencyKeyOf(req) !== undefined;
    let used: number;
    if (options.count === false || deferred) {
      used = await db.usageOn(found.account.id, day);
      rateHeaders(used);
    } else {
      const quota = await db.consumeQuota(found.account.id, day, limit);
      used = quota.used;
      rateHeaders(used);
      if (!quota.allowed && !options.allowOverQuota) throw refuse(used);
      if (quota.allowed) refundOn5xx();
    }
    const state: AuthState = { account: found.account, key: found.key, limit, used, day, at: now };
    if (deferred) {
      let counted = false;
      state.countNow = async () => {
        if (counted) return;
        counted = true;
        const quota = await db.consumeQuota(found.account.id, day, limit);
        state.used = quota.used;
        rateHeaders(quota.used);
        if (!quota.allowed) throw refuse(quota.used);
        refundOn5xx();
      };
      // Answers the idempotency layer never reached (an unreadable upload) count as they always did.
      res.on('finish', () => {
        if (counted || res.locals.idempotencyAnswer || res.statusCode >= 500 || res.statusCode === 429)
          return;
        counted = true;
        db.consumeQuota(found.account.id, day, limit).catch((err) =>
          logger.error({ err }, 'counting failed'),
        );
      });
    }
    db.touchApiKey(
      found.key.id,
      now.toISOString(),
      new Date(now.getTime() - TOUCH_INTERVAL_MS).toISOString(),
    ).catch((err) => logger.error({ err }, 'recording key use failed'));
    res.locals.auth = state;
    next();
  };
}
