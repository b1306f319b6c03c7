import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * Password hashing with scrypt (node:crypto), a memory-hard function: each guess costs an attacker
 * 32 MiB and tens of milliseconds, which GPUs and ASICs cannot shortcut the way they can a fast hash.
 * Parameters N=2^15, r=8, p=1 are the OWASP-recommended minimum for scrypt. The stored string names
 * its parameters (`scrypt$ln=15,r=8,p=1$<salt>$<hash>`), so raising them later only affects new
 * hashes and old ones still verify. Built in, so no native dependency (argon2 would need one).
 */

const LOG_N = 15;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;
/** scrypt needs 128·N·r bytes; Node's default cap (32 MiB) is exactly that, so leave headroom. */
const maxmemFor = (n: number, r: number) => 2 * 128 * n * r;

export const MIN_PASSWORD_LENGTH = 10;
/** Long passphrases are welcome; beyond this the request is abuse, not a password. */
export const MAX_PASSWORD_LENGTH = 1024;

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  const options: ScryptOptions = { N: n, r, p, maxmem: maxmemFor(n, r) };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, options, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, 2 ** LOG_N, R, P);
  return `scrypt$ln=${LOG_N},r=${R},p=${P}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

const STORED = /^scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/;

/** True when `password` matches `stored`; constant-time comparison of the derived keys. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const m = STORED.exec(stored);
  if (!m) return false;
  const [ln, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (ln < 10 || ln > 20 || r < 1 || p < 1) return false;
  const expected = Buffer.from(m[5] ?? '', 'base64url');
  const key = await derive(password, Buffer.from(m[4] ?? '', 'base64url'), 2 ** ln, r, p);
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/**
 * A hash to verify against when the account does not exist or has no password, so such log-ins
 * take as long as a wrong password and do not reveal which emails have accounts.
 */
let decoy: Promise<string> | undefined;
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(randomBytes(16).toString('hex'));
  return decoy;
}

/** What is wrong with a new password, or undefined. */
export function passwordProblem(password: string): string | undefined {
  if (password.length < MIN_PASSWORD_LENGTH)
    return `Use at least ${MIN_PASSWORD_LENGTH} characters (received ${password.length}).`;
  if (password.length > MAX_PASSWORD_LENGTH) return `Use at most ${MAX_PASSWORD_LENGTH} characters.`;
  return undefined;
}
