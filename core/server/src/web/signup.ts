import { type Account, createAccount, isEmailAddress } from '@compresso/runtime';
import { isCompressoError } from '@compresso/schema';
import type express from 'express';
import type { Request, Response } from 'express';
import type { AccountPages } from './account-pages.ts';
import { clientAddress, csrfInput, type Fields, field, minutes, str } from './forms.ts';
import { escapeHtml, page, sendPage } from './layout.ts';
import { hashPassword, MAX_PASSWORD_LENGTH, passwordProblem } from './passwords.ts';
import { sessionOf } from './session.ts';
import { SIGNUP_TTL_MS } from './signup-link.ts';
import {
  admit,
  emailSubject,
  MAIL_PER_EMAIL,
  networkSubject,
  pairSubject,
  SIGNUP_NETWORK,
} from './throttle.ts';

/**
 * Sign-up: the form, the mail with a sealed link (or, for a taken address, a mail saying so), and
 * the link's page whose button makes the account. GET never creates it: mail scanners open links.
 */
export function signupRoutes(router: express.Router, pages: AccountPages): void {
  const { db, logger, clock, sessions, signupLinks, baseUrl, deliver, guarded } = pages;
  const signupPage = async (
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
        title: 'Sign up',
        current: 'signup',
        session: sessionOf(res),
        body: `<h1>Create an account</h1>
${errors.form ? `<p class="alert" role="alert">${escapeHtml(errors.form)}</p>` : ''}
<p>We mail you a link to finish; the account is made when you open it (valid 30 minutes).</p>
<form method="post" action="/signup" class="stack" novalidate>
  ${csrfInput(token)}
  ${field({ name: 'email', label: 'Email', type: 'email', value: values.email ?? '', error: errors.email, autocomplete: 'email', maxlength: 254 })}
  ${field({ name: 'password', label: 'Password', type: 'password', error: errors.password, autocomplete: 'new-password', hint: 'At least 10 characters. A passphrase of a few words works well.', maxlength: MAX_PASSWORD_LENGTH })}
  <div><button type="submit">Sign up</button></div>
</form>
<p>Already have an account? <a href="/login">Log in</a>.</p>`,
      }),
      status,
    );
  };

  router.get('/signup', async (req, res) => {
    if (sessionOf(res)) return res.redirect(303, '/account');
    await signupPage(req, res);
  });

  router.post('/signup', ...guarded, async (req, res) => {
    const email = str(req.body, 'email').trim();
    const password = str(req.body, 'password');
    const errors: Fields = {};
    if (!email) errors.email = 'Enter your email address.';
    else if (!isEmailAddress(email)) errors.email = 'Enter an email address such as name@example.com.';
    const problem = passwordProblem(password);
    if (problem) errors.password = problem;
    if (Object.keys(errors).length) return signupPage(req, res, { email }, errors, 400);

    // Counted before anything else, so a burst cannot outrun it.
    const admission = await admit(
      db,
      [{ subject: networkSubject(clientAddress(req), 'signup'), rule: SIGNUP_NETWORK }],
      clock(),
    );
    if (!admission.allowed) {
      res.setHeader('Retry-After', String(Math.ceil(admission.waitMs / 1000)));
      return signupPage(
        req,
        res,
        { email },
        { form: `Too many sign-ups from your network. Try again in ${minutes(admission.waitMs)}.` },
        429,
      );
    }
    // The same work and the same answer whether or not the email has an account: the page never
    // says which. The mailbox's owner learns it from the mail (a link to finish, or "you already
    // have an account"), which only they can read.
    const passwordHash = await hashPassword(password);
    const mails = await admit(db, [{ subject: emailSubject(email, 'mail'), rule: MAIL_PER_EMAIL }], clock());
    if (!mails.allowed) {
      logger.warn({}, 'sign-up mail not sent: too many mails for one email');
    } else {
      const existing = await db.findAccountByEmail(email);
      if (existing) {
        await deliver(
          existing.email,
          'You already have a Compresso account',
          `Someone (hopefully you) tried to create a Compresso account with ${existing.email}, which already has one.\n\nLog in: ${baseUrl(req)}/login\nForgot the password, or never set one? ${baseUrl(req)}/reset\n\nIf it was not you, ignore this mail: nothing changed.\n`,
          'sign-up asked for an email that already has an account (no SMTP_URL: no mail sent)',
          { account_id: existing.id },
        );
      } else {
        const expiresAt = clock().getTime() + SIGNUP_TTL_MS;
        const link = `${baseUrl(req)}/signup/${await signupLinks.seal({ email, passwordHash, expiresAt })}`;
        await deliver(
          email,
          'Finish creating your Compresso account',
          `Someone (hopefully you) asked to create a Compresso account for ${email}.\n\nOpen this link within 30 minutes to finish (it works once):\n\n${link}\n\nIf it was not you, ignore this mail: no account is made.\n`,
          `sign-up link (no SMTP_URL; give it only to the owner of the address): ${link}`,
          { expires_at: new Date(expiresAt).toISOString() },
        );
      }
    }
    checkMailPage(res, email);
  });

  const checkMailPage = (res: Response, email: string) => {
    sendPage(
      res,
      page({
        title: 'Check your email',
        current: 'signup',
        session: sessionOf(res),
        body: `<h1>Check your email</h1>
<p class="notice" role="status">We sent a mail to ${escapeHtml(email)}. Open the link in it within 30 minutes to finish creating your account. If the address already has an account, the mail says so instead.</p>
<p>No mail? Check spam, or ask the operator: without mail set up, links go to the server log.</p>
<p><a href="/login">Log in</a> · <a href="/reset">Reset a password</a></p>`,
      }),
    );
  };

  const invalidSignupLink = (res: Response, reason: 'invalid' | 'used' = 'invalid') => {
    res.setHeader('Referrer-Policy', 'no-referrer');
    sendPage(
      res,
      page({
        title: 'Sign-up link not valid',
        session: sessionOf(res),
        body: `<h1>This sign-up link does not work</h1>
<p class="alert" role="alert">${
          reason === 'used'
            ? 'The account it was for exists already: the link was used. Log in instead.'
            : 'It is not valid, or is older than 30 minutes.'
        }</p>
<p><a href="/login">Log in</a> · <a href="/signup">Sign up again</a></p>`,
      }),
      400,
    );
  };

  // GET only shows a button: mail scanners open links, and opening one must not create the account.
  router.get('/signup/:token', async (req, res) => {
    const token = String(req.params.token);
    const claim = await signupLinks.open(token, clock());
    if (!claim) return invalidSignupLink(res);
    const csrf = await sessions.csrfToken(req, res);
    res.setHeader('Referrer-Policy', 'no-referrer');
    sendPage(
      res,
      page({
        title: 'Finish sign-up',
        current: 'signup',
        session: sessionOf(res),
        body: `<h1>Finish creating your account</h1>
<p>The account for <strong>${escapeHtml(claim.email)}</strong>, with the password you chose on the sign-up form.</p>
<form method="post" action="/signup/${escapeHtml(token)}" class="stack">
  ${csrfInput(csrf)}
  <div><button type="submit">Create my account</button></div>
</form>`,
      }),
    );
  });

  router.post('/signup/:token', ...guarded, async (req, res) => {
    const claim = await signupLinks.open(String(req.params.token), clock());
    if (!claim) return invalidSignupLink(res);
    let account: Account;
    try {
      account = await createAccount(db, claim.email, clock());
    } catch (error) {
      if (isCompressoError(error) && error.code === 'CONFLICT') return invalidSignupLink(res, 'used');
      throw error;
    }
    await db.setPasswordHash(account.id, claim.passwordHash, clock().toISOString());
    // Where the owner finished signing up is a network they use: spared the email's lock from now on.
    await db.rememberLoginNetwork(
      pairSubject(account.email, clientAddress(req), 'known'),
      clock().toISOString(),
    );
    logger.info({ account_id: account.id }, 'account signed up');
    await sessions.start(req, res, account);
    res.redirect(303, '/account?notice=welcome');
  });
}
