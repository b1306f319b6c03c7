import { blockedUntilIso, REFUND_ATTEMPT_SQL, takeAttemptParams, takeAttemptSql } from '../attempts-sql.ts';
import type { AttemptStore } from '../database.ts';
import type { Row, SqliteConnection } from './connection.ts';

/** Attempt throttles and sign-in networks on SQLite. */
export function sqliteAttemptStore({ stmt }: SqliteConnection): AttemptStore {
  return {
    async takeAttempt(subject, now, rule) {
      const params = takeAttemptParams(subject, now, rule);
      const row = stmt(takeAttemptSql((n) => `?${n}`)).get(...params) as Row | undefined;
      if (row)
        return {
          allowed: true,
          attempts: Number(row.attempts),
          blockedUntil: blockedUntilIso(row.blocked_until_ms),
        };
      const current = stmt('SELECT attempts, blocked_until_ms FROM throttle_attempts WHERE subject = ?').get(
        subject,
      ) as Row | undefined;
      return {
        allowed: false,
        attempts: Number(current?.attempts ?? 0),
        blockedUntil: blockedUntilIso(current?.blocked_until_ms),
      };
    },
    async refundAttempt(subject, free) {
      stmt(REFUND_ATTEMPT_SQL((n) => `?${n}`)).run(subject, Math.trunc(free));
    },
    async clearAttempts(subject) {
      stmt('DELETE FROM throttle_attempts WHERE subject = ?').run(subject);
    },
    async rememberLoginNetwork(subject, now) {
      stmt(
        `INSERT INTO login_networks (subject, last_success_at) VALUES (?, ?)
         ON CONFLICT (subject) DO UPDATE SET last_success_at = max(last_success_at, excluded.last_success_at)`,
      ).run(subject, now);
    },
    async knownLoginNetwork(subject, since) {
      return (
        stmt('SELECT 1 FROM login_networks WHERE subject = ? AND last_success_at >= ?').get(
          subject,
          since,
        ) !== undefined
      );
    },
  };
}
