import { type Account, type BillingView, describeSubscription } from '@compresso/runtime';
import type express from 'express';
import type { Request, Response } from 'express';
import type { Billing } from '../billing/billing.ts';
import type { AccountPages } from './account-pages.ts';
import { csrfInput } from './forms.ts';
import { escapeHtml, page, sendPage } from './layout.ts';
import { sessionOf, type WebSession } from './session.ts';

/** The account page's subscription panel. */
export function billingSection(view: BillingView, csrf: string, now: string): string {
  const paid = view.sources.includes('subscription');
  const promo = view.sources.includes('promo');
  const source =
    paid && promo
      ? 'your subscription and a promo code'
      : paid
        ? 'your subscription'
        : promo
          ? 'a promo code'
          : '';
  const subscribe = paid
    ? ''
    : promo
      ? '<p class="hint">A promo code already gives this account Pro; a subscription is not needed.</p>'
      : `<form method="post" action="/account/billing/checkout">
  ${csrfInput(csrf)}
  <button type="submit" id="subscribe">Subscribe to Pro</button>
</form>`;
  const manage = view.customerId
    ? `<form method="post" action="/account/billing/portal">
  ${csrfInput(csrf)}
  <button type="submit" id="manage-billing" class="secondary">Manage billing</button>
</form>`
    : '';
  return `<section aria-labelledby="billing-title" class="panel">
<h2 id="billing-title">Subscription</h2>
<p id="subscription-state">${escapeHtml(describeSubscription(view.subscription, now))}</p>
${source ? `<p id="plan-source">Pro through ${escapeHtml(source)}.</p>` : ''}
${subscribe}
${manage}
</section>`;
}

/** Checkout, the Customer Portal, and the pages Stripe sends people back to. */
export function billingPageRoutes(router: express.Router, pages: AccountPages, billing: Billing): void {
  const { db, logger, sessions, guarded, clock } = pages;

  const unavailable = (res: Response, session: WebSession, err: unknown) => {
    // The provider's message can name internals; the log gets it, the person a plain sentence.
    logger.error({ err, account_id: session.account.id }, 'stripe request failed');
    sendPage(
      res,
      page({
        title: 'Payments unavailable',
        session,
        body: `<h1>Payments are unavailable right now</h1>
<p class="alert" role="alert">The payment provider did not answer. Nothing was charged; try again in a minute.</p>
<p><a href="/account">Back to your account</a></p>`,
      }),
      503,
    );
  };

  const current = async (session: WebSession): Promise<Account> =>
    (await db.findAccountById(session.account.id)) ?? session.account;

  router.post(
    '/account/billing/checkout',
    sessions.requireSession,
    ...guarded,
    async (req: Request, res: Response) => {
      const session = sessionOf(res) as WebSession;
      const account = await current(session);
      const view = await billing.store.billingOf(account.id, clock().toISOString());
      // Already paying: a second subscription would charge twice.
      if (view.sources.includes('subscription')) return res.redirect(303, '/account');
      let url: string;
      try {
        url = await billing.checkoutUrl(account, pages.baseUrl(req));
      } catch (err) {
        return unavailable(res, session, err);
      }
      logger.info({ account_id: account.id }, 'checkout started');
      res.redirect(303, url);
    },
  );

  router.post(
    '/account/billing/portal',
    sessions.requireSession,
    ...guarded,
    async (req: Request, res: Response) => {
      const session = sessionOf(res) as WebSession;
      let url: string | undefined;
      try {
        url = await billing.portalUrl(await current(session), pages.baseUrl(req));
      } catch (err) {
        return unavailable(res, session, err);
      }
      res.redirect(303, url ?? '/account');
    },
  );

  const landing =
    (title: string, text: string, sync = false) =>
    async (req: Request, res: Response) => {
      const session = sessionOf(res) as WebSession;
      let account = await current(session);
      const sessionId = typeof req.query.session_id === 'string' ? req.query.session_id : '';
      if (sync && sessionId && account.plan !== 'pro') {
        try {
          const outcome = await billing.syncCheckout(account, sessionId);
          logger.info({ account_id: account.id, outcome }, 'checkout synced on the success page');
          account = await current(session);
        } catch (err) {
          // The webhook still brings the change; the page says to reload.
          logger.warn({ err, account_id: account.id }, 'checkout sync failed');
        }
      }
      const view = await billing.store.billingOf(account.id, clock().toISOString());
      sendPage(
        res,
        page({
          title,
          current: 'account',
          session: { ...session, account },
          body: `<h1>${escapeHtml(title)}</h1>
<p>${escapeHtml(text)}</p>
<p>Plan: <strong id="plan-name">${account.plan === 'pro' ? 'Pro' : 'Free'}</strong>. <span id="subscription-state">${escapeHtml(describeSubscription(view.subscription, clock().toISOString()))}</span></p>
<p><a href="/account" id="back-to-account">Go to your account</a></p>`,
        }),
      );
    };
  router.get(
    '/account/billing/success',
    sessions.requireSession,
    landing(
      'Thank you',
      'Your payment went through. The Pro plan is active as soon as Stripe confirms it, usually within seconds; reload if it still says Free.',
      true,
    ),
  );
  router.get(
    '/account/billing/cancel',
    sessions.requireSession,
    landing('No payment made', 'You left the checkout: nothing was charged. You can subscribe any time.'),
  );
}
