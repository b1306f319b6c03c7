/**
 * A loopback stand-in for the parts of Stripe's API this server uses — customers, Checkout Sessions,
 * Customer Portal sessions, subscriptions — following Stripe's documented wire contract (form-encoded
 * requests with bracketed keys, JSON objects with `id`/`object`, errors as `{error: {type, message}}`,
 * `Authorization: Bearer <secret key>`), reached by the real `stripe` package through its
 * host/port/protocol options. It also serves what Stripe hosts: a checkout page whose "Pay" makes
 * the subscription, and a portal page whose "Cancel plan" cancels it at period end, each sending the
 * webhook events Stripe would, signed with the package's own test-header helper. Test-only code.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

type Json = Record<string, unknown>;

export interface FakeStripeOptions {
  secretKey: string;
  webhookSecret: string;
  /** Where events go (the server's /webhooks/stripe); can be set later with `fake.webhookUrl = …`. */
  webhookUrl?: string;
  /** Length of a paid period, in seconds (default 30 days). */
  periodSeconds?: number;
  /** The clock of `created` and periods (Unix seconds); default the system clock. */
  now?: () => number;
}

export interface FakeStripe {
  url: string;
  api: { host: string; port: number; protocol: 'http' };
  webhookUrl: string | undefined;
  /** Every API request received: method, path and its decoded form fields. */
  requests: { method: string; path: string; form: Record<string, string> }[];
  customers: Map<string, Json>;
  subscriptions: Map<string, Json>;
  checkoutSessions: Map<string, Json>;
  /** An event as Stripe would send it (not delivered). */
  event(type: string, object: Json, created?: number): Json;
  /** POST an event to the webhook URL, signed (or with `signature` instead); the response. */
  deliver(
    event: Json,
    options?: { signature?: string; secret?: string; timestamp?: number },
  ): Promise<Response>;
  /** Every event made so far, in order. */
  events: Json[];
  /** The next this many API requests are answered 500 (with `Stripe-Should-Retry: false`): an outage. */
  failRequests: number;
  /** While true, events the hosted pages cause are held back (a late webhook); `flush()` sends them. */
  holdEvents: boolean;
  /** Deliver the held events, in order; their responses. */
  flush(): Promise<Response[]>;
  /** Change a subscription as Stripe would (e.g. past_due after a failed renewal). */
  updateSubscription(id: string, patch: Json): Json;
  close(): Promise<void>;
}

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('base64url').replace(/[-_]/g, 'x')}`;

async function readForm(req: IncomingMessage): Promise<Record<string, string>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
}

/** Bracketed form keys under `prefix` (`metadata[account_id]`) as an object. */
const under = (form: Record<string, string>, prefix: string): Record<string, string> =>
  Object.fromEntries(
    Object.entries(form)
      .filter(([k]) => k.startsWith(`${prefix}[`) && /^\[[^[\]]+\]$/.test(k.slice(prefix.length)))
      .map(([k, v]) => [k.slice(prefix.length + 1, -1), v]),
  );

const html = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title></head><body><h1>${title}</h1>${body}</body></html>`;

export async function startFakeStripe(options: FakeStripeOptions): Promise<FakeStripe> {
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  const period = options.periodSeconds ?? 30 * 86_400;
  const customers = new Map<string, Json>();
  const subscriptions = new Map<string, Json>();
  const checkoutSessions = new Map<string, Json>();
  const portalSessions = new Map<string, Json>();
  const requests: FakeStripe['requests'] = [];
  const events: Json[] = [];
  let base = '';

  const event = (type: string, object: Json, created = now()): Json => {
    const made = {
      id: id('evt'),
      object: 'event',
      api_version: Stripe.API_VERSION,
      created,
      data: { object: structuredClone(object) },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
    };
    events.push(made);
    return made;
  };

  const deliver: FakeStripe['deliver'] = async (ev, opts = {}) => {
    if (!fake.webhookUrl) throw new Error('fake stripe: no webhookUrl to deliver to');
    const payload = JSON.stringify(ev);
    const signature =
      opts.signature ??
      Stripe.webhooks.generateTestHeaderString({
        payload,
        secret: opts.secret ?? options.webhookSecret,
        timestamp: opts.timestamp ?? now(),
      });
    return fetch(fake.webhookUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      body: payload,
    });
  };

  /** Send events like Stripe: each must be answered 2xx (the tests' server is expected to). */
  const held: Json[] = [];
  const emit = async (...list: Json[]) => {
    if (fake.holdEvents) {
      held.push(...list);
      return;
    }
    for (const ev of list) {
      const res = await deliver(ev);
      if (!res.ok) throw new Error(`fake stripe: webhook answered ${res.status} to ${String(ev.type)}`);
    }
  };

  const makeSubscription = (customer: string, price: string, metadata: Record<string, string>): Json => {
    const start = now();
    const sub: Json = {
      id: id('sub'),
      object: 'subscription',
      customer,
      status: 'active',
      cancel_at_period_end: false,
      canceled_at: null,
      created: start,
      metadata,
      items: {
        object: 'list',
        data: [
          {
            id: id('si'),
            object: 'subscription_item',
            price: { id: price, object: 'price' },
            quantity: 1,
            current_period_start: start,
            current_period_end: start + period,
          },
        ],
      },
    };
    subscriptions.set(String(sub.id), sub);
    return sub;
  };

  const updateSubscription = (subId: string, patch: Json): Json => {
    const sub = subscriptions.get(subId);
    if (!sub) throw new Error(`fake stripe: no subscription ${subId}`);
    Object.assign(sub, patch);
    return sub;
  };

  const invoiceFor = (sub: Json, status: 'paid' | 'open'): Json => ({
    id: id('in'),
    object: 'invoice',
    customer: sub.customer,
    status,
    parent: {
      type: 'subscription_details',
      subscription_details: { subscription: sub.id, metadata: sub.metadata },
    },
  });

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json', 'request-id': id('req') });
    res.end(JSON.stringify(body));
  };
  const notFound = (res: ServerResponse, what: string) =>
    json(res, 404, {
      error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such ${what}` },
    });
  const page = (res: ServerResponse, body: string) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(body);
  };
  const redirect = (res: ServerResponse, to: string) => {
    res.writeHead(303, { location: to });
    res.end();
  };

  const api = async (req: IncomingMessage, res: ServerResponse, path: string) => {
    if (req.headers.authorization !== `Bearer ${options.secretKey}`) {
      return json(res, 401, {
        error: { type: 'invalid_request_error', message: 'Invalid API Key provided' },
      });
    }
    const form = req.method === 'POST' ? await readForm(req) : {};
    requests.push({ method: req.method ?? '', path, form });
    if (fake.failRequests > 0) {
      fake.failRequests--;
      res.writeHead(500, { 'content-type': 'application/json', 'stripe-should-retry': 'false' });
      return res.end(
        JSON.stringify({ error: { type: 'api_error', message: 'Something went wrong on our end.' } }),
      );
    }
    const parts = path.split('/').filter(Boolean); // ['v1', ...]
    const [, resource, second, third] = parts;
    if (req.method === 'POST' && resource === 'customers' && !second) {
      const customer = {
        id: id('cus'),
        object: 'customer',
        email: form.email ?? null,
        metadata: under(form, 'metadata'),
      };
      customers.set(customer.id, customer);
      return json(res, 200, customer);
    }
    if (req.method === 'GET' && resource === 'customers' && second) {
      const customer = customers.get(second);
      return customer ? json(res, 200, customer) : notFound(res, `customer: '${second}'`);
    }
    if (req.method === 'POST' && resource === 'checkout' && second === 'sessions' && !third) {
      if (!form.customer || !customers.has(form.customer))
        return notFound(res, `customer: '${form.customer}'`);
      const session: Json = {
        id: id('cs_test'),
        object: 'checkout.session',
        mode: form.mode,
        customer: form.customer,
        client_reference_id: form.client_reference_id ?? null,
        metadata: under(form, 'metadata'),
        subscription_metadata: under(form, 'subscription_data[metadata]'),
        price: form['line_items[0][price]'],
        status: 'open',
        payment_status: 'unpaid',
        subscription: null,
        success_url: form.success_url,
        cancel_url: form.cancel_url,
      };
      session.url = `${base}/c/pay/${String(session.id)}`;
      checkoutSessions.set(String(session.id), session);
      return json(res, 200, session);
    }
    if (req.method === 'GET' && resource === 'checkout' && second === 'sessions' && third) {
      const session = checkoutSessions.get(third);
      return session ? json(res, 200, session) : notFound(res, `checkout.session: '${third}'`);
    }
    if (req.method === 'POST' && resource === 'billing_portal' && second === 'sessions') {
      if (!form.customer || !customers.has(form.customer))
        return notFound(res, `customer: '${form.customer}'`);
      const session: Json = {
        id: id('bps'),
        object: 'billing_portal.session',
        customer: form.customer,
        return_url: form.return_url,
      };
      session.url = `${base}/p/session/${String(session.id)}`;
      portalSessions.set(String(session.id), session);
      return json(res, 200, session);
    }
    if (resource === 'subscriptions' && second) {
      const sub = subscriptions.get(second);
      if (!sub) return notFound(res, `subscription: '${second}'`);
      return json(res, 200, sub);
    }
    notFound(res, `route ${req.method} ${path}`);
  };

  const hosted = async (req: IncomingMessage, res: ServerResponse, path: string) => {
    // What a browser asks every site for; Stripe's pages have one.
    if (path === '/favicon.ico') {
      res.writeHead(204);
      return res.end();
    }
    const pay = /^\/c\/pay\/([^/]+)$/.exec(path);
    if (pay) {
      const session = checkoutSessions.get(pay[1] ?? '');
      if (!session) return notFound(res, 'checkout session');
      if (req.method === 'GET') {
        return page(
          res,
          html(
            'Fake Stripe Checkout',
            `<p>Compresso Pro (test mode)</p><form method="post"><button type="submit" id="pay">Pay and subscribe</button></form><p><a id="back" href="${String(session.cancel_url)}">Back</a></p>`,
          ),
        );
      }
      // Paid: the subscription exists, then the events Stripe sends, then back to the merchant.
      const sub = makeSubscription(
        String(session.customer),
        String(session.price),
        session.subscription_metadata as Record<string, string>,
      );
      Object.assign(session, { status: 'complete', payment_status: 'paid', subscription: sub.id });
      await emit(
        event('customer.subscription.created', sub),
        event('checkout.session.completed', session),
        event('invoice.paid', invoiceFor(sub, 'paid')),
      );
      return redirect(res, String(session.success_url).replace('{CHECKOUT_SESSION_ID}', String(session.id)));
    }
    const portal = /^\/p\/session\/([^/]+)(\/cancel)?$/.exec(path);
    if (portal) {
      const session = portalSessions.get(portal[1] ?? '');
      if (!session) return notFound(res, 'portal session');
      const subs = [...subscriptions.values()].filter(
        (s) => s.customer === session.customer && s.status !== 'canceled',
      );
      if (req.method === 'GET') {
        return page(
          res,
          html(
            'Fake Stripe customer portal',
            `<p>${subs.length} subscription(s)</p>${subs.length ? `<form method="post" action="/p/session/${String(session.id)}/cancel"><button type="submit" id="cancel-plan">Cancel plan</button></form>` : ''}<p><a id="return" href="${String(session.return_url)}">Return to Compresso</a></p>`,
          ),
        );
      }
      for (const sub of subs) {
        Object.assign(sub, { cancel_at_period_end: true, canceled_at: now() });
        await emit(event('customer.subscription.updated', sub));
      }
      return redirect(res, String(session.return_url));
    }
    notFound(res, path);
  };

  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    (path.startsWith('/v1/') ? api(req, res, path) : hosted(req, res, path)).catch((err: unknown) => {
      if (!res.headersSent) json(res, 500, { error: { type: 'api_error', message: String(err) } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;
  const fake: FakeStripe = {
    url: base,
    api: { host: '127.0.0.1', port, protocol: 'http' },
    webhookUrl: options.webhookUrl,
    requests,
    customers,
    subscriptions,
    checkoutSessions,
    event,
    deliver,
    events,
    holdEvents: false,
    failRequests: 0,
    async flush() {
      const out: Response[] = [];
      for (const ev of held.splice(0)) out.push(await deliver(ev));
      return out;
    },
    updateSubscription,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return fake;
}
