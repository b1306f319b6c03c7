import type { MigrationSet } from './database.ts';

/**
 * Paid plans: which payment-provider customer belongs to which account, the subscriptions the
 * provider reports, and the provider's events already handled. The provider (Stripe) is the source
 * of truth for a subscription; this store keeps the newest state it was told, and turns it into the
 * account's plan (`accounts.plan`, the one column auth, the quota and /api/v1/usage read) in the
 * same transaction, so a change is visible on the next request.
 *
 * Precedence (documented in the server README): an account is Pro while ANY source grants it — a
 * redeemed Pro promo code (which does not lapse) or a subscription that entitles (below). A
 * subscription ending never takes away a promo-code Pro; a promo code never cancels a subscription.
 */

/** The subscription statuses Stripe reports. */
export type SubscriptionStatus =
  | 'active'
  | 'trialing'
  | 'past_due'
  | 'unpaid'
  | 'canceled'
  | 'incomplete'
  | 'incomplete_expired'
  | 'paused';

export const SUBSCRIPTION_STATUSES: readonly SubscriptionStatus[] = [
  'active',
  'trialing',
  'past_due',
  'unpaid',
  'canceled',
  'incomplete',
  'incomplete_expired',
  'paused',
];

/** A subscription as the provider described it (read back from its API, never trusted from a form). */
export interface SubscriptionSnapshot {
  id: string;
  customerId: string;
  accountId: string;
  status: SubscriptionStatus;
  priceId: string | null;
  /** ISO 8601; when the paid period ends (the renewal date). */
  currentPeriodEnd: string | null;
  cancelAtPeriodEnd: boolean;
}

export interface SubscriptionRecord extends SubscriptionSnapshot {
  /**
   * While the subscription is past_due or unpaid (a payment failed), Pro lasts until this instant;
   * null otherwise. Set when such a state is first seen, cleared when it is active again.
   */
  graceUntil: string | null;
  /** `created` (Unix seconds) of the newest event applied: an older event changes nothing. */
  eventAt: number;
  updatedAt: string;
}

export interface BillingCustomer {
  accountId: string;
  customerId: string;
  createdAt: string;
}

export type ApplyOutcome = 'applied' | 'duplicate' | 'stale';

export interface PendingEvent {
  id: string;
  type: string;
  payload: string;
  /** Tries that failed so far. */
  attempts: number;
}

export interface ApplySubscriptionInput {
  /** The provider's event id: each is applied once however often it is delivered. */
  eventId: string;
  eventType: string;
  /** The event's `created`, Unix seconds. */
  eventAt: number;
  snapshot: SubscriptionSnapshot;
  now: string;
  /** How long Pro outlives a failed payment, in ms. */
  graceMs: number;
}

export type PlanSource = 'subscription' | 'promo';

export interface BillingView {
  customerId: string | null;
  /** The account's most recently changed subscription, if any. */
  subscription: SubscriptionRecord | null;
  /** What grants Pro now, subscription first; empty when the account is free. */
  sources: PlanSource[];
}

export interface BillingStore {
  findCustomer(accountId: string): Promise<BillingCustomer | undefined>;
  findCustomerById(customerId: string): Promise<BillingCustomer | undefined>;
  /**
   * Remember the account's customer. The first one linked stays: a second call (two checkouts at
   * once) gets the existing link back, so an account never ends up with two customers here.
   */
  linkCustomer(accountId: string, customerId: string, now: string): Promise<BillingCustomer>;
  /**
   * The webhook's inbox: keep a verified event (its JSON) to be handled after the answer. False when
   * the id was received before (a redelivery: nothing to do).
   */
  receiveEvent(eventId: string, eventType: string, payload: string, now: string): Promise<boolean>;
  /** Received events not yet handled whose next try is due at `now`, oldest first. */
  pendingEvents(now: string, limit: number): Promise<PendingEvent[]>;
  /** A try failed (Stripe or the database unreachable): count it and try again at `nextAt`. */
  deferEvent(eventId: string, nextAt: string): Promise<void>;
  /**
   * Forget events handled before `before` (their payloads too); the number removed. Stripe stops
   * redelivering after 3 days, so a month of ids is ample to recognise every copy.
   */
  pruneEvents(before: string): Promise<number>;
  /** Whether an event id was already handled. */
  eventSeen(eventId: string): Promise<boolean>;
  /** Mark an event that changes no subscription handled; false when it was handled before. */
  recordEvent(eventId: string, eventType: string, now: string): Promise<boolean>;
  /**
   * In one transaction: record the event (a second delivery is 'duplicate' and changes nothing); if
   * an event newer than this one was applied to the subscription, 'stale' (recorded, nothing else);
   * otherwise store the snapshot and set the account's plan from all its sources.
   */
  applySubscription(input: ApplySubscriptionInput): Promise<ApplyOutcome>;
  listSubscriptions(accountId: string): Promise<SubscriptionRecord[]>;
  billingOf(accountId: string, now: string): Promise<BillingView>;
  /**
   * The sweep: accounts whose paid Pro ran out by `now` (a grace period or a cancelled period that
   * ended, with no event to say so) get their plan set from their sources again. Their ids.
   */
  expire(now: string): Promise<string[]>;
}

/** Whether a subscription grants Pro at `now`. */
export function entitles(sub: SubscriptionRecord, now: string): boolean {
  if (sub.status === 'active' || sub.status === 'trialing') {
    // Cancelled at period end: Pro until then. The sweep drops it should the deletion event be lost.
    return !(sub.cancelAtPeriodEnd && sub.currentPeriodEnd !== null && sub.currentPeriodEnd <= now);
  }
  if (sub.status === 'past_due' || sub.status === 'unpaid')
    return sub.graceUntil !== null && sub.graceUntil > now;
  return false;
}

/** The grace deadline a snapshot gets, given what was stored before (the first failure starts it). */
export function graceFor(
  snapshot: SubscriptionSnapshot,
  previous: SubscriptionRecord | undefined,
  eventAt: number,
  graceMs: number,
): string | null {
  if (snapshot.status !== 'past_due' && snapshot.status !== 'unpaid') return null;
  return previous?.graceUntil ?? new Date(eventAt * 1000 + graceMs).toISOString();
}

export const BILLING_MIGRATIONS: MigrationSet = {
  namespace: 'billing',
  sqlite: [
    {
      version: 1,
      sql: `
        CREATE TABLE billing_customers (
          account_id TEXT PRIMARY KEY REFERENCES accounts (id),
          customer_id TEXT NOT NULL UNIQUE,
          created_at TEXT NOT NULL
        );
        CREATE TABLE billing_subscriptions (
          id TEXT PRIMARY KEY,
          account_id TEXT NOT NULL REFERENCES accounts (id),
          customer_id TEXT NOT NULL,
          status TEXT NOT NULL,
          price_id TEXT,
          current_period_end TEXT,
          cancel_at_period_end INTEGER NOT NULL,
          grace_until TEXT,
          event_at INTEGER NOT NULL,
          updated_at TEXT NOT NULL
        );
        CREATE INDEX billing_subscriptions_account ON billing_subscriptions (account_id);
        CREATE TABLE billing_events (
          id TEXT PRIMARY KEY,
          type TEXT NOT NULL,
          received_at TEXT NOT NULL
        );
      `,
    },
    {
      // Version 2: the inbox. Events are kept when verified and handled after the answer; rows of
      // version 1 were handled when recorded.
      version: 2,
      sql: `
        ALTER TABLE billing_events ADD COLUMN payload TEXT;
        ALTER TABLE billing_events ADD COLUMN processed_at TEXT;
        ALTER TABLE billing_events ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE billing_events ADD COLUMN next_at TEXT;
        UPDATE billing_events SET processed_at = received_at;
        CREATE INDEX billing_events_pending ON billing_events (next_at) WHERE processed_at IS NULL;
      `,
    },
  ],
  postgres: [
    {
      version: 1,
      sql: `
        CREATE TABLE billing_customers (
          account_id text PRIMARY KEY REFERENCES accounts (id),
          customer_id text NOT NULL UNIQUE,
          created_at timestamptz NOT NULL
        );
        CREATE TABLE billing_subscriptions (
          id text PRIMARY KEY,
          account_id text NOT NULL REFERENCES accounts (id),
          customer_id text NOT NULL,
          status text NOT NULL,
          price_id text,
          current_period_end timestamptz,
          cancel_at_period_end boolean NOT NULL,
          grace_until timestamptz,
          event_at bigint NOT NULL,
          updated_at timestamptz NOT NULL
        );
        CREATE INDEX billing_subscriptions_account ON billing_subscriptions (account_id);
        CREATE TABLE billing_events (
          id text PRIMARY KEY,
          type text NOT NULL,
          received_at timestamptz NOT NULL
        );
      `,
    },
    {
      version: 2,
      sql: `
        ALTER TABLE billing_events ADD COLUMN payload text;
        ALTER TABLE billing_events ADD COLUMN processed_at timestamptz;
        ALTER TABLE billing_events ADD COLUMN attempts integer NOT NULL DEFAULT 0;
        ALTER TABLE billing_events ADD COLUMN next_at timestamptz;
        UPDATE billing_events SET processed_at = received_at;
        CREATE INDEX billing_events_pending ON billing_events (next_at) WHERE processed_at IS NULL;
      `,
    },
  ],
};

/** Pick the sources that grant Pro, given the account's subscriptions and whether a Pro promo was redeemed. */
export function planSources(
  subs: readonly SubscriptionRecord[],
  promoPro: boolean,
  now: string,
): PlanSource[] {
  const sources: PlanSource[] = [];
  if (subs.some((s) => entitles(s, now))) sources.push('subscription');
  if (promoPro) sources.push('promo');
  return sources;
}

const dayOf = (iso: string | null) => (iso ? iso.slice(0, 10) : 'an unknown date');

/** The subscription's state in words, with the date that matters (renewal, end, grace). */
export function describeSubscription(sub: SubscriptionRecord | null, now: string): string {
  if (!sub) return 'No subscription.';
  switch (sub.status) {
    case 'active':
      return sub.cancelAtPeriodEnd
        ? `Cancelled: Pro until ${dayOf(sub.currentPeriodEnd)}, then the free plan.`
        : `Active: renews on ${dayOf(sub.currentPeriodEnd)}.`;
    case 'trialing':
      return sub.cancelAtPeriodEnd
        ? `Trial, cancelled: Pro until ${dayOf(sub.currentPeriodEnd)}.`
        : `Trial: the first payment is on ${dayOf(sub.currentPeriodEnd)}.`;
    case 'past_due':
    case 'unpaid':
      return sub.graceUntil && sub.graceUntil > now
        ? `Payment failed: Pro stays until ${dayOf(sub.graceUntil)} while the payment is retried. Update the card in Manage billing.`
        : 'Payment failed: the plan fell back to free. Update the card in Manage billing.';
    case 'canceled':
      return 'Ended.';
    default:
      return 'Not active: the first payment has not gone through.';
  }
}
