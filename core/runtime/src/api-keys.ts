import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Every key starts with this, so secret scanners (and people) recognise a leaked Compresso key. */
export const KEY_PREFIX = 'cmp_live_';
/** Characters of the random part kept as the visible, non-secret prefix (48 bits: tells keys apart, reveals nothing useful). */
const VISIBLE_CHARS = 8;

export interface NewKeySecret {
  /** The whole key, shown to its owner once and never stored. */
  secret: string;
  /** `cmp_live_` plus the first characters of the random part. */
  prefix: string;
  hash: string;
}

/**
 * 32 random bytes (256 bits) from the OS CSPRNG, base64url. A key this random cannot be guessed or
 * brute-forced from its hash, so a fast hash is the right one: SHA-256 gives the same protection for
 * a leaked table as bcrypt/argon2 would, without spending ~100 ms of CPU on every API request. Slow
 * hashes exist for low-entropy human passwords, which these are not.
 */
export function generateKeySecret(): NewKeySecret {
  const random = randomBytes(32).toString('base64url');
  const secret = `${KEY_PREFIX}${random}`;
  return { secret, prefix: `${KEY_PREFIX}${random.slice(0, VISIBLE_CHARS)}`, hash: hashKey(secret) };
}

export function hashKey(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Shape check before any database work: cheap rejection of garbage and of absurdly long headers. */
export function looksLikeKey(value: string): boolean {
  return value.length <= 100 && /^cmp_live_[A-Za-z0-9_-]{43}$/.test(value);
}

/**
 * Constant-time comparison of two hex hashes. The lookup already matched by hash through an index;
 * comparing again without early exit means no code path's timing depends on how much of a stored
 * hash a guess shares.
 */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

export function newId(kind: 'acc' | 'key'): string {
  return `${kind}_${randomBytes(9).toString('base64url')}`;
}
