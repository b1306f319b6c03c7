import type express from 'express';
import type { Request, Response } from 'express';
import type { AccountPages } from './account-pages.ts';
import { clientAddress, csrfInput, type Fields, field, minutes, str } from './forms.ts';
import { escapeHtml, page, sendPage } from './layout.ts';
import { decoyHash, MAX_PASSWORD_LENGTH, verifyPassword } from './passwords.ts';
import { sessionOf } from './session.ts';
import {
  admit,
  emailSubject,
  KNOWN_NETWORK_MS,
  LOGIN_EMAIL,
  LOGIN_NETWORK,
  LOGIN_PAIR,
  networkSubject,
  pairSubject,
} from './throttle.ts';

/** Log-in (throttled per email, network and pair before the password is checked) and log-out. */
export function loginRoutes(router: express.Router, pages: AccountPages): void {
  const { db, clock, sessions, guarded } = pages;
  const loginPage = async (
    req: Request,
    res: Response,
    values: Fields = {},
    errors: Fields = {},
    status = 200,
  ) => {
    const token = await sessions.csrfToken(req, res);
    sendPage(
      res,
      page({
        title: 'Log in',
        current: 'login',
        session: sessionOf(res),
        body: `<h1>Log in</h1>
${errors.form ? `<p class="alert" role="alert" id="login-error">${escapeHtml(errors.form)}</p>` : ''}
<form method="post" action="/login" class="stack" novalidate${errors.form ? ' aria-describedby="login-error"' : ''}>
  ${csrfInput(token)}
  ${field({ name: 'email', label: 'Email', type: 'email', value: values.email ?? '', error: errors.email, autocomplete: 'username', maxlength: 254 })}
  ${field({ name: 'password', label: 'Password', type: 'password', error: errors.password, autocomplete: 'current-password', maxlength: MAX_PASSWORD_LENGTH })}
  <div><button type="submit">Log in</button></div>
</form>
<p><a href="/reset">Forgot your password, or never set one?</a> · <a href="/signup">Create an account</a></p>`,
      }),
      status,
    );
  };

  router.get('/login', async (req, res) => {
    if (sessionOf(res)) return res.redirect(303, '/account');
    await loginPage(req, res);
  });

  router.post('/login', ...guarded, async (req, res) => {
    const email = str(req.body, 'email').trim();
    const password = str(req.body, 'password');
    const errors: Fields = {};
    if (!email) errors.email = 'Enter your email address.';
    if (!password) errors.password = 'Enter your password.';
    if (password.length > MAX_PASSWORD_LENGTH) errors.password = 'That is longer than any password here.';
    if (Object.keys(errors).length) return loginPage(req, res, { email }, errors, 400);

    const address = clientAddress(req);
    const now = clock();
    const pair = pairSubject(email, address);
    // A network this email signed in from lately is spared the email's lock (its own pair still
    // backs off): an attack from elsewhere cannot lock the owner out.
    const known = await db.knownLoginNetwork(
      pairSubject(email, address, 'known'),
      new Date(now.getTime() - KNOWN_NETWORK_MS).toISOString(),
    );
    const admission = await admit(
      db,
      [
        { subject: pair, rule: LOGIN_PAIR },
        { subject: networkSubject(address), rule: LOGIN_NETWORK },
        ...(known ? [] : [{ subject: emailSubject(email), rule: LOGIN_EMAIL }]),
      ],
      now,
    );
    if (!admission.allowed) {
      res.setHeader('Retry-After', String(Math.ceil(admission.waitMs / 1000)));
      return loginPage(
        req,
        res,
        { email },
        {
          form: `Too many failed log-ins. Try again in ${minutes(admission.waitMs)}, or reset your password.`,
        },
        429,
      );
    }
    const account = await db.findAccountByEmail(email);
    const stored = account ? await db.findPasswordHash(account.id) : undefined;
    // Unknown emails and accounts without a password cost the same scrypt work as a wrong password.
    const matches = await verifyPassword(password, stored ?? (await decoyHash()));
    if (!account || stored === undefined || !matches) {
      // The attempt stays counted: that is the whole throttle.
      return loginPage(req, res, { email }, { form: 'The email or the password is not right.' }, 401);
    }
    // Right: this pair starts afresh, the email and the network get their attempt back.
    await admission.refund([pair]);
    await db.clearAttempts(pair);
    await db.rememberLoginNetwork(pairSubject(email, address, 'known'), now.toISOString());
    await sessions.start(req, res, account);
    res.redirect(303, '/account');
  });

  router.post('/logout', ...guarded, async (req, res) => {
    await sessions.end(req, res);
    res.redirect(303, '/');
  });
}
