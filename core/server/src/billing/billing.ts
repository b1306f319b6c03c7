import {
  type Account,
  type ApplyOutcome,
  type BillingStore,
  billingStore,
  type Config,
  type Database,
  type Logger,
  SUBSCRIPTION_STATUSES,
  type SubscriptionSnapshot,
  type SubscriptionStatus,
} from '@compresso/runtime';
import type Stripe from 'stripe';

/** Where the Stripe client sends its requests: api.stripe.com by default, a loopback fake in tests. */
export interface StripeApi {
  host: string;
  port: number;
  protocol: 'http' | 'https';
}

export interface BillingOptions {
  /** Another Stripe API address (the tests' fake). */
  api?: StripeApi;
  /**
   * Origins the account page's forms may be redirected to (its CSP form-action): Stripe Checkout
   * and the Customer Portal. Default Stripe's own; the tests' fake serves both pages itself.
   */
  redirectOrigins?: string[];
}

export const STRIPE_REDIRECT_ORIGINS = ['https://checkout.stripe.com', 'https://billing.stripe.com'];

/** What the webhook did with one event, for the log and the answer. */
export type EventOutcome = ApplyOutcome | 'ignored' | 'not_ours' | 'unknown_account';

/** Paid Pro through Stripe: present only when the three STRIPE_* settings are. */
export interface Billing {
  store: BillingStore;
  redirectOrigins: string[];
  /** The Stripe client (loaded on first use: the package is only needed when payments are on). */
  stripe(): Promise<Stripe>;
  /** A Checkout Session for the Pro price; its URL. The account's customer is made once and reused. */
  checkoutUrl(account: Account, baseUrl: string): Promise<string>;
  /** A Customer Portal session; its URL. Undefined for an account that never had a customer. */
  portalUrl(account: Account, baseUrl: string): Promise<string | undefined>;
  /** Verify a webhook delivery (raw body and Stripe-Signature header); throws when it is not Stripe's. */
  verify(body: Buffer, signature: string): Promise<Stripe.Event>;
  /** Keep a verified event in the inbox; false for a redelivery of one received before. */
  receive(event: Stripe.Event): Promise<boolean>;
  /** Handle a received event after the answer (in this process); a failure is retried by the sweep. */
  enqueue(event: Stripe.Event, requestId?: string): void;
  /** Resolves once every event this process is handling is done (for tests and shutdown). */
  settled(): Promise<void>;
  /** Handle one event now: read the subscription back from Stripe, apply it. */
  handle(event: Stripe.Event): Promise<{ outcome: EventOutcome; accountId?: string }>;
  /**
   * On the success page: read the finished Checkout Session and its subscription back from Stripe
   * and apply them, so the buyer sees Pro even when the webhook is late. Only for this account's own
   * session, and only while no event of that subscription has been applied (any event wins over it).
   */
  syncCheckout(account: Account, sessionId: string): Promise<EventOutcome | 'not_found'>;
  /**
   * The sweep: handle inbox events whose first try failed or never ran (the process stopped), then
   * drop paid Pro whose grace or cancelled period ran out. The accounts whose plan it ended.
   */
  sweep(): Promise<string[]>;
}

const DAY_MS = 86_400_000;
/** Stripe's default tolerance: a signed delivery older than this is refused as a replay. */
export const SIGNATURE_TOLERANCE_S = 300;

/** The subscription id an event is about, or undefined for events that change no subscription. */
function subscriptionOf(event: Stripe.Event): string | undefined {
  const object = event.data.object as unknown as Record<string, unknown>;
  const idOf = (value: unknown) =>
    typeof value === 'string' ? value : ((value as { id?: string } | null)?.id ?? undefined);
  switch (event.type) {
    case 'checkout.session.completed':
      return object.mode === 'subscription' ? idOf(object.subscription) : undefined;
    case 'customer.subscription.created':
    case 'customer.subscription.updated':
    case 'customer.subscription.deleted':
      return idOf(object.id);
    case 'invoice.paid':
    case 'invoice.payment_failed': {
      // API versions since 2025-03 put it under parent.subscription_details; older ones on the invoice.
      const parent = object.parent as { subscription_details?: { subscription?: unknown } } | null;
      return idOf(parent?.subscription_details?.subscription) ?? idOf(object.subscription);
    }
    default:
      return undefined;
  }
}

export function createBilling(
  deps: { db: Database; logger: Logger; config: Config; now: () => Date },
  options: BillingOptions = {},
): Billing | undefined {
  const { db, logger, config, now } = deps;
  const { stripeSecretKey: secretKey, stripeWebhookSecret: webhookSecret, stripePricePro: price } = config;
  if (!secretKey || !webhookSecret || !price) return undefined;
  const store = billingStore(db);
  let client: Promise<Stripe> | undefined;
  const stripe = () => {
    client ??= import('stripe').then(
      ({ default: StripeClass }) =>
        new StripeClass(secretKey, {
          maxNetworkRetries: 2,
          timeout: 10_000,
          ...(options.api ?? {}),
        }),
    );
    return client;
  };

  const customerOf = async (account: Account): Promise<string> => {
    const known = await store.findCustomer(account.id);
    if (known) return known.customerId;
    const api = await stripe();
    // The idempotency key makes two clicks at once one customer at Stripe too.
    const customer = await api.customers.create(
      { email: account.email, metadata: { account_id: account.id } },
      { idempotencyKey: `compresso-customer-${account.id}` },
    );
    return (await store.linkCustomer(account.id, customer.id, now().toISOString())).customerId;
  };

  const snapshotOf = async (
    sub: Stripe.Subscription,
  ): Promise<SubscriptionSnapshot | 'not_ours' | 'unknown_account'> => {
    const item = sub.items.data.find((i) => i.price.id === price);
    if (!item) return 'not_ours';
    const customerId = typeof sub.customer === 'string' ? sub.customer : sub.customer.id;
    const accountId = (await store.findCustomerById(customerId))?.accountId ?? sub.metadata?.account_id;
    if (!accountId || !(await db.findAccountById(accountId))) return 'unknown_account';
    const status = (SUBSCRIPTION_STATUSES as readonly string[]).includes(sub.status)
      ? (sub.status as SubscriptionStatus)
      : 'incomplete';
    return {
      id: sub.id,
      customerId,
      accountId,
      status,
      priceId: item.price.id,
      currentPeriodEnd: item.current_period_end
        ? new Date(item.current_period_end * 1000).toISOString()
        : null,
      cancelAtPeriodEnd: sub.cancel_at_period_end,
    };
  };

  const handle: Billing['handle'] = async (event) => {
    const at = now().toISOString();
    const subscriptionId = subscriptionOf(event);
    if (!subscriptionId) {
      await store.recordEvent(event.id, event.type, at);
      return { outcome: 'ignored' };
    }
    // A redelivery costs no API call.
    if (await store.eventSeen(event.id)) return { outcome: 'duplicate' };
    if (event.type === 'checkout.session.completed') {
      const session = event.data.object as Stripe.Checkout.Session;
      const accountId = session.metadata?.account_id ?? session.client_reference_id;
      const customerId = typeof session.customer === 'string' ? session.customer : session.customer?.id;
      if (accountId && customerId && (await db.findAccountById(accountId)))
        await store.linkCustomer(accountId, customerId, at);
    }
    // The subscription as Stripe has it now, not as the event carried it: events arrive late,
    // twice and out of order, and the newest state is what counts.
    const sub = await (await stripe()).subscriptions.retrieve(subscriptionId);
    const snapshot = await snapshotOf(sub);
    if (typeof snapshot === 'string') {
      await store.recordEvent(event.id, event.type, at);
      return { outcome: snapshot };
    }
    const outcome = await store.applySubscription({
      eventId: event.id,
      eventType: event.type,
      eventAt: event.created,
      snapshot,
      now: at,
      graceMs: config.billingGraceDays * DAY_MS,
    });
    return { outcome, accountId: snapshot.accountId };
  };

  const inFlight = new Set<Promise<void>>();
  /** One try of a received event; a failure leaves it in the inbox for a later sweep. */
  const attempt = async (event: Stripe.Event, attempts: number, requestId?: string) => {
    try {
      const { outcome, accountId } = await handle(event);
      logger.info(
        { request_id: requestId, event_id: event.id, event_type: event.type, outcome, account_id: accountId },
        'stripe event',
      );
    } catch (err) {
      // Backoff: 1, 2, 4 … minutes, at most an hour (Stripe itself stops after 3 days).
      const delayMs = Math.min(60, 2 ** attempts) * 60_000;
      await store
        .deferEvent(event.id, new Date(now().getTime() + delayMs).toISOString())
        .catch((deferErr: unknown) =>
          logger.error({ err: deferErr, event_id: event.id }, 'stripe event not deferred'),
        );
      logger.error(
        { err, event_id: event.id, event_type: event.type, attempts: attempts + 1 },
        'stripe event failed; the sweep retries it',
      );
    }
  };
  const track = (work: Promise<void>) => {
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };

  return {
    store,
    redirectOrigins: options.redirectOrigins ?? STRIPE_REDIRECT_ORIGINS,
    async receive(event) {
      return store.receiveEvent(event.id, event.type, JSON.stringify(event), now().toISOString());
    },
    enqueue(event, requestId) {
      track(attempt(event, 0, requestId));
    },
    async settled() {
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
    stripe,
    async checkoutUrl(account, baseUrl) {
      const customer = await customerOf(account);
      const session = await (await stripe()).checkout.sessions.create({
        mode: 'subscription',
        customer,
        client_reference_id: account.id,
        line_items: [{ price, quantity: 1 }],
        metadata: { account_id: account.id },
        subscription_data: { metadata: { account_id: account.id } },
        success_url: `${baseUrl}/account/billing/success?session_id={CHECKOUT_SESSION_ID}`,
        cancel_url: `${baseUrl}/account/billing/cancel`,
      });
      if (!session.url) throw new Error('Stripe returned a Checkout Session without a URL');
      return session.url;
    },
    async portalUrl(account, baseUrl) {
      const customer = await store.findCustomer(account.id);
      if (!customer) return undefined;
      const session = await (await stripe()).billingPortal.sessions.create({
        customer: customer.customerId,
        return_url: `${baseUrl}/account`,
      });
      return session.url;
    },
    async verify(body, signature) {
      const api = await stripe();
      return api.webhooks.constructEvent(
        body,
        signature,
        webhookSecret,
        SIGNATURE_TOLERANCE_S,
        undefined,
        // Milliseconds: the package divides by 1000. The app's clock, so a test's clock is honoured.
        now().getTime(),
      );
    },
    handle,
    async syncCheckout(account, sessionId) {
      const customer = await store.findCustomer(account.id);
      if (!customer || !/^cs_[A-Za-z0-9_]{1,200}$/.test(sessionId)) return 'not_found';
      const api = await stripe();
      const session = await api.checkout.sessions.retrieve(sessionId);
      const sessionCustomer = typeof session.customer === 'string' ? session.customer : session.customer?.id;
      const subscriptionId =
        typeof session.subscription === 'string' ? session.subscription : session.subscription?.id;
      if (sessionCustomer !== customer.customerId || session.status !== 'complete' || !subscriptionId)
        return 'not_found';
      const snapshot = await snapshotOf(await api.subscriptions.retrieve(subscriptionId));
      if (typeof snapshot === 'string') return snapshot;
      // eventAt 0: older than any real event, so a webhook already applied (or arriving later) wins.
      return store.applySubscription({
        eventId: `sync_${session.id}`,
        eventType: 'checkout.session.synced',
        eventAt: 0,
        snapshot,
        now: now().toISOString(),
        graceMs: config.billingGraceDays * DAY_MS,
      });
    },
    async sweep() {
      // Only events whose first try had a minute: younger ones are still being handled in-process.
      const due = new Date(now().getTime() - 60_000).toISOString();
      for (const pending of await store.pendingEvents(due, 100)) {
        let event: Stripe.Event;
        try {
          event = JSON.parse(pending.payload) as Stripe.Event;
        } catch (err) {
          logger.error({ err, event_id: pending.id }, 'stripe event in the inbox is not JSON; dropped');
          await store.recordEvent(pending.id, pending.type, now().toISOString());
          continue;
        }
        await attempt(event, pending.attempts);
      }
      await store.pruneEvents(new Date(now().getTime() - 30 * DAY_MS).toISOString());
      const changed = await store.expire(now().toISOString());
      for (const accountId of changed)
        logger.info({ account_id: accountId }, 'paid plan ended (grace or cancelled period over)');
      return changed;
    },
  };
}

/** Run the sweep every `intervalMs` (unref'd); the returned function stops it. */
export function startBillingSweep(billing: Billing, logger: Logger, intervalMs = 60_000): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    billing
      .sweep()
      .catch((err: unknown) => logger.error({ err }, 'billing sweep failed'))
      .finally(() => {
        running = false;
      });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
