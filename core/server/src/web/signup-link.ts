import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { WebSessionStore } from '@compresso/runtime';

/**
 * The token in a sign-up confirmation link: the email, the password hash chosen on the form and an
 * expiry, sealed with AES-256-GCM under a server secret (kept in the database, so every process opens
 * what another sealed). Sealed, not only signed: the scrypt hash inside must not be readable from a
 * mailbox. Nothing is stored until the link is used, so a sign-up for someone else's address leaves
 * no account, no row and no password behind; the account is made only by whoever reads that mailbox.
 * A link works once in effect: using it creates the account, and a second use finds the email taken.
 */

/** Sign-up links work for 30 minutes, like reset links. */
export const SIGNUP_TTL_MS = 30 * 60 * 1000;
const IV = 12;
const TAG = 16;
/** base64url of at least IV + TAG + a small JSON; bounded so a hostile URL costs nothing to refuse. */
export const SIGNUP_TOKEN = /^[A-Za-z0-9_-]{60,1200}$/;

export interface SignupClaim {
  email: string;
  passwordHash: string;
  expiresAt: number;
}

export function createSignupLinks(db: Pick<WebSessionStore, 'webSecret'>) {
  let key: Promise<Buffer> | undefined;
  const keyOf = () => {
    key ??= db
      .webSecret('signup-link-key', randomBytes(32).toString('base64url'))
      .then((value) => Buffer.from(value, 'base64url'))
      .catch((err) => {
        key = undefined;
        throw err;
      });
    return key;
  };

  return {
    async seal(claim: SignupClaim): Promise<string> {
      const iv = randomBytes(IV);
      const cipher = createCipheriv('aes-256-gcm', await keyOf(), iv);
      const body = Buffer.concat([
        cipher.update(JSON.stringify({ e: claim.email, h: claim.passwordHash, x: claim.expiresAt }), 'utf8'),
        cipher.final(),
      ]);
      return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
    },

    /** The claim when the token is ours, intact and unexpired at `now`; undefined otherwise. */
    async open(token: string, now: Date): Promise<SignupClaim | undefined> {
      if (!SIGNUP_TOKEN.test(token)) return undefined;
      const raw = Buffer.from(token, 'base64url');
      if (raw.length < IV + TAG + 2) return undefined;
      try {
        const decipher = createDecipheriv('aes-256-gcm', await keyOf(), raw.subarray(0, IV));
        decipher.setAuthTag(raw.subarray(raw.length - TAG));
        const text = Buffer.concat([
          decipher.update(raw.subarray(IV, raw.length - TAG)),
          decipher.final(),
        ]).toString('utf8');
        const parsed = JSON.parse(text) as { e?: unknown; h?: unknown; x?: unknown };
        if (typeof parsed.e !== 'string' || typeof parsed.h !== 'string' || typeof parsed.x !== 'number')
          return undefined;
        if (parsed.x <= now.getTime()) return undefined;
        return { email: parsed.e, passwordHash: parsed.h, expiresAt: parsed.x };
      } catch {
        // A forged or altered token fails the GCM tag check: the same "does not work" as an expired one.
        return undefined;
      }
    },
  };
}
