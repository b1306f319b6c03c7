import type { AttemptRule } from './database.ts';

/**
 * The one statement behind Database.takeAttempt, shared by the SQLite and PostgreSQL backends so the
 * rule cannot drift between them. Times are epoch milliseconds (integer columns) because the lock
 * arithmetic (now + lock, lock × 2) happens inside the statement: that is what makes "check and count"
 * one atomic step instead of a read in the process followed by a write (the burst that let 25
 * parallel wrong passwords all through).
 *
 * Parameters: 1 subject, 2 now, 3 window, 4 free, 5 base lock, 6 max lock. In an UPDATE every
 * expression reads the row as it was, so each column repeats the "fresh window" test.
 */
export function takeAttemptSql(param: (n: number) => string): string {
  const [subject, now, windowMs, free, base, max] = [1, 2, 3, 4, 5, 6].map(param);
  const fresh = `t.last_ms <= ${now} - ${windowMs}`;
  const firstLock = `CASE WHEN 1 >= ${free} THEN ${base} ELSE 0 END`;
  const nextLock = `CASE
      WHEN ${fresh} THEN ${firstLock}
      WHEN t.attempts + 1 < ${free} THEN 0
      WHEN t.lock_ms = 0 THEN ${base}
      WHEN t.lock_ms * 2 > ${max} THEN ${max}
      ELSE t.lock_ms * 2 END`;
  return `INSERT INTO throttle_attempts AS t (subject, attempts, last_ms, lock_ms, blocked_until_ms)
    VALUES (${subject}, 1, ${now}, ${firstLock}, CASE WHEN 1 >= ${free} THEN ${now} + ${base} ELSE 0 END)
    ON CONFLICT (subject) DO UPDATE SET
      attempts = CASE WHEN ${fresh} THEN 1 ELSE t.attempts + 1 END,
      last_ms = ${now},
      lock_ms = ${nextLock},
      blocked_until_ms = CASE WHEN (${nextLock}) = 0 THEN 0 ELSE ${now} + (${nextLock}) END
    WHERE t.blocked_until_ms <= ${now} OR ${fresh}
    RETURNING attempts, blocked_until_ms`;
}

/** The parameters for takeAttemptSql, in order. */
export function takeAttemptParams(subject: string, now: string, rule: AttemptRule): (string | number)[] {
  const nowMs = Date.parse(now);
  if (!Number.isFinite(nowMs))
    throw new TypeError(`takeAttempt: now must be an ISO 8601 instant, got ${now}`);
  return [
    subject,
    nowMs,
    Math.trunc(rule.windowMs),
    Math.trunc(rule.free),
    Math.trunc(rule.baseLockMs),
    Math.trunc(rule.maxLockMs),
  ];
}

export const REFUND_ATTEMPT_SQL = (param: (n: number) => string) =>
  `UPDATE throttle_attempts SET
     attempts = attempts - 1,
     lock_ms = CASE WHEN attempts - 1 < ${param(2)} THEN 0 ELSE lock_ms END,
     blocked_until_ms = CASE WHEN attempts - 1 < ${param(2)} THEN 0 ELSE blocked_until_ms END
   WHERE subject = ${param(1)} AND attempts > 0`;

export const blockedUntilIso = (ms: unknown): string | null => {
  const n = Number(ms);
  return n > 0 ? new Date(n).toISOString() : null;
};
