import {
  type ApplyOutcome,
  type BillingCustomer,
  type BillingStore,
  graceFor,
  planSources,
  type SubscriptionRecord,
  type SubscriptionStatus,
} from '../billing.ts';
import type { PostgresSql, SqlRow } from '../database.ts';

// Not from ./connection.ts: that loads the pg driver, and this file is reached from the package index.
const iso = (value: unknown): string =>
  (value instanceof Date ? value : new Date(String(value))).toISOString();
const isoOrNull = (value: unknown): string | null => (value == null ? null : iso(value));

type Query = PostgresSql['query'];

const toCustomer = (row: SqlRow): BillingCustomer => ({
  accountId: String(row.account_id),
  customerId: String(row.customer_id),
  createdAt: iso(row.created_at),
});

const toSubscription = (row: SqlRow): SubscriptionRecord => ({
  id: String(row.id),
  accountId: String(row.account_id),
  customerId: String(row.customer_id),
  status: String(row.status) as SubscriptionStatus,
  priceId: row.price_id == null ? null : String(row.price_id),
  currentPeriodEnd: isoOrNull(row.current_period_end),
  cancelAtPeriodEnd: row.cancel_at_period_end === true,
  graceUntil: isoOrNull(row.grace_until),
  eventAt: Number(row.event_at),
  updatedAt: iso(row.updated_at),
});

const PROMO_PRO = `SELECT 1 AS x FROM promo_redemptions r JOIN promo_codes p ON p.code = r.code
  WHERE r.account_id = $1 AND p.plan = 'pro' LIMIT 1`;

async function subscriptionsOf(query: Query, accountId: string): Promise<SubscriptionRecord[]> {
  const { rows } = await query(
    'SELECT * FROM billing_subscriptions WHERE account_id = $1 ORDER BY updated_at DESC, id',
    [accountId],
  );
  return rows.map(toSubscription);
}

/** Set the account's plan from every source, on `query` (a transaction's). True when it changed. */
async function settle(query: Query, accountId: string, now: string): Promise<boolean> {
  // The account row is locked first, so two settlements of one account run one after the other.
  await query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
  const subs = await subscriptionsOf(query, accountId);
  const promo = (await query(PROMO_PRO, [accountId])).rowCount > 0;
  const plan = planSources(subs, promo, now).length > 0 ? 'pro' : 'free';
  const { rowCount } = await query('UPDATE accounts SET plan = $1 WHERE id = $2 AND plan <> $1', [
    plan,
    accountId,
  ]);
  return rowCount === 1;
}

/** The billing store on PostgreSQL (the Database's pool, tables from BILLING_MIGRATIONS). */
export function postgresBillingStore(sql: PostgresSql): BillingStore {
  const findCustomer = async (accountId: string) => {
    const { rows } = await sql.query('SELECT * FROM billing_customers WHERE account_id = $1', [accountId]);
    return rows[0] && toCustomer(rows[0]);
  };
  return {
    findCustomer,
    async findCustomerById(customerId) {
      const { rows } = await sql.query('SELECT * FROM billing_customers WHERE customer_id = $1', [
        customerId,
      ]);
      return rows[0] && toCustomer(rows[0]);
    },
    async linkCustomer(accountId, customerId, now) {
      await sql.query(
        'INSERT INTO billing_customers (account_id, customer_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (account_id) DO NOTHING',
        [accountId, customerId, now],
      );
      return (await findCustomer(accountId)) as BillingCustomer;
    },
    async eventSeen(eventId) {
      return (
        (
          await sql.query('SELECT 1 FROM billing_events WHERE id = $1 AND processed_at IS NOT NULL', [
            eventId,
          ])
        ).rowCount > 0
      );
    },
    async receiveEvent(eventId, eventType, payload, now) {
      const { rowCount } = await sql.query(
        'INSERT INTO billing_events (id, type, received_at, payload, next_at) VALUES ($1, $2, $3, $4, $3) ON CONFLICT (id) DO NOTHING',
        [eventId, eventType, now, payload],
      );
      return rowCount === 1;
    },
    async pendingEvents(now, limit) {
      const { rows } = await sql.query(
        'SELECT id, type, payload, attempts FROM billing_events WHERE processed_at IS NULL AND next_at <= $1 ORDER BY received_at, id LIMIT $2',
        [now, limit],
      );
      return rows.map((r) => ({
        id: String(r.id),
        type: String(r.type),
        payload: String(r.payload),
        attempts: Number(r.attempts),
      }));
    },
    async pruneEvents(before) {
      const { rowCount } = await sql.query(
        'DELETE FROM billing_events WHERE processed_at IS NOT NULL AND processed_at < $1',
        [before],
      );
      return rowCount;
    },
    async deferEvent(eventId, nextAt) {
      await sql.query(
        'UPDATE billing_events SET attempts = attempts + 1, next_at = $1 WHERE id = $2 AND processed_at IS NULL',
        [nextAt, eventId],
      );
    },
    async recordEvent(eventId, eventType, now) {
      const { rowCount } = await sql.query(
        'INSERT INTO billing_events (id, type, received_at, processed_at) VALUES ($1, $2, $3, $3) ON CONFLICT (id) DO UPDATE SET processed_at = excluded.processed_at WHERE billing_events.processed_at IS NULL',
        [eventId, eventType, now],
      );
      return rowCount === 1;
    },
    async applySubscription({ eventId, eventType, eventAt, snapshot, now, graceMs }) {
      return sql.transaction(async (tx): Promise<ApplyOutcome> => {
        // Claims the event: inserted, or received earlier and not yet handled by anyone.
        const recorded = await tx.query(
          'INSERT INTO billing_events (id, type, received_at, processed_at) VALUES ($1, $2, $3, $3) ON CONFLICT (id) DO UPDATE SET processed_at = excluded.processed_at WHERE billing_events.processed_at IS NULL',
          [eventId, eventType, now],
        );
        if (recorded.rowCount !== 1) return 'duplicate';
        // Serialise the events of one account (and so of its subscriptions) before reading the row.
        await tx.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [snapshot.accountId]);
        const { rows } = await tx.query('SELECT * FROM billing_subscriptions WHERE id = $1 FOR UPDATE', [
          snapshot.id,
        ]);
        const previous = rows[0] && toSubscription(rows[0]);
        if (previous && previous.eventAt > eventAt) return 'stale';
        const grace = graceFor(snapshot, previous, eventAt, graceMs);
        await tx.query(
          `INSERT INTO billing_subscriptions (id, account_id, customer_id, status, price_id, current_period_end,
             cancel_at_period_end, grace_until, event_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
           ON CONFLICT (id) DO UPDATE SET account_id = excluded.account_id, customer_id = excluded.customer_id,
             status = excluded.status, price_id = excluded.price_id, current_period_end = excluded.current_period_end,
             cancel_at_period_end = excluded.cancel_at_period_end, grace_until = excluded.grace_until,
             event_at = excluded.event_at, updated_at = excluded.updated_at`,
          [
            snapshot.id,
            snapshot.accountId,
            snapshot.customerId,
            snapshot.status,
            snapshot.priceId,
            snapshot.currentPeriodEnd,
            snapshot.cancelAtPeriodEnd,
            grace,
            eventAt,
            now,
          ],
        );
        await settle(tx.query, snapshot.accountId, now);
        if (previous && previous.accountId !== snapshot.accountId)
          await settle(tx.query, previous.accountId, now);
        return 'applied';
      });
    },
    async listSubscriptions(accountId) {
      return subscriptionsOf(sql.query, accountId);
    },
    async billingOf(accountId, now) {
      const subs = await subscriptionsOf(sql.query, accountId);
      const customer = await findCustomer(accountId);
      const promo = (await sql.query(PROMO_PRO, [accountId])).rowCount > 0;
      return {
        customerId: customer?.customerId ?? null,
        subscription: subs[0] ?? null,
        sources: planSources(subs, promo, now),
      };
    },
    async expire(now) {
      const { rows } = await sql.query(
        `SELECT DISTINCT s.account_id FROM billing_subscriptions s JOIN accounts a ON a.id = s.account_id
         WHERE a.plan = 'pro' AND (
           (s.status IN ('past_due', 'unpaid') AND (s.grace_until IS NULL OR s.grace_until <= $1))
           OR (s.status IN ('active', 'trialing') AND s.cancel_at_period_end AND s.current_period_end <= $1)
           OR s.status NOT IN ('active', 'trialing', 'past_due', 'unpaid'))`,
        [now],
      );
      const changed: string[] = [];
      for (const row of rows) {
        const accountId = String(row.account_id);
        if (await sql.transaction((tx) => settle(tx.query, accountId, now))) changed.push(accountId);
      }
      return changed;
    },
  };
}
