import {
  applyPromo,
  billingStore,
  createAccount,
  createPromoCode,
  type Database,
  type SubscriptionSnapshot,
} from '@compresso/runtime';
import { describe, expect, it } from 'vitest';
import { type OpenDatabase, withDatabase } from './database-battery-helpers.ts';

const DAY = 86_400_000;
const T0 = Date.UTC(2026, 10, 1);
const at = (ms: number) => new Date(T0 + ms).toISOString();
const sec = (ms: number) => Math.floor((T0 + ms) / 1000);

const plan = async (db: Database, id: string) => (await db.findAccountById(id))?.plan;

/**
 * What every backend's BillingStore must do: one customer per account, events applied once by id,
 * older events never undoing newer ones, and the account's plan (the column auth and the quota read)
 * set from every source — subscription and promo code — in the same transaction.
 */
export function describeBillingStoreBattery(name: string, open: OpenDatabase): void {
  describe(`BillingStore battery: ${name}`, () => {
    const withDb = withDatabase(open);
    const snapshot = (accountId: string, over: Partial<SubscriptionSnapshot> = {}): SubscriptionSnapshot => ({
      id: 'sub_1',
      customerId: 'cus_1',
      accountId,
      status: 'active',
      priceId: 'price_pro',
      currentPeriodEnd: at(30 * DAY),
      cancelAtPeriodEnd: false,
      ...over,
    });

    it(
      'customers: the first link per account stays; found by account and by customer id',
      withDb(async (db) => {
        const billing = billingStore(db);
        const a = await createAccount(db, 'a@example.com');
        expect(await billing.findCustomer(a.id)).toBeUndefined();
        expect(await billing.linkCustomer(a.id, 'cus_A', at(0))).toEqual({
          accountId: a.id,
          customerId: 'cus_A',
          createdAt: at(0),
        });
        expect((await billing.linkCustomer(a.id, 'cus_B', at(1))).customerId).toBe('cus_A');
        expect((await billing.findCustomerById('cus_A'))?.accountId).toBe(a.id);
        expect(await billing.findCustomerById('cus_B')).toBeUndefined();
      }),
    );

    it(
      'an active subscription makes the account Pro at once; the same event twice is a duplicate; a deletion makes it free',
      withDb(async (db) => {
        const billing = billingStore(db);
        const a = await createAccount(db, 'a@example.com');
        const input = {
          eventId: 'evt_1',
          eventType: 'customer.subscription.created',
          eventAt: sec(0),
          now: at(0),
          graceMs: 3 * DAY,
        };
        expect(await billing.applySubscription({ ...input, snapshot: snapshot(a.id) })).toBe('applied');
        expect(await plan(db, a.id)).toBe('pro');
        expect(await billing.eventSeen('evt_1')).toBe(true);
        expect(
          await billing.applySubscription({ ...input, snapshot: snapshot(a.id, { status: 'canceled' }) }),
        ).toBe('duplicate');
        expect(await plan(db, a.id)).toBe('pro');
        expect(
          await billing.applySubscription({
            ...input,
            eventId: 'evt_2',
            eventAt: sec(1000),
            now: at(1000),
            snapshot: snapshot(a.id, { status: 'canceled' }),
          }),
        ).toBe('applied');
        expect(await plan(db, a.id)).toBe('free');
        expect(await billing.billingOf(a.id, at(1000))).toMatchObject({
          sources: [],
          subscription: { id: 'sub_1', status: 'canceled', eventAt: sec(1000) },
        });
      }),
    );

    it(
      'the inbox: a received event is pending until handled, a redelivery is not received twice, a failed try waits',
      withDb(async (db) => {
        const billing = billingStore(db);
        const a = await createAccount(db, 'a@example.com');
        expect(
          await billing.receiveEvent('evt_in', 'customer.subscription.created', '{"id":"evt_in"}', at(0)),
        ).toBe(true);
        expect(
          await billing.receiveEvent('evt_in', 'customer.subscription.created', '{"id":"evt_in"}', at(1)),
        ).toBe(false);
        expect(await billing.receiveEvent('evt_skip', 'invoice.created', '{"id":"evt_skip"}', at(2))).toBe(
          true,
        );
        expect(await billing.eventSeen('evt_in')).toBe(false);
        expect(await billing.pendingEvents(at(5), 10)).toEqual([
          { id: 'evt_in', type: 'customer.subscription.created', payload: '{"id":"evt_in"}', attempts: 0 },
          { id: 'evt_skip', type: 'invoice.created', payload: '{"id":"evt_skip"}', attempts: 0 },
        ]);
        await billing.deferEvent('evt_in', at(60_000));
        expect((await billing.pendingEvents(at(59_999), 10)).map((e) => e.id)).toEqual(['evt_skip']);
        expect(await billing.pendingEvents(at(60_000), 1)).toEqual([
          { id: 'evt_in', type: 'customer.subscription.created', payload: '{"id":"evt_in"}', attempts: 1 },
        ]);
        // Handling claims it: applied once, then gone from the inbox.
        const input = {
          eventId: 'evt_in',
          eventType: 'customer.subscription.created',
          eventAt: sec(0),
          now: at(60_000),
          graceMs: DAY,
          snapshot: snapshot(a.id),
        };
        expect(await billing.applySubscription(input)).toBe('applied');
        expect(await billing.applySubscription(input)).toBe('duplicate');
        expect(await billing.recordEvent('evt_skip', 'invoice.created', at(60_000))).toBe(true);
        expect(await billing.recordEvent('evt_skip', 'invoice.created', at(60_001))).toBe(false);
        expect(await billing.pendingEvents(at(120_000), 10)).toEqual([]);
        expect(await billing.eventSeen('evt_in')).toBe(true);
        expect(await plan(db, a.id)).toBe('pro');
        // A month on, handled events are forgotten; one still pending is kept whatever its age.
        expect(await billing.receiveEvent('evt_late', 'invoice.paid', '{}', at(0))).toBe(true);
        expect(await billing.pruneEvents(at(60_000))).toBe(0);
        expect(await billing.pruneEvents(at(31 * DAY))).toBe(2);
        expect(await billing.eventSeen('evt_in')).toBe(false);
        expect((await billing.pendingEvents(at(31 * DAY), 10)).map((e) => e.id)).toEqual(['evt_late']);
      }),
    );

    it(
      'the same event delivered five times at once is applied once',
      withDb(async (db) => {
        const billing = billingStore(db);
        const a = await createAccount(db, 'a@example.com');
        const input = {
          eventId: 'evt_burst',
          eventType: 'customer.subscription.created',
          eventAt: sec(0),
          now: at(0),
          graceMs: DAY,
          snapshot: snapshot(a.id),
        };
        const outcomes = await Promise.all(Array.from({ length: 5 }, () => billing.applySubscription(input)));
        expect(outcomes.sort()).toEqual(['applied', 'duplicate', 'duplicate', 'duplicate', 'duplicate']);
        expect(await plan(db, a.id)).toBe('pro');
      }),
    );

    it(
      'an event older than the last applied one is stale and changes nothing (reordered delivery)',
      withDb(async (db) => {
        const billing = billingStore(db);
        const a = await createAccount(db, 'a@example.com');
        const base = { eventType: 'customer.subscription.updated', now: at(0), graceMs: DAY };
        await billing.applySubscription({
          ...base,
          eventId: 'evt_new',
          eventAt: sec(5000),
          snapshot: snapshot(a.id, { status: 'canceled' }),
        });
        expect(
          await billing.applySubscription({
            ...base,
            eventId: 'evt_old',
            eventAt: sec(0),
            snapshot: snapshot(a.id),
          }),
        ).toBe('stale');
        expect(await plan(db, a.id)).toBe('free');
        // Still recorded: its redelivery is a duplicate, not a second look.
        expect(await billing.eventSeen('evt_old')).toBe(true);
        expect((await billing.listSubscriptions(a.id))[0]).toMatchObject({
          status: 'canceled',
          eventAt: sec(5000),
        });
      }),
    );

    it(
      'cancel at period end keeps Pro until the period ends; the sweep then drops it',
      withDb(async (db) => {
        const billing = billingStore(db);
        const a = await createAccount(db, 'a@example.com');
        await billing.applySubscription({
          eventId: 'evt_1',
          eventType: 'customer.subscription.updated',
          eventAt: sec(0),
          now: at(0),
          graceMs: DAY,
          snapshot: snapshot(a.id, { cancelAtPeriodEnd: true, currentPeriodEnd: at(10 * DAY) }),
        });
        expect(await plan(db, a.id)).toBe('pro');
        expect(await billing.expire(at(10 * DAY - 1))).toEqual([]);
        expect(await plan(db, a.id)).toBe('pro');
        expect(await billing.expire(at(10 * DAY))).toEqual([a.id]);
        expect(await plan(db, a.id)).toBe('free');
        expect(await billing.expire(at(11 * DAY))).toEqual([]);
      }),
    );

    it(
      'a failed payment (past_due) starts a grace period from the first such event; the sweep ends it; paying again clears it',
      withDb(async (db) => {
        const billing = billingStore(db);
        const a = await createAccount(db, 'a@example.com');
        const base = { eventType: 'invoice.payment_failed', now: at(0), graceMs: 3 * DAY };
        await billing.applySubscription({
          ...base,
          eventId: 'e1',
          eventAt: sec(0),
          snapshot: snapshot(a.id, { status: 'past_due' }),
        });
        await billing.applySubscription({
          ...base,
          eventId: 'e2',
          eventAt: sec(DAY),
          snapshot: snapshot(a.id, { status: 'past_due' }),
        });
        expect((await billing.listSubscriptions(a.id))[0]?.graceUntil).toBe(
          new Date(sec(0) * 1000 + 3 * DAY).toISOString(),
        );
        expect(await plan(db, a.id)).toBe('pro');
        expect(await billing.expire(at(3 * DAY - 1000))).toEqual([]);
        expect(await billing.expire(at(3 * DAY))).toEqual([a.id]);
        expect(await plan(db, a.id)).toBe('free');
        // The card works again: active, Pro, no grace left over for the next failure.
        await billing.applySubscription({
          ...base,
          eventType: 'invoice.paid',
          eventId: 'e3',
          eventAt: sec(4 * DAY),
          now: at(4 * DAY),
          snapshot: snapshot(a.id),
        });
        expect(await plan(db, a.id)).toBe('pro');
        expect((await billing.listSubscriptions(a.id))[0]?.graceUntil).toBeNull();
      }),
    );

    it(
      'a promo-code Pro and a paid Pro coexist: the subscription ending leaves the promo Pro; sources say which',
      withDb(async (db) => {
        const billing = billingStore(db);
        const a = await createAccount(db, 'a@example.com');
        const b = await createAccount(db, 'b@example.com');
        await createPromoCode(db, { code: 'BATTERY', plan: 'pro', uses: 5 });
        await applyPromo(db, a.id, 'BATTERY');
        const base = { eventType: 'customer.subscription.created', now: at(0), graceMs: DAY };
        await billing.applySubscription({
          ...base,
          eventId: 'a1',
          eventAt: sec(0),
          snapshot: snapshot(a.id),
        });
        await billing.applySubscription({
          ...base,
          eventId: 'b1',
          eventAt: sec(0),
          snapshot: snapshot(b.id, { id: 'sub_b', customerId: 'cus_b' }),
        });
        expect((await billing.billingOf(a.id, at(0))).sources).toEqual(['subscription', 'promo']);
        expect((await billing.billingOf(b.id, at(0))).sources).toEqual(['subscription']);
        await billing.applySubscription({
          ...base,
          eventId: 'a2',
          eventAt: sec(10),
          snapshot: snapshot(a.id, { status: 'canceled' }),
        });
        await billing.applySubscription({
          ...base,
          eventId: 'b2',
          eventAt: sec(10),
          snapshot: snapshot(b.id, { id: 'sub_b', customerId: 'cus_b', status: 'canceled' }),
        });
        expect(await plan(db, a.id)).toBe('pro');
        expect((await billing.billingOf(a.id, at(20))).sources).toEqual(['promo']);
        expect(await plan(db, b.id)).toBe('free');
        // An event without a subscription to change is still recorded once.
        expect(await billing.recordEvent('evt_other', 'invoice.created', at(0))).toBe(true);
        expect(await billing.recordEvent('evt_other', 'invoice.created', at(0))).toBe(false);
      }),
    );
  });
}
