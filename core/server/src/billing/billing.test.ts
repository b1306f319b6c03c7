import { billingStore, createPromoCode } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  type FakeStripe,
  signupTokenFromLog,
  startFakeStripe,
  startTestServer,
  type TestServer,
} from '../testing.ts';
import { Browser } from '../web/test-browser.ts';

const SECRET_KEY = 'sk_test_compressoFake0123456789';
const WEBHOOK_SECRET = 'whsec_compressoFakeSigning0123456789';
const PRICE = 'price_ProMonthly';
const DAY = 86_400_000;
const PASSWORD = 'correct horse battery';

async function signUp(server: TestServer, email: string): Promise<Browser> {
  const browser = new Browser(server.url);
  expect((await browser.submit('/signup', '/signup', { email, password: PASSWORD })).status).toBe(200);
  const token = signupTokenFromLog(server.rawLog);
  expect((await browser.submit(`/signup/${token}`, `/signup/${token}`, {})).status).toBe(303);
  return browser;
}

describe('without the STRIPE_* settings', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  it('the account page says nothing about payment, and there is no webhook route', async () => {
    const browser = await signUp(server, 'nopay@example.com');
    const res = await browser.get('/account');
    const html = await res.text();
    expect(html).toContain('Promo code');
    expect(html).not.toMatch(/subscri|payment|stripe|billing/i);
    expect(res.headers.get('content-security-policy')).toContain("form-action 'self';");
    const hook = await fetch(`${server.url}/webhooks/stripe`, { method: 'POST', body: '{}' });
    expect(hook.status).toBe(404);
  });
});

describe('Pro by subscription, against a fake of Stripe through the real stripe package', () => {
  let server: TestServer;
  let fake: FakeStripe;
  let clock = Date.now();
  const now = () => new Date(clock);

  beforeAll(async () => {
    fake = await startFakeStripe({
      secretKey: SECRET_KEY,
      webhookSecret: WEBHOOK_SECRET,
      now: () => Math.floor(clock / 1000),
    });
    server = await startTestServer({
      dbPath: ':memory:',
      now,
      overrides: {
        stripeSecretKey: SECRET_KEY,
        stripeWebhookSecret: WEBHOOK_SECRET,
        stripePricePro: PRICE,
        billingGraceDays: 3,
        proDailyLimit: 500,
      },
      billing: { api: fake.api, redirectOrigins: [fake.url] },
    });
    fake.webhookUrl = `${server.url}/webhooks/stripe`;
  });
  afterAll(async () => {
    await server.close();
    await fake.close();
  });

  const planOf = async (email: string) => (await server.db.findAccountByEmail(email))?.plan;

  /** Sign up, press Subscribe to Pro, pay on the fake's checkout page; the browser and the subscription id. */
  async function subscribe(email: string) {
    const browser = await signUp(server, email);
    const res = await browser.submit('/account', '/account/billing/checkout', {});
    expect(res.status).toBe(303);
    const checkout = res.headers.get('location') ?? '';
    expect(checkout.startsWith(`${fake.url}/c/pay/`)).toBe(true);
    const paid = await fetch(checkout, { method: 'POST', redirect: 'manual' });
    await server.billing?.settled();
    expect(paid.status).toBe(303);
    const back = new URL(paid.headers.get('location') ?? '');
    expect(back.pathname).toBe('/account/billing/success');
    const account = await server.db.findAccountByEmail(email);
    const sub = [...fake.subscriptions.values()].find(
      (s) => (s.metadata as Record<string, string>).account_id === account?.id,
    );
    return {
      browser,
      accountId: account?.id ?? '',
      subId: String(sub?.id),
      success: `${back.pathname}${back.search}`,
    };
  }

  async function newKey(browser: Browser): Promise<string> {
    const res = await browser.submit('/account', '/account/keys', { name: 'paid' });
    expect(res.status).toBe(201);
    return /id="new-key-secret"[^>]*value="([^"]+)"/.exec(await res.text())?.[1] ?? '';
  }

  it('Subscribe to Pro → Checkout (customer with the account id) → paid → Pro at once, and the key works', async () => {
    const browser = await signUp(server, 'payer@example.com');
    const page = await browser.get('/account');
    // The page may send its forms on to Stripe's (here: the fake's) pages, and nowhere else.
    expect(page.headers.get('content-security-policy')).toContain(`form-action 'self' ${fake.url};`);
    const html = await page.text();
    expect(html).toContain('No subscription.');
    expect(html).toContain('Subscribe to Pro');
    expect(html).not.toContain('Manage billing');

    const account = await server.db.findAccountByEmail('payer@example.com');
    const accountId = account?.id ?? '';
    const res = await browser.submit('/account', '/account/billing/checkout', {});
    expect(res.status).toBe(303);
    const checkout = res.headers.get('location') ?? '';
    const customers = fake.requests.filter((r) => r.path === '/v1/customers');
    expect(customers.at(-1)?.form).toMatchObject({
      email: 'payer@example.com',
      'metadata[account_id]': accountId,
    });
    const session = fake.requests.filter((r) => r.path === '/v1/checkout/sessions').at(-1)?.form;
    expect(session).toMatchObject({
      mode: 'subscription',
      client_reference_id: accountId,
      'metadata[account_id]': accountId,
      'subscription_data[metadata][account_id]': accountId,
      'line_items[0][price]': PRICE,
      'line_items[0][quantity]': '1',
      success_url: `${server.url}/account/billing/success?session_id={CHECKOUT_SESSION_ID}`,
      cancel_url: `${server.url}/account/billing/cancel`,
    });
    // Leaving the checkout and starting again reuses the account's customer.
    expect((await browser.get('/account/billing/cancel')).status).toBe(200);
    expect((await browser.submit('/account', '/account/billing/checkout', {})).status).toBe(303);
    expect(fake.requests.filter((r) => r.path === '/v1/customers')).toHaveLength(customers.length);
    expect(await server.billing?.store.findCustomer(accountId)).toMatchObject({
      customerId: session?.customer,
    });

    const paid = await fetch(checkout, { method: 'POST', redirect: 'manual' });
    await server.billing?.settled();
    const success = new URL(paid.headers.get('location') ?? '');
    expect(await planOf('payer@example.com')).toBe('pro');
    const landing = await (await browser.get(`${success.pathname}${success.search}`)).text();
    expect(landing).toContain('<strong id="plan-name">Pro</strong>');

    const after = await (await browser.get('/account')).text();
    const renews = new Date(clock + 30 * DAY).toISOString().slice(0, 10);
    expect(after).toContain(`Active: renews on ${renews}.`);
    expect(after).toContain('Pro through your subscription.');
    expect(after).toContain('Manage billing');
    expect(after).not.toContain('id="subscribe"');
    const key = await newKey(browser);
    const usage = await fetch(`${server.url}/api/v1/usage`, { headers: bearer(key) });
    expect(usage.status).toBe(200);
    expect(await usage.json()).toMatchObject({ plan: 'pro', limit: 500, used: 1 });
    // Already paying: Subscribe again goes back to the account, no second checkout.
    const sessions = fake.checkoutSessions.size;
    const again = await browser.submit('/account', '/account/billing/checkout', {});
    expect(again.headers.get('location')).toBe('/account');
    expect(fake.checkoutSessions.size).toBe(sessions);
  });

  it('events delivered twice and out of order change nothing twice: the newest state wins', async () => {
    const { browser, accountId, subId } = await subscribe('reorder@example.com');
    const key = await newKey(browser);
    const sub = fake.subscriptions.get(subId) ?? {};
    const created = Math.floor(clock / 1000);
    // Stripe's order: updated (cancel at period end) at +10 s, deleted at +20 s. Delivered backwards.
    const updated = fake.event(
      'customer.subscription.updated',
      { ...sub, cancel_at_period_end: true },
      created + 10,
    );
    fake.updateSubscription(subId, { status: 'canceled', cancel_at_period_end: false });
    const deleted = fake.event(
      'customer.subscription.deleted',
      fake.subscriptions.get(subId) ?? {},
      created + 20,
    );
    /** The answer's outcome, or once handled (queued), the handling's outcome from the log. */
    const outcome = async (event: Record<string, unknown>) => {
      const res = await fake.deliver(event);
      expect(res.status).toBe(200);
      const answered = ((await res.json()) as { outcome: string }).outcome;
      if (answered !== 'queued') return answered;
      await server.billing?.settled();
      return server.logLines.findLast((l) => l.msg === 'stripe event' && l.event_id === event.id)?.outcome;
    };
    // Stripe retrying while the first delivery is still being handled: one is kept, the rest are copies.
    const burst = await Promise.all(Array.from({ length: 4 }, () => fake.deliver(deleted)));
    const outcomes = await Promise.all(
      burst.map(async (r) => ((await r.json()) as { outcome: string }).outcome),
    );
    expect(outcomes.sort()).toEqual(['duplicate', 'duplicate', 'duplicate', 'queued']);
    await server.billing?.settled();
    expect(server.logLines.filter((l) => l.msg === 'stripe event' && l.event_id === deleted.id)).toEqual([
      expect.objectContaining({ outcome: 'applied' }),
    ]);
    expect(await planOf('reorder@example.com')).toBe('free');
    expect(await outcome(updated)).toBe('stale');
    expect(await outcome(deleted)).toBe('duplicate');
    expect(await outcome(updated)).toBe('duplicate');
    expect(await planOf('reorder@example.com')).toBe('free');
    const usage = await fetch(`${server.url}/api/v1/usage`, { headers: bearer(key) });
    expect(usage.status).toBe(403);
    expect(await usage.json()).toMatchObject({
      error: { code: 'PLAN_REQUIRED', message: expect.stringContaining('Subscribe or enter a promo code') },
    });
    const subs = await billingStore(server.db).listSubscriptions(accountId);
    expect(subs).toEqual([expect.objectContaining({ id: subId, status: 'canceled', eventAt: created + 20 })]);
  });

  it('cancelling in the portal keeps Pro until the period ends; then the sweep ends it', async () => {
    const start = clock;
    const { browser } = await subscribe('canceller@example.com');
    const key = await newKey(browser);
    const res = await browser.submit('/account', '/account/billing/portal', {});
    expect(res.status).toBe(303);
    const portal = res.headers.get('location') ?? '';
    expect(portal.startsWith(`${fake.url}/p/session/`)).toBe(true);
    const cancel = await fetch(`${portal}/cancel`, { method: 'POST', redirect: 'manual' });
    await server.billing?.settled();
    expect(cancel.headers.get('location')).toBe(`${server.url}/account`);
    expect(await planOf('canceller@example.com')).toBe('pro');
    const end = new Date(start + 30 * DAY).toISOString().slice(0, 10);
    expect(await (await browser.get('/account')).text()).toContain(
      `Cancelled: Pro until ${end}, then the free plan.`,
    );
    clock = start + 30 * DAY - 1000;
    expect(await server.billing?.sweep()).toEqual([]);
    expect((await fetch(`${server.url}/api/v1/usage`, { headers: bearer(key) })).status).toBe(200);
    clock = start + 30 * DAY + 1000;
    expect(await server.billing?.sweep()).toHaveLength(1);
    expect(await planOf('canceller@example.com')).toBe('free');
    expect((await fetch(`${server.url}/api/v1/usage`, { headers: bearer(key) })).status).toBe(403);
    expect(server.logLines.some((l) => l.msg === 'paid plan ended (grace or cancelled period over)')).toBe(
      true,
    );
  });

  it('a failed payment starts the grace period; after it the plan falls back; paying again restores Pro', async () => {
    const start = clock;
    const { browser, subId } = await subscribe('latepayer@example.com');
    const key = await newKey(browser);
    const sub = fake.updateSubscription(subId, { status: 'past_due' });
    const invoice = {
      id: 'in_failed1',
      object: 'invoice',
      customer: sub.customer,
      status: 'open',
      parent: { type: 'subscription_details', subscription_details: { subscription: subId } },
    };
    expect((await fake.deliver(fake.event('invoice.payment_failed', invoice))).status).toBe(200);
    await server.billing?.settled();
    expect(await planOf('latepayer@example.com')).toBe('pro');
    const graceEnd = new Date(Math.floor(start / 1000) * 1000 + 3 * DAY).toISOString().slice(0, 10);
    expect(await (await browser.get('/account')).text()).toContain(
      `Payment failed: Pro stays until ${graceEnd}`,
    );
    clock = start + 3 * DAY + 1000;
    expect(await server.billing?.sweep()).toHaveLength(1);
    expect(await planOf('latepayer@example.com')).toBe('free');
    expect((await fetch(`${server.url}/api/v1/usage`, { headers: bearer(key) })).status).toBe(403);
    fake.updateSubscription(subId, { status: 'active' });
    expect(
      (await fake.deliver(fake.event('invoice.paid', { ...invoice, id: 'in_paid1', status: 'paid' }))).status,
    ).toBe(200);
    await server.billing?.settled();
    expect(await planOf('latepayer@example.com')).toBe('pro');
    expect((await fetch(`${server.url}/api/v1/usage`, { headers: bearer(key) })).status).toBe(200);
  });

  it('forged, unsigned and stale deliveries are refused with 400 and logged without secrets; nothing changes', async () => {
    const { subId } = await subscribe('target@example.com');
    fake.updateSubscription(subId, { status: 'canceled' });
    const event = fake.event('customer.subscription.deleted', fake.subscriptions.get(subId) ?? {});
    const refusedBefore = server.logLines.filter((l) => l.msg === 'stripe webhook refused').length;
    const forged = await fake.deliver(event, { secret: 'whsec_attackerGuess0123456789' });
    expect(forged.status).toBe(400);
    expect(await forged.json()).toMatchObject({
      error: { code: 'INVALID_REQUEST', message: expect.stringContaining('Stripe-Signature') },
    });
    const unsigned = await fetch(fake.webhookUrl ?? '', { method: 'POST', body: JSON.stringify(event) });
    expect(unsigned.status).toBe(400);
    const stale = await fake.deliver(event, { timestamp: Math.floor(clock / 1000) - 600 });
    expect(stale.status).toBe(400);
    const garbage = await fake.deliver(event, { signature: 't=1,v1=00' });
    expect(garbage.status).toBe(400);
    expect(await planOf('target@example.com')).toBe('pro');
    expect(await server.billing?.store.eventSeen(String(event.id))).toBe(false);
    const refused = server.logLines.filter((l) => l.msg === 'stripe webhook refused').slice(refusedBefore);
    expect(refused.map((l) => l.reason)).toEqual(['bad_signature', 'no_signature', 'stale', 'bad_signature']);
    const log = server.rawLog.join('');
    expect(log).not.toContain(WEBHOOK_SECRET);
    expect(log).not.toContain('whsec_attackerGuess');
    expect(log).not.toContain(SECRET_KEY);
    // The real delivery still works afterwards.
    expect((await fake.deliver(event)).status).toBe(200);
    await server.billing?.settled();
    expect(await planOf('target@example.com')).toBe('free');
  });

  it('an event whose handling fails (Stripe unreachable) stays in the inbox and the sweep applies it later', async () => {
    const { subId } = await subscribe('outage@example.com');
    fake.updateSubscription(subId, { status: 'canceled' });
    const deleted = fake.event('customer.subscription.deleted', fake.subscriptions.get(subId) ?? {});
    fake.failRequests = 1;
    const res = await fake.deliver(deleted);
    expect(await res.json()).toEqual({ received: true, outcome: 'queued' });
    await server.billing?.settled();
    expect(server.logLines.findLast((l) => l.event_id === deleted.id)).toMatchObject({
      msg: 'stripe event failed; the sweep retries it',
      attempts: 1,
    });
    expect(await planOf('outage@example.com')).toBe('pro');
    expect(await server.billing?.store.eventSeen(String(deleted.id))).toBe(false);
    // The failure is logged with Stripe's error, never the secret key the request carried.
    expect(server.rawLog.join('')).not.toContain(SECRET_KEY);
    // A redelivery by Stripe meanwhile is a copy of what the inbox holds.
    expect(await (await fake.deliver(deleted)).json()).toEqual({ received: true, outcome: 'duplicate' });
    // Not before its next try is due (a minute after the failure)…
    clock += 30_000;
    await server.billing?.sweep();
    expect(await planOf('outage@example.com')).toBe('pro');
    // …then handled once.
    clock += 120_000;
    await server.billing?.sweep();
    expect(await planOf('outage@example.com')).toBe('free');
    expect(server.logLines.findLast((l) => l.event_id === deleted.id)).toMatchObject({
      msg: 'stripe event',
      outcome: 'applied',
    });
    await server.billing?.sweep();
    expect(server.logLines.filter((l) => l.event_id === deleted.id && l.msg === 'stripe event')).toHaveLength(
      1,
    );
  });

  it('a late webhook: the success page reads the session back from Stripe and shows Pro; the events then change nothing wrong', async () => {
    const browser = await signUp(server, 'early@example.com');
    const res = await browser.submit('/account', '/account/billing/checkout', {});
    fake.holdEvents = true;
    try {
      const paid = await fetch(res.headers.get('location') ?? '', { method: 'POST', redirect: 'manual' });
      const back = new URL(paid.headers.get('location') ?? '');
      expect(await planOf('early@example.com')).toBe('free');
      // Someone else's session id is not read for this account.
      const other = [...fake.checkoutSessions.values()].find(
        (s) => s.customer !== fake.checkoutSessions.get(back.searchParams.get('session_id') ?? '')?.customer,
      );
      expect(other).toBeDefined();
      await browser.get(`/account/billing/success?session_id=${String(other?.id)}`);
      expect(await planOf('early@example.com')).toBe('free');
      expect(server.logLines.findLast((l) => l.msg === 'checkout synced on the success page')).toMatchObject({
        msg: 'checkout synced on the success page',
        outcome: 'not_found',
      });
      const landing = await (await browser.get(`${back.pathname}${back.search}`)).text();
      expect(landing).toContain('<strong id="plan-name">Pro</strong>');
      expect(landing).toMatch(/Active: renews on \d{4}-\d{2}-\d{2}\./);
    } finally {
      fake.holdEvents = false;
    }
    const late = await fake.flush();
    await server.billing?.settled();
    expect(late.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(await planOf('early@example.com')).toBe('pro');
  });

  it('a promo-code Pro needs no subscription: the page says where Pro comes from and offers none', async () => {
    const browser = await signUp(server, 'promo@example.com');
    await createPromoCode(server.db, { code: 'BILLING-PROMO', plan: 'pro', uses: 1 });
    expect((await browser.submit('/account', '/account/promo', { code: 'BILLING-PROMO' })).status).toBe(303);
    const html = await (await browser.get('/account')).text();
    expect(html).toContain('Pro through a promo code.');
    expect(html).toContain('a subscription is not needed');
    expect(html).not.toContain('id="subscribe"');
  });
});
