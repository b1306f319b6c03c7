import type { QuotaResult, UsageStore } from '../database.ts';
import type { Row, SqliteConnection } from './connection.ts';

/** Accounts' daily request counts and the web compressor's visitor allowance on SQLite. */
export function sqliteUsageStore({ stmt }: SqliteConnection): UsageStore {
  const store: UsageStore = {
    async consumeQuota(accountId, day, limit): Promise<QuotaResult> {
      if (limit < 1) return { allowed: false, used: await store.usageOn(accountId, day) };
      const row = stmt(
        `INSERT INTO usage_daily (account_id, day, count) VALUES (?, ?, 1)
         ON CONFLICT (account_id, day) DO UPDATE SET count = count + 1 WHERE count < ?
         RETURNING count`,
      ).get(accountId, day, limit) as Row | undefined;
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await store.usageOn(accountId, day) };
    },
    async refundQuota(accountId, day, n = 1) {
      stmt(
        'UPDATE usage_daily SET count = max(0, count - ?) WHERE account_id = ? AND day = ? AND count > 0',
      ).run(n, accountId, day);
    },
    async consumeQuotaMany(accountId, day, limit, n): Promise<QuotaResult> {
      if (n < 1 || n > limit) return { allowed: false, used: await store.usageOn(accountId, day) };
      // The insert's SELECT … WHERE keeps a first batch larger than the limit out too.
      const row = stmt(
        `INSERT INTO usage_daily (account_id, day, count) SELECT ?, ?, ? WHERE ? <= ?
         ON CONFLICT (account_id, day) DO UPDATE SET count = count + excluded.count WHERE count + excluded.count <= ?
         RETURNING count`,
      ).get(accountId, day, n, n, limit, limit) as Row | undefined;
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await store.usageOn(accountId, day) };
    },
    async usageOn(accountId, day) {
      const row = stmt('SELECT count FROM usage_daily WHERE account_id = ? AND day = ?').get(
        accountId,
        day,
      ) as Row | undefined;
      return row ? Number(row.count) : 0;
    },
    async consumeVisitorQuota(visitor, day, limit): Promise<QuotaResult> {
      const usage = () => store.visitorUsageOn(visitor, day);
      if (limit < 1) return { allowed: false, used: await usage() };
      const row = stmt(
        `INSERT INTO visitor_usage_daily (visitor, day, count) VALUES (?, ?, 1)
         ON CONFLICT (visitor, day) DO UPDATE SET count = count + 1 WHERE count < ?
         RETURNING count`,
      ).get(visitor, day, limit) as Row | undefined;
      if (row) return { allowed: true, used: Number(row.count) };
      return { allowed: false, used: await usage() };
    },
    async visitorUsageOn(visitor, day) {
      const row = stmt('SELECT count FROM visitor_usage_daily WHERE visitor = ? AND day = ?').get(
        visitor,
        day,
      ) as Row | undefined;
      return row ? Number(row.count) : 0;
    },
    async refundVisitorQuota(visitor, day) {
      stmt(
        'UPDATE visitor_usage_daily SET count = count - 1 WHERE visitor = ? AND day = ? AND count > 0',
      ).run(visitor, day);
    },
    async pruneVisitorUsage(beforeDay) {
      stmt('DELETE FROM visitor_usage_daily WHERE day < ?').run(beforeDay);
    },
  };
  return store;
}
