import { randomBytes } from 'node:crypto';
import type express from 'express';
import type { Request, Response } from 'express';
import { type AccountPages, sha256 } from './account-pages.ts';
import { clientAddress, csrfInput, type Fields, field, str } from './forms.ts';
import { escapeHtml, page, sendPage } from './layout.ts';
import { hashPassword, MAX_PASSWORD_LENGTH, passwordProblem } from './passwords.ts';
import { sessionOf } from './session.ts';
import { admit, emailSubject, MAIL_PER_EMAIL, pairSubject } from './throttle.ts';

/** Reset links work for 30 minutes: long enough to find the mail, short enough to age out of an inbox. */
export const RESET_TTL_MS = 30 * 60 * 1000;
const RESET_TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** Password reset: ask for a link (same answer for every email), then set a new password with it. */
export function resetRoutes(router: express.Router, pages: AccountPages): void {
  const { db, logger, config, clock, mailer, sessions, guarded } = pages;
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
}
