import { join } from 'node:path';
import type { Config, Database, Logger } from '@compresso/runtime';
import express, { type Request } from 'express';
import type { Billing } from '../billing/billing.ts';
import { accountAreaRoutes } from './account-area.ts';
import { billingPageRoutes } from './account-billing.ts';
import type { AccountPages } from './account-pages.ts';
import { loginRoutes } from './login.ts';
import { createMailer, type Mailer } from './mail.ts';
import { resetRoutes } from './reset.ts';
import { createSessions, type Sessions } from './session.ts';
import { signupRoutes } from './signup.ts';
import { createSignupLinks } from './signup-link.ts';

export { PROMO_REFUSED } from './account-area.ts';
export { RESET_TTL_MS } from './reset.ts';

export interface AccountDeps {
  db: Database;
  logger: Logger;
  config: Config;
  /** Where reset links go; default: SMTP_URL through nodemailer, or the server log when unset. */
  mailer?: Mailer;
  /** The clock for throttle windows and expiries; tests pass a fixed one. Default: the system clock. */
  now?: () => Date;
  /** Paid Pro through Stripe, when configured. */
  billing?: Billing;
}

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

  const pages: AccountPages = {
    db,
    logger,
    config,
    clock,
    mailer,
    sessions,
    billing: deps.billing,
    signupLinks,
    guarded,
    baseUrl: (req: Request) => config.publicUrl ?? `${req.protocol}://${req.get('host')}`,
    async deliver(to, subject, text, logLine, fields) {
      if (mailer) {
        try {
          await mailer.send({ to, subject, text });
        } catch (err) {
          logger.error({ err, ...fields }, `mail could not be sent: ${subject}`);
        }
      } else {
        logger.warn(fields, logLine);
      }
    },
  };
  signupRoutes(router, pages);
  loginRoutes(router, pages);
  resetRoutes(router, pages);
  accountAreaRoutes(router, pages);
  if (deps.billing) billingPageRoutes(router, pages, deps.billing);

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
