import {
  type ApplyOutcome,
  type BillingCustomer,
  type BillingStore,
  graceFor,
  planSources,
  type SubscriptionRecord,
  type SubscriptionStatus,
} from '../billing.ts';
import type { SqliteSql, SqlRow } from '../database.ts';

const toCustomer = (row: SqlRow): BillingCustomer => ({
  accountId: String(row.account_id),
  customerId: String(row.customer_id),
  createdAt: String(row.created_at),
});

const toSubscription = (row: SqlRow): SubscriptionRecord => ({
  id: String(row.id),
  accountId: String(row.account_id),
  customerId: String(row.customer_id),
  status: String(row.status) as SubscriptionStatus,
  priceId: row.price_id == null ? null : String(row.price_id),
  currentPeriodEnd: row.current_period_end == null ? null : String(row.current_period_end),
  cancelAtPeriodEnd: Number(row.cancel_at_period_end) === 1,
  graceUntil: row.grace_until == null ? null : String(row.grace_until),
  eventAt: Number(row.event_at),
  updatedAt: String(row.updated_at),
});

const PROMO_PRO = `SELECT 1 AS x FROM promo_redemptions r JOIN promo_codes p ON p.code = r.code
  WHERE r.account_id = ? AND p.plan = 'pro' LIMIT 1`;

/** The billing store on SQLite (the Database's connection, tables from BILLING_MIGRATIONS). */
export function sqliteBillingStore(sql: SqliteSql): BillingStore {
  const subscriptionsOf = (accountId: string) =>
    sql
      .all('SELECT * FROM billing_subscriptions WHERE account_id = ? ORDER BY updated_at DESC, id', accountId)
      .map(toSubscription);
  /** Set the account's plan from every source; inside the caller's transaction. */
  const settle = (accountId: string, now: string): boolean => {
    const sources = planSources(subscriptionsOf(accountId), Boolean(sql.get(PROMO_PRO, accountId)), now);
    const plan = sources.length > 0 ? 'pro' : 'free';
    return (
      sql.run('UPDATE accounts SET plan = ? WHERE id = ? AND plan <> ?', plan, accountId, plan).changes === 1
    );
  };
  return {
    async findCustomer(accountId) {
      const row = sql.get('SELECT * FROM billing_customers WHERE account_id = ?', accountId);
      return row && toCustomer(row);
    },
    async findCustomerById(customerId) {
      const row = sql.get('SELECT * FROM billing_customers WHERE customer_id = ?', customerId);
      return row && toCustomer(row);
    },
    async linkCustomer(accountId, customerId, now) {
      sql.run(
        'INSERT INTO billing_customers (account_id, customer_id, created_at) VALUES (?, ?, ?) ON CONFLICT (account_id) DO NOTHING',
        accountId,
        customerId,
        now,
      );
      return toCustomer(sql.get('SELECT * FROM billing_customers WHERE account_id = ?', accountId) as SqlRow);
    },
    async eventSeen(eventId) {
      return Boolean(
        sql.get('SELECT 1 AS x FROM billing_events WHERE id = ? AND processed_at IS NOT NULL', eventId),
      );
    },
    async receiveEvent(eventId, eventType, payload, now) {
      return (
        sql.run(
          'INSERT INTO billing_events (id, type, received_at, payload, next_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
          eventId,
          eventType,
          now,
          payload,
          now,
        ).changes === 1
      );
    },
    async pendingEvents(now, limit) {
      return sql
        .all(
          'SELECT id, type, payload, attempts FROM billing_events WHERE processed_at IS NULL AND next_at <= ? ORDER BY received_at, id LIMIT ?',
          now,
          limit,
        )
        .map((r) => ({
          id: String(r.id),
          type: String(r.type),
          payload: String(r.payload),
          attempts: Number(r.attempts),
        }));
    },
    async pruneEvents(before) {
      return sql.run('DELETE FROM billing_events WHERE processed_at IS NOT NULL AND processed_at < ?', before)
        .changes;
    },
    async deferEvent(eventId, nextAt) {
      sql.run(
        'UPDATE billing_events SET attempts = attempts + 1, next_at = ? WHERE id = ? AND processed_at IS NULL',
        nextAt,
        eventId,
      );
    },
    async recordEvent(eventId, eventType, now) {
      return (
        sql.run(
          'INSERT INTO billing_events (id, type, received_at, processed_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET processed_at = excluded.processed_at WHERE billing_events.processed_at IS NULL',
          eventId,
          eventType,
          now,
          now,
        ).changes === 1
      );
    },
    async applySubscription({ eventId, eventType, eventAt, snapshot, now, graceMs }) {
      return sql.transaction((): ApplyOutcome => {
        // Claims the event: inserted, or received earlier and not yet handled by anyone.
        const recorded = sql.run(
          'INSERT INTO billing_events (id, type, received_at, processed_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET processed_at = excluded.processed_at WHERE billing_events.processed_at IS NULL',
          eventId,
          eventType,
          now,
          now,
        );
        if (recorded.changes !== 1) return 'duplicate';
        const row = sql.get('SELECT * FROM billing_subscriptions WHERE id = ?', snapshot.id);
        const previous = row && toSubscription(row);
        if (previous && previous.eventAt > eventAt) return 'stale';
        const grace = graceFor(snapshot, previous, eventAt, graceMs);
        sql.run(
          `INSERT INTO billing_subscriptions (id, account_id, customer_id, status, price_id, current_period_end,
             cancel_at_period_end, grace_until, event_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET account_id = excluded.account_id, customer_id = excluded.customer_id,
             status = excluded.status, price_id = excluded.price_id, current_period_end = excluded.current_period_end,
             cancel_at_period_end = excluded.cancel_at_period_end, grace_until = excluded.grace_until,
             event_at = excluded.event_at, updated_at = excluded.updated_at`,
          snapshot.id,
          snapshot.accountId,
          snapshot.customerId,
          snapshot.status,
          snapshot.priceId,
          snapshot.currentPeriodEnd,
          snapshot.cancelAtPeriodEnd ? 1 : 0,
          grace,
          eventAt,
          now,
        );
        settle(snapshot.accountId, now);
        if (previous && previous.accountId !== snapshot.accountId) settle(previous.accountId, now);
        return 'applied';
      });
    },
    async listSubscriptions(accountId) {
      return subscriptionsOf(accountId);
    },
    async billingOf(accountId, now) {
      const subs = subscriptionsOf(accountId);
      const customer = sql.get('SELECT customer_id FROM billing_customers WHERE account_id = ?', accountId);
      return {
        customerId: customer ? String(customer.customer_id) : null,
        subscription: subs[0] ?? null,
        sources: planSources(subs, Boolean(sql.get(PROMO_PRO, accountId)), now),
      };
    },
    async expire(now) {
      const due = sql
        .all(
          `SELECT DISTINCT s.account_id FROM billing_subscriptions s JOIN accounts a ON a.id = s.account_id
           WHERE a.plan = 'pro' AND (
             (s.status IN ('past_due', 'unpaid') AND (s.grace_until IS NULL OR s.grace_until <= ?))
             OR (s.status IN ('active', 'trialing') AND s.cancel_at_period_end = 1 AND s.current_period_end <= ?)
             OR s.status NOT IN ('active', 'trialing', 'past_due', 'unpaid'))`,
          now,
          now,
        )
        .map((r) => String(r.account_id));
      return due.filter((accountId) => sql.transaction(() => settle(accountId, now)));
    },
  };
}
