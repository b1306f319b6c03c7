import type { QuotaResult, UsageStore } from '../database.ts';
import type { PostgresConnection } from './connection.ts';

/** Accounts' daily request counts and the web compressor's visitor allowance on PostgreSQL. */
export function postgresUsageStore({ query, one }: PostgresConnection): UsageStore {
  const store: UsageStore = {
    async consumeQuota(accountId, day, limit): Promise<QuotaResult> {
      if (limit < 1) return { allowed: false, used: await store.usageOn(accountId, day) };
      // One statement: the row lock taken by ON CONFLICT DO UPDATE makes concurrent callers queue on
      // the (account, day) row, and each re-checks `count < limit` against the committed value, so
      // the count can never pass the limit across connections or processes.
      const row = await one(
        `INSERT INTO usage_daily (account_id, day, count) VALUES ($1, $2, 1)
         ON CONFLICT (account_id, day) DO UPDATE SET count = usage_daily.count + 1
         WHERE usage_daily.count < $3
         RETURNING count`,
        [accountId, day, limit],
      );
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await store.usageOn(accountId, day) };
    },
    async refundQuota(accountId, day, n = 1) {
      await query(
        'UPDATE usage_daily SET count = greatest(0, count - $3) WHERE account_id = $1 AND day = $2 AND count > 0',
        [accountId, day, n],
      );
    },
    async consumeQuotaMany(accountId, day, limit, n): Promise<QuotaResult> {
      if (n < 1 || n > limit) return { allowed: false, used: await store.usageOn(accountId, day) };
      // consumeQuota's single statement, n at a time: the row lock serialises concurrent batches.
      const row = await one(
        `INSERT INTO usage_daily (account_id, day, count) VALUES ($1, $2, $3)
         ON CONFLICT (account_id, day) DO UPDATE SET count = usage_daily.count + EXCLUDED.count
         WHERE usage_daily.count + EXCLUDED.count <= $4
         RETURNING count`,
        [accountId, day, n, limit],
      );
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await store.usageOn(accountId, day) };
    },
    async usageOn(accountId, day) {
      const row = await one('SELECT count FROM usage_daily WHERE account_id = $1 AND day = $2', [
        accountId,
        day,
      ]);
      return row ? Number(row.count) : 0;
    },
    async consumeVisitorQuota(visitor, day, limit): Promise<QuotaResult> {
      const usage = () => store.visitorUsageOn(visitor, day);
      if (limit < 1) return { allowed: false, used: await usage() };
      // The same single statement as consumeQuota: the row lock serialises concurrent callers.
      const row = await one(
        `INSERT INTO visitor_usage_daily (visitor, day, count) VALUES ($1, $2, 1)
         ON CONFLICT (visitor, day) DO UPDATE SET count = visitor_usage_daily.count + 1
         WHERE visitor_usage_daily.count < $3
         RETURNING count`,
        [visitor, day, limit],
      );
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await usage() };
    },
    async refundVisitorQuota(visitor, day) {
      await query(
        'UPDATE visitor_usage_daily SET count = count - 1 WHERE visitor = $1 AND day = $2 AND count > 0',
        [visitor, day],
      );
    },
    async visitorUsageOn(visitor, day) {
      const row = await one('SELECT count FROM visitor_usage_daily WHERE visitor = $1 AND day = $2', [
        visitor,
        day,
      ]);
      return row ? Number(row.count) : 0;
    },
    async pruneVisitorUsage(beforeDay) {
      await query('DELETE FROM visitor_usage_daily WHERE day < $1', [beforeDay]);
    },
  };
  return store;
}
