import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import {
  type Account,
  type ApiKeyView,
  applyPromo,
  type Config,
  createAccount,
  createApiKey,
  type Database,
  isEmailAddress,
  type Logger,
  listApiKeys,
  MAX_KEY_NAME,
  nextReset,
  planOf,
  quotaDay,
  revokeApiKey,
  secondsUntilReset,
} from '@compresso/runtime';
import { isCompressoError } from '@compresso/schema';
import express, { type Request, type Response } from 'express';
import { escapeHtml, page, sendPage } from './layout.ts';
import { createMailer, type Mailer } from './mail.ts';
import {
  decoyHash,
  hashPassword,
  MAX_PASSWORD_LENGTH,
  passwordProblem,
  verifyPassword,
} from './passwords.ts';
import { createSessions, type Sessions, sessionOf, type WebSession } from './session.ts';
import { createSignupLinks, SIGNUP_TTL_MS } from './signup-link.ts';
import {
  accountSubject,
  admit,
  emailSubject,
  KNOWN_NETWORK_MS,
  LOGIN_EMAIL,
  LOGIN_NETWORK,
  LOGIN_PAIR,
  MAIL_PER_EMAIL,
  networkSubject,
  PROMO_ACCOUNT,
  PROMO_NETWORK,
  pairSubject,
  SIGNUP_NETWORK,
} from './throttle.ts';

export interface AccountDeps {
  db: Database;
  logger: Logger;
  config: Config;
  /** Where reset links go; default: SMTP_URL through nodemailer, or the server log when unset. */
  mailer?: Mailer;
  /** The clock for throttle windows and expiries; tests pass a fixed one. Default: the system clock. */
  now?: () => Date;
}

/** Reset links work for 30 minutes: long enough to find the mail, short enough to age out of an inbox. */
export const RESET_TTL_MS = 30 * 60 * 1000;
/** One answer for every promo code that does not work: which of them it was would help a guesser. */
export const PROMO_REFUSED =
  'This code does not work. Check it and try again: it may also have expired or been used up.';

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');
const RESET_TOKEN = /^[A-Za-z0-9_-]{43}$/;

type Fields = Record<string, string>;

interface FieldSpec {
  name: string;
  label: string;
  type?: string;
  value?: string;
  error?: string;
  hint?: string;
  autocomplete?: string;
  required?: boolean;
  maxlength?: number;
}

/** A labelled input with its hint and error tied to it (aria-describedby), the error beside the field. */
function field(spec: FieldSpec): string {
  const id = `field-${spec.name}`;
  const described = [spec.hint ? `${id}-hint` : '', spec.error ? `${id}-error` : '']
    .filter(Boolean)
    .join(' ');
  return `<div class="field">
  <label for="${id}">${escapeHtml(spec.label)}</label>
  ${spec.hint ? `<p class="hint" id="${id}-hint">${escapeHtml(spec.hint)}</p>` : ''}
  <input id="${id}" name="${spec.name}" type="${spec.type ?? 'text'}"${spec.value !== undefined ? ` value="${escapeHtml(spec.value)}"` : ''}${spec.autocomplete ? ` autocomplete="${spec.autocomplete}"` : ''}${spec.required === false ? '' : ' required'}${spec.maxlength ? ` maxlength="${spec.maxlength}"` : ''}${described ? ` aria-describedby="${described}"` : ''}${spec.error ? ' aria-invalid="true"' : ''}>
  ${spec.error ? `<p class="field-error" id="${id}-error">${escapeHtml(spec.error)}</p>` : ''}
</div>`;
}

const csrfInput = (token: string) => `<input type="hidden" name="_csrf" value="${escapeHtml(token)}">`;

const str = (body: unknown, name: string): string => {
  const value = (body as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value : '';
};

/** The client's address as TRUST_PROXY lets express derive it (req.ip); the socket's without a proxy. */
const clientAddress = (req: Request) => req.ip ?? req.socket.remoteAddress ?? '';

function minutes(ms: number): string {
  const m = Math.max(1, Math.ceil(ms / 60000));
  return m === 1 ? '1 minute' : `${m} minutes`;
}

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

/**
 * The account half of the web pages: the session middleware (first, for every router after it),
 * sign-up, log-in, log-out, password reset and the account area, and the shared static files.
 */
export function accountRouter(deps: AccountDeps): express.Router {
  const { db, logger, config } = deps;
  const clock = deps.now ?? (() => new Date());
  const mailer = deps.mailer ?? createMailer(config, logger);
  const sessions: Sessions = createSessions({ ...deps, now: clock });
  const signupLinks = createSignupLinks(db);
  const router = express.Router();
  router.use(sessions.middleware);
  const form = express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 20 });
  const guarded = [form, sessions.verifyCsrf];

  // ---- sign up -------------------------------------------------------------------------------

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

  /** The link's base: the configured public address, never a Host header a caller chose when mail goes out. */
  const baseUrl = (req: Request) => config.publicUrl ?? `${req.protocol}://${req.get('host')}`;

  /**
   * Mail to `to`, or (no SMTP_URL) the server log: then a secret link is logged on purpose, as the
   * only way to hand it over; it is single-use in effect and dies in 30 minutes.
   */
  const deliver = async (to: string, subject: string, text: string, logLine: string, fields: object) => {
    if (mailer) {
      try {
        await mailer.send({ to, subject, text });
      } catch (err) {
        logger.error({ err, ...fields }, `mail could not be sent: ${subject}`);
      }
    } else {
      logger.warn(fields, logLine);
    }
  };

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

  // ---- log in / log out ----------------------------------------------------------------------

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

  // ---- password reset ------------------------------------------------------------------------

  const resetRequestPage = async (
    req: Request,
    res: Response,
    values: Fields = {},
    errors: Fields = {},
    notice = '',
    status = 200,
  ) => {
    const token = await sessions.csrfToken(req, res);
    sendPage(
      res,
      page({
        title: 'Reset password',
        session: sessionOf(res),
        body: `<h1>Reset your password</h1>
${notice ? `<p class="notice" role="status">${escapeHtml(notice)}</p>` : ''}
<p>Enter the email of your account. We send a link that sets a new password; it works once, for 30 minutes.</p>
<form method="post" action="/reset" class="stack" novalidate>
  ${csrfInput(token)}
  ${field({ name: 'email', label: 'Email', type: 'email', value: values.email ?? '', error: errors.email, autocomplete: 'email', maxlength: 254 })}
  <div><button type="submit">Send reset link</button></div>
</form>`,
      }),
      status,
    );
  };

  router.get('/reset', async (req, res) => {
    await resetRequestPage(req, res);
  });

  router.post('/reset', ...guarded, async (req, res) => {
    const email = str(req.body, 'email').trim();
    if (!email) return resetRequestPage(req, res, {}, { email: 'Enter your email address.' }, '', 400);
    // The same answer whether or not the email has an account.
    const answer = `If ${email} has an account, a reset link is on its way (valid 30 minutes). No mail? Check spam, or ask the operator: without mail set up, links go to the server log.`;
    const mails = await admit(db, [{ subject: emailSubject(email, 'mail'), rule: MAIL_PER_EMAIL }], clock());
    if (!mails.allowed) {
      logger.warn({}, 'password reset refused: too many mails for one email');
      return resetRequestPage(req, res, { email }, {}, answer);
    }
    const account = await db.findAccountByEmail(email);
    if (account) {
      const token = randomBytes(32).toString('base64url');
      const now = clock();
      const expiresAt = new Date(now.getTime() + RESET_TTL_MS).toISOString();
      await db.insertResetToken(sha256(token), account.id, now.toISOString(), expiresAt);
      const base = config.publicUrl ?? `${req.protocol}://${req.get('host')}`;
      const link = `${base}/reset/${token}`;
      if (mailer) {
        try {
          await mailer.send({
            to: account.email,
            subject: 'Reset your Compresso password',
            text: `Someone (hopefully you) asked to set a new password for ${account.email}.\n\nOpen this link within 30 minutes to choose one (it works once):\n\n${link}\n\nIf it was not you, ignore this mail: nothing changes.\n`,
          });
        } catch (err) {
          logger.error({ err, account_id: account.id }, 'password reset mail could not be sent');
        }
      } else {
        // The one place a secret is logged, on purpose: with no SMTP_URL the operator's log is the
        // only way to hand the link over. It is single-use and dies in 30 minutes.
        logger.warn(
          { account_id: account.id, expires_at: expiresAt },
          `password reset link (no SMTP_URL; give it only to the account's owner): ${link}`,
        );
      }
    }
    await resetRequestPage(req, res, { email }, {}, answer);
  });

  const resetTokenPage = async (
    req: Request,
    res: Response,
    token: string,
    errors: Fields = {},
    status = 200,
  ) => {
    const csrf = await sessions.csrfToken(req, res);
    // The token is in the URL: never send it onwards in a Referer.
    res.setHeader('Referrer-Policy', 'no-referrer');
    sendPage(
      res,
      page({
        title: 'Choose a new password',
        session: sessionOf(res),
        body: `<h1>Choose a new password</h1>
${errors.form ? `<p class="alert" role="alert">${escapeHtml(errors.form)}</p>` : ''}
<form method="post" action="/reset/${escapeHtml(token)}" class="stack" novalidate>
  ${csrfInput(csrf)}
  ${field({ name: 'password', label: 'New password', type: 'password', error: errors.password, autocomplete: 'new-password', hint: 'At least 10 characters.', maxlength: MAX_PASSWORD_LENGTH })}
  <div><button type="submit">Set password and log in</button></div>
</form>`,
      }),
      status,
    );
  };

  router.get('/reset/:token', async (req, res) => {
    const token = String(req.params.token);
    if (!RESET_TOKEN.test(token)) return invalidResetLink(res);
    // Say a used or expired link is dead before the person types a new password into it.
    if (!(await db.resetTokenUsable(sha256(token), clock().toISOString()))) return invalidResetLink(res);
    await resetTokenPage(req, res, token);
  });

  const invalidResetLink = (res: Response) => {
    res.setHeader('Referrer-Policy', 'no-referrer');
    sendPage(
      res,
      page({
        title: 'Reset link not valid',
        session: sessionOf(res),
        body: `<h1>This reset link does not work</h1>
<p class="alert" role="alert">It is not valid, was already used, or is older than 30 minutes.</p>
<p><a href="/reset">Ask for a new link</a>.</p>`,
      }),
      400,
    );
  };

  router.post('/reset/:token', ...guarded, async (req, res) => {
    const token = String(req.params.token);
    if (!RESET_TOKEN.test(token)) return invalidResetLink(res);
    const password = str(req.body, 'password');
    const problem = passwordProblem(password);
    if (problem) return resetTokenPage(req, res, token, { password: problem }, 400);
    const accountId = await db.consumeResetToken(sha256(token), clock().toISOString());
    const account = accountId ? await db.findAccountById(accountId) : undefined;
    if (!account) return invalidResetLink(res);
    await db.setPasswordHash(account.id, await hashPassword(password), clock().toISOString());
    // A reset is what people do when they fear someone else is in: sign every session out.
    await db.deleteAccountWebSessions(account.id);
    // Whoever holds the mailbox is the owner: their email lock and this network's backoff end.
    await db.clearAttempts(emailSubject(account.email));
    await db.clearAttempts(pairSubject(account.email, clientAddress(req)));
    await db.rememberLoginNetwork(
      pairSubject(account.email, clientAddress(req), 'known'),
      clock().toISOString(),
    );
    logger.info({ account_id: account.id }, 'password set through a reset link');
    await sessions.start(req, res, account);
    res.redirect(303, '/account?notice=password');
  });

  // ---- account area --------------------------------------------------------------------------

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
${promo}
${keysSection}`,
      }),
      view.status ?? 200,
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

  // ---- static files shared by the pages ------------------------------------------------------

  const staticDir = join(import.meta.dirname, 'static');
  for (const file of ['site.css', 'docs.css', 'account.js']) {
    router.get(`/static/${file}`, (_req, res) => {
      res.setHeader('Cache-Control', 'no-cache');
      res.sendFile(join(staticDir, file));
    });
  }
  return router;
}
