import {
  type ApiKeyView,
  applyPromo,
  createApiKey,
  listApiKeys,
  MAX_KEY_NAME,
  nextReset,
  planOf,
  quotaDay,
  revokeApiKey,
  secondsUntilReset,
} from '@compresso/runtime';
import { isCompressoError } from '@compresso/schema';
import type express from 'express';
import type { Request, Response } from 'express';
import { billingSection } from './account-billing.ts';
import type { AccountPages } from './account-pages.ts';
import { clientAddress, csrfInput, type Fields, field, minutes, str } from './forms.ts';
import { escapeHtml, page, sendPage } from './layout.ts';
import { sessionOf, type WebSession } from './session.ts';
import { accountSubject, admit, networkSubject, PROMO_ACCOUNT, PROMO_NETWORK } from './throttle.ts';

/** One answer for every promo code that does not work: which of them it was would help a guesser. */
export const PROMO_REFUSED =
  'This code does not work. Check it and try again: it may also have expired or been used up.';

function describeReset(seconds: number): string {
  const hours = Math.floor(seconds / 3600);
  const mins = Math.ceil((seconds % 3600) / 60);
  return hours > 0 ? `${hours} h ${mins} min` : `${mins} min`;
}

/** Fixed texts for ?notice=…, so the query string can never put words on the page. */
const NOTICES: Record<string, string> = {
  welcome: 'Welcome! Your account is ready. Activate Pro with a promo code to use the API.',
  pro: 'The Pro plan is active on this account.',
  revoked: 'The key is revoked: requests with it now get 401.',
  password: 'Your password is set, and every other session of this account is signed out.',
  'logged-in': 'You are logged in.',
};

/** The account area: plan and usage, promo codes, and API keys (made, shown once, revoked). */
export function accountAreaRoutes(router: express.Router, pages: AccountPages): void {
  const { db, logger, config, clock, sessions, guarded } = pages;
  interface AccountView {
    notice?: string;
    errors?: Fields;
    values?: Fields;
    newKey?: { name: string; secret: string };
    status?: number;
  }

  const accountPage = async (req: Request, res: Response, session: WebSession, view: AccountView = {}) => {
    const account = (await db.findAccountById(session.account.id)) ?? session.account;
    const plan = planOf(account.plan, config);
    const now = clock();
    const used = await db.usageOn(account.id, quotaDay(now));
    const keys = await listApiKeys(db, account.id);
    const errors = view.errors ?? {};
    const csrf = session.csrfToken;
    const resetText = `Resets at 00:00 UTC (${nextReset(now).toISOString().replace('.000Z', 'Z')}, in ${describeReset(secondsUntilReset(now))}).`;
    const usage = plan.api
      ? `<p id="usage-text"><strong id="usage-used">${used}</strong> used of <strong id="usage-limit">${plan.dailyRequests}</strong> requests today.</p>
<meter id="usage-meter" min="0" max="${plan.dailyRequests}" low="${Math.floor(plan.dailyRequests * 0.8)}" high="${Math.floor(plan.dailyRequests * 0.95)}" optimum="0" value="${used}" aria-labelledby="usage-text">${used} of ${plan.dailyRequests}</meter>
<p class="hint">${escapeHtml(resetText)} Your API keys and the compressor page share this quota.</p>`
      : `<p id="usage-text">The free plan has no API requests (<strong id="usage-used">${used}</strong> used of <strong id="usage-limit">0</strong>). Activate Pro below for ${config.proDailyLimit} a day.</p>`;

    const promo = `<section aria-labelledby="promo-title" class="panel">
<h2 id="promo-title">Promo code</h2>
${plan.api ? '<p>Pro is active. Another code changes nothing unless it is for a different plan.</p>' : '<p>Enter a promo code to activate the Pro plan.</p>'}
<form method="post" action="/account/promo" class="stack" novalidate>
  ${csrfInput(csrf)}
  ${field({ name: 'code', label: 'Promo code', value: view.values?.code ?? '', error: errors.code, autocomplete: 'off', maxlength: 64 })}
  <div><button type="submit">Activate</button></div>
</form>
</section>`;

    const newKey = view.newKey
      ? `<div class="panel notice" role="status" aria-labelledby="new-key-title">
<h3 id="new-key-title">Your new key “${escapeHtml(view.newKey.name)}”</h3>
<p><strong>Copy it now: it is shown only this once.</strong> We keep only a hash, so nobody can show it again.</p>
<div class="secret-box">
  <label for="new-key-secret" class="visually-hidden">New API key</label>
  <input id="new-key-secret" type="text" readonly value="${escapeHtml(view.newKey.secret)}" autocomplete="off" spellcheck="false">
  <button type="button" id="copy-key" data-copy="new-key-secret">Copy</button>
</div>
<p id="copy-status" class="hint" role="status" aria-live="polite"></p>
<p class="hint">Try it: <code>curl -F file=@photo.jpg -H "Authorization: Bearer YOUR_KEY" ${escapeHtml(`${config.publicUrl ?? `${req.protocol}://${req.get('host') ?? 'localhost'}`}/api/v1/compress`)} -o photo-small.jpg</code></p>
</div>`
      : '';

    const keyRows = keys
      .map(
        (k: ApiKeyView) => `<tr>
  <td>${escapeHtml(k.name)}</td>
  <td class="prefix"><code>${escapeHtml(k.prefix)}…</code></td>
  <td><time datetime="${escapeHtml(k.created_at)}">${escapeHtml(k.created_at.slice(0, 16).replace('T', ' '))}</time></td>
  <td>${k.last_used_at ? `<time datetime="${escapeHtml(k.last_used_at)}">${escapeHtml(k.last_used_at.slice(0, 16).replace('T', ' '))}</time>` : 'never'}</td>
  <td><a href="/account/keys/${encodeURIComponent(k.id)}/revoke" aria-label="Revoke key ${escapeHtml(k.name)}">Revoke…</a></td>
</tr>`,
      )
      .join('\n');

    const keysSection = `<section aria-labelledby="keys-title" class="panel">
<h2 id="keys-title">API keys</h2>
${newKey}
${plan.api ? '' : '<p>Keys work once the Pro plan is active.</p>'}
<form method="post" action="/account/keys" class="stack" novalidate>
  ${csrfInput(csrf)}
  ${field({ name: 'name', label: 'Key name', value: view.values?.name ?? '', error: errors.name, hint: 'Where you will use it, e.g. “laptop” or “shop backend”.', autocomplete: 'off', maxlength: MAX_KEY_NAME, required: false })}
  <div><button type="submit"${plan.api ? '' : ' disabled'}>Generate API Key</button></div>
</form>
${
  keys.length
    ? `<div class="table-wrap"><table class="keys-table">
<caption class="visually-hidden">Your active API keys</caption>
<thead><tr><th scope="col">Name</th><th scope="col" class="prefix">Starts with</th><th scope="col">Created (UTC)</th><th scope="col">Last used (UTC)</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${keyRows}
</tbody>
</table></div>`
    : '<p id="no-keys">No active keys.</p>'
}
</section>`;

    const notice = view.notice ? `<p class="notice" role="status">${escapeHtml(view.notice)}</p>` : '';
    const billing = pages.billing
      ? billingSection(
          await pages.billing.store.billingOf(account.id, now.toISOString()),
          csrf,
          now.toISOString(),
        )
      : '';
    sendPage(
      res,
      page({
        title: 'Account',
        current: 'account',
        session: { ...session, account },
        scripts: ['/static/account.js'],
        body: `<h1>Your account</h1>
${notice}
<section aria-labelledby="plan-title" class="panel">
<h2 id="plan-title">Plan: <span id="plan-name">${plan.id === 'pro' ? 'Pro' : 'Free'}</span></h2>
${usage}
</section>
${billing}
${promo}
${keysSection}`,
      }),
      view.status ?? 200,
      pages.billing ? { formActionOrigins: pages.billing.redirectOrigins } : {},
    );
  };

  router.get('/account', sessions.requireSession, async (req, res) => {
    const notice = typeof req.query.notice === 'string' ? NOTICES[req.query.notice] : undefined;
    await accountPage(req, res, sessionOf(res) as WebSession, notice ? { notice } : {});
  });

  router.post('/account/promo', sessions.requireSession, ...guarded, async (req, res) => {
    const session = sessionOf(res) as WebSession;
    const code = str(req.body, 'code').trim();
    if (!code)
      return accountPage(req, res, session, { errors: { code: 'Enter a promo code.' }, status: 400 });
    // Guessing a code is a search: every try is counted first, per account and per network.
    const admission = await admit(
      db,
      [
        { subject: accountSubject(session.account.id, 'promo'), rule: PROMO_ACCOUNT },
        { subject: networkSubject(clientAddress(req), 'promo'), rule: PROMO_NETWORK },
      ],
      clock(),
    );
    if (!admission.allowed) {
      res.setHeader('Retry-After', String(Math.ceil(admission.waitMs / 1000)));
      return accountPage(req, res, session, {
        errors: { code: `Too many codes tried. Try again in ${minutes(admission.waitMs)}.` },
        values: { code },
        status: 429,
      });
    }
    try {
      await applyPromo(db, session.account.id, code, clock());
    } catch (error) {
      if (!isCompressoError(error) || error.status >= 500) throw error;
      // Unknown, expired, used up, already redeemed: one answer, so a guesser learns nothing from it.
      return accountPage(req, res, session, {
        errors: { code: PROMO_REFUSED },
        values: { code },
        status: 400,
      });
    }
    await admission.refund();
    logger.info({ account_id: session.account.id }, 'promo code redeemed on the web');
    res.redirect(303, '/account?notice=pro');
  });

  router.post('/account/keys', sessions.requireSession, ...guarded, async (req, res) => {
    const session = sessionOf(res) as WebSession;
    const name = str(req.body, 'name').trim();
    const account = await db.findAccountById(session.account.id);
    if (!account || !planOf(account.plan, config).api) {
      return accountPage(req, res, session, {
        errors: { name: 'Activate the Pro plan first: API keys work only with it.' },
        values: { name },
        status: 403,
      });
    }
    try {
      const { key, secret } = await createApiKey(db, account.id, name);
      logger.info({ account_id: account.id, key_id: key.id }, 'api key created on the web');
      // Rendered in this response, never stored or redirected: the secret exists only on this page.
      await accountPage(req, res, session, { newKey: { name: key.name, secret }, status: 201 });
    } catch (error) {
      if (!isCompressoError(error) || error.status >= 500) throw error;
      await accountPage(req, res, session, {
        errors: { name: error.message },
        values: { name },
        status: error.status,
      });
    }
  });

  const keyNotFound = (res: Response, session: WebSession) =>
    sendPage(
      res,
      page({
        title: 'Key not found',
        session,
        body: `<h1>No such key</h1>
<p class="alert" role="alert">This account has no active key with that id.</p>
<p><a href="/account">Back to your account</a></p>`,
      }),
      404,
    );

  router.get('/account/keys/:id/revoke', sessions.requireSession, async (req, res) => {
    const session = sessionOf(res) as WebSession;
    const id = String(req.params.id);
    const key = (await listApiKeys(db, session.account.id)).find((k) => k.id === id);
    if (!key) return keyNotFound(res, session);
    sendPage(
      res,
      page({
        title: 'Revoke key',
        current: 'account',
        session,
        body: `<h1>Revoke the key “${escapeHtml(key.name)}”?</h1>
<p>It starts with <code>${escapeHtml(key.prefix)}</code>. Programs using it get 401 from the next request on. This cannot be undone; you can generate a new key.</p>
<form method="post" action="/account/keys/${encodeURIComponent(key.id)}/revoke">
  ${csrfInput(session.csrfToken)}
  <button type="submit" class="danger">Revoke key</button>
  <a class="button secondary" href="/account">Cancel</a>
</form>`,
      }),
    );
  });

  router.post('/account/keys/:id/revoke', sessions.requireSession, ...guarded, async (req, res) => {
    const session = sessionOf(res) as WebSession;
    const id = String(req.params.id);
    try {
      // Scoped to this account: another account's key id answers the same 404 as an unknown one.
      await revokeApiKey(db, id, session.account.id);
    } catch (error) {
      if (isCompressoError(error) && error.code === 'NOT_FOUND') return keyNotFound(res, session);
      throw error;
    }
    logger.info({ account_id: session.account.id, key_id: id }, 'api key revoked on the web');
    res.redirect(303, '/account?notice=revoked');
  });
}
