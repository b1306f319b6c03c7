import { blockedUntilIso, REFUND_ATTEMPT_SQL, takeAttemptParams, takeAttemptSql } from '../attempts-sql.ts';
import type { AttemptStore } from '../database.ts';
import type { PostgresConnection } from './connection.ts';

/** Attempt throttles and sign-in networks on PostgreSQL. */
export function postgresAttemptStore({ query, one }: PostgresConnection): AttemptStore {
  return {
    async takeAttempt(subject, now, rule) {
      // Typed placeholders: the statement does arithmetic on them, which PostgreSQL cannot infer.
      const types = ['text', 'bigint', 'bigint', 'integer', 'bigint', 'bigint'];
      const row = await one(
        takeAttemptSql((n) => `$${n}::${types[n - 1]}`),
        takeAttemptParams(subject, now, rule),
      );
      if (row)
        return {
          allowed: true,
          attempts: Number(row.attempts),
          blockedUntil: blockedUntilIso(row.blocked_until_ms),
        };
      const current = await one(
        'SELECT attempts, blocked_until_ms FROM throttle_attempts WHERE subject = $1',
        [subject],
      );
      return {
        allowed: false,
        attempts: Number(current?.attempts ?? 0),
        blockedUntil: blockedUntilIso(current?.blocked_until_ms),
      };
    },
    async refundAttempt(subject, free) {
      await query(
        REFUND_ATTEMPT_SQL((n) => (n === 1 ? '$1::text' : `$${n}::integer`)),
        [subject, Math.trunc(free)],
      );
    },
    async clearAttempts(subject) {
      await query('DELETE FROM throttle_attempts WHERE subject = $1', [subject]);
    },
    async rememberLoginNetwork(subject, now) {
      await query(
        `INSERT INTO login_networks (subject, last_success_at) VALUES ($1, $2)
         ON CONFLICT (subject) DO UPDATE SET
           last_success_at = GREATEST(login_networks.last_success_at, excluded.last_success_at)`,
        [subject, now],
      );
    },
    async knownLoginNetwork(subject, since) {
      return (
        (await one('SELECT 1 FROM login_networks WHERE subject = $1 AND last_success_at >= $2', [
          subject,
          since,
        ])) !== undefined
      );
    },
  };
}
