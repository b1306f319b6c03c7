import { createHash } from 'node:crypto';
import type { Config, Database, Logger } from '@compresso/runtime';
import type express from 'express';
import type { Request } from 'express';
import type { Billing } from '../billing/billing.ts';
import type { Mailer } from './mail.ts';
import type { Sessions } from './session.ts';
import type { createSignupLinks } from './signup-link.ts';

/** What the account pages' routes (sign-up, log-in, reset, account area) share. */
export interface AccountPages {
  db: Database;
  logger: Logger;
  config: Config;
  clock: () => Date;
  /** Undefined without SMTP_URL: links then go to the server log. */
  mailer: Mailer | undefined;
  sessions: Sessions;
  /** Paid Pro through Stripe; undefined without the STRIPE_* settings (then no page mentions payment). */
  billing: Billing | undefined;
  signupLinks: ReturnType<typeof createSignupLinks>;
  /** Before every POST handler: the form body parser and the CSRF check. */
  guarded: express.RequestHandler[];
  /** The links' base: the configured public address, never a Host header a caller chose when mail goes out. */
  baseUrl(req: Request): string;
  /**
   * Mail to `to`, or (no SMTP_URL) the server log: then a secret link is logged on purpose, as the
   * only way to hand it over; it is single-use in effect and dies in 30 minutes.
   */
  deliver(to: string, subject: string, text: string, logLine: string, fields: object): Promise<void>;
}

export const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');
