import { createHash } from 'node:crypto';
import type { AttemptRule, AttemptStore } from '@compresso/runtime';
import { visitorNetwork } from './compressor.ts';

/**
 * Throttles for the web pages' guessable doors (log-in, sign-up, reset mails, promo codes), counted in
 * the database so they hold across processes and restarts.
 *
 * Every attempt is counted BEFORE the thing is tried (AttemptStore.takeAttempt: one atomic statement, the
 * quota's pattern), so a burst of parallel requests meets the limit exactly: of 25 wrong passwords
 * sent at once, five are checked and twenty refused. Checking first and recording the failure after
 * the (slow, scrypt) password check let every request of a burst through.
 *
 * Log-in is rationed on three subjects at once:
 * - the (email, network) pair: 5 free, then a block that doubles (30 s, 1 min, … 15 min). This is the
 *   owner's own limit: backoff, never a lock that someone else can trigger.
 * - the email: 5 free, then the same doubling block, but NOT for a network this account signed in
 *   from in the last KNOWN_NETWORK_MS. A botnet spread over many networks meets it; the owner at home
 *   or at the office does not, so five wrong passwords from elsewhere cannot lock the owner out.
 * - the network (IPv4 address, IPv6 /64): 30 free, so one client cannot spray many emails.
 * A right password clears its pair and gives its attempt back to the other two subjects. An email
 * without an account is rationed exactly like one with (the subjects are the email, not the account),
 * so the answers say nothing about which emails exist.
 */

const MINUTE = 60 * 1000;
const HOUR = 60 * MINUTE;

export const LOGIN_PAIR: AttemptRule = {
  windowMs: HOUR,
  free: 5,
  baseLockMs: 30 * 1000,
  maxLockMs: 15 * MINUTE,
};
export const LOGIN_EMAIL: AttemptRule = LOGIN_PAIR;
export const LOGIN_NETWORK: AttemptRule = { ...LOGIN_PAIR, free: 30 };
/** Sign-ups per client network: 10 an hour, then an hour's wait (they are cheap to make and to abuse). */
export const SIGNUP_NETWORK: AttemptRule = { windowMs: HOUR, free: 10, baseLockMs: HOUR, maxLockMs: HOUR };
/** Reset (and sign-up) mails per email address: 3 an hour, so nobody can fill an inbox from here. */
export const MAIL_PER_EMAIL: AttemptRule = { windowMs: HOUR, free: 3, baseLockMs: HOUR, maxLockMs: HOUR };
/** Promo codes tried per account and per network: guessing a code is a search, so it is rationed. */
export const PROMO_ACCOUNT: AttemptRule = { windowMs: HOUR, free: 5, baseLockMs: MINUTE, maxLockMs: HOUR };
export const PROMO_NETWORK: AttemptRule = { ...PROMO_ACCOUNT, free: 20 };
/** How long a successful sign-in keeps a network "known" to the account (exempt from its lock). */
export const KNOWN_NETWORK_MS = 90 * 24 * HOUR;

/** Subjects are hashed: the table then lists neither emails nor addresses. */
const subject = (kind: string, value: string) =>
  `${kind}:${createHash('sha256').update(`compresso-throttle:${kind}:${value}`).digest('hex').slice(0, 40)}`;

const normalEmail = (email: string) => email.trim().toLowerCase();

export function emailSubject(email: string, kind = 'email'): string {
  return subject(kind, normalEmail(email));
}

export function networkSubject(address: string, kind = 'net'): string {
  return subject(kind, visitorNetwork(address));
}

/** The (email, network) pair: the owner's own backoff, and the key of a known network. */
export function pairSubject(email: string, address: string, kind = 'pair'): string {
  return subject(kind, `${normalEmail(email)}\0${visitorNetwork(address)}`);
}

export function accountSubject(accountId: string, kind: string): string {
  return subject(kind, accountId);
}

/** One throttle subject and its rule; `take` counts an attempt of it. */
export interface Guard {
  subject: string;
  rule: AttemptRule;
}

export interface Admission {
  /** True when every guard counted the attempt. */
  allowed: boolean;
  /** When refused: milliseconds until the earliest moment all the refusing guards would allow one. */
  waitMs: number;
  /** Give the attempt back to every guard that counted it (it succeeded); `except` keeps some. */
  refund(except?: string[]): Promise<void>;
}

/**
 * Count one attempt against each guard in turn, the narrowest first; at the first refusal the
 * guards that did count it get it back: a refused attempt must not use up the allowance of the
 * subjects that admitted it. In turn rather than at once, so a burst on one subject is cut at the
 * first guard and the later (wider) ones see only the attempts that passed it.
 */
export async function admit(db: AttemptStore, guards: Guard[], now: Date): Promise<Admission> {
  const iso = now.toISOString();
  const counted: Guard[] = [];
  const refund = async (except: string[] = []) => {
    await Promise.all(
      counted.filter((g) => !except.includes(g.subject)).map((g) => db.refundAttempt(g.subject, g.rule.free)),
    );
  };
  for (const guard of guards) {
    const verdict = await db.takeAttempt(guard.subject, iso, guard.rule);
    if (!verdict.allowed) {
      await refund();
      const until = verdict.blockedUntil ? Date.parse(verdict.blockedUntil) : now.getTime();
      return { allowed: false, waitMs: Math.max(1000, until - now.getTime()), refund: async () => {} };
    }
    counted.push(guard);
  }
  return { allowed: true, waitMs: 0, refund };
}
