import { CompressoError } from '@compresso/schema';
import { generateKeySecret, newId } from './api-keys.ts';
import {
  type Account,
  type AccountStore,
  type ApiKeyRecord,
  DuplicateError,
  type PlanId,
  type PromoCode,
} from './database.ts';
import { isPlanId } from './plans.ts';

/**
 * What an operator (the CLI, an admin screen) does to accounts, promo codes and keys. The server's
 * own key endpoints call the same functions, so a key made by `compresso keys create` and one made by
 * POST /api/v1/key are the same thing.
 */

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** Whether createAccount would take this as an email address (checked before anything is sent to it). */
export function isEmailAddress(email: string): boolean {
  const trimmed = email.trim();
  return EMAIL.test(trimmed) && trimmed.length <= 254;
}

export async function createAccount(db: AccountStore, email: string, now = new Date()): Promise<Account> {
  const trimmed = email.trim();
  if (!isEmailAddress(trimmed)) {
    throw new CompressoError(
      'INVALID_REQUEST',
      `email: expected an email address, received ${JSON.stringify(email)}`,
    );
  }
  const account: Account = { id: newId('acc'), email: trimmed, plan: 'free', createdAt: now.toISOString() };
  try {
    await db.insertAccount(account);
  } catch (error) {
    if (error instanceof DuplicateError) {
      throw new CompressoError('CONFLICT', `An account with email ${trimmed} already exists.`);
    }
    throw error;
  }
  return account;
}

/** Find by id (`acc_…`) or email, or throw NOT_FOUND. */
export async function requireAccount(db: AccountStore, idOrEmail: string): Promise<Account> {
  const account = idOrEmail.startsWith('acc_')
    ? await db.findAccountById(idOrEmail)
    : await db.findAccountByEmail(idOrEmail.trim());
  if (!account) throw new CompressoError('NOT_FOUND', `No account ${idOrEmail}.`);
  return account;
}

export interface PromoInput {
  code: string;
  plan?: PlanId;
  /** How many accounts may redeem it. Default 1. */
  uses?: number;
  /**
   * When the code stops working. A moment (Date, or an ISO string with a time) is taken as it is; a
   * bare date `YYYY-MM-DD` means the code works through that UTC day, as people read "expires 31 Jan".
   * Default: never.
   */
  expiresAt?: Date | string | null;
}

const BARE_DATE = /^\s*(\d{4})-(\d{2})-(\d{2})\s*$/;

/** The moment a promo code stops working, or undefined when `value` is not a date. */
export function promoExpiry(value: Date | string): Date | undefined {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : value;
  const bare = BARE_DATE.exec(value);
  if (bare) {
    const [y, m, d] = [Number(bare[1]), Number(bare[2]), Number(bare[3])];
    const start = new Date(Date.UTC(y, m - 1, d));
    // Reject dates that roll over (2027-02-30) instead of silently moving them.
    if (start.getUTCMonth() !== m - 1 || start.getUTCDate() !== d) return undefined;
    return new Date(Date.UTC(y, m - 1, d + 1));
  }
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

export async function createPromoCode(
  db: AccountStore,
  input: PromoInput,
  now = new Date(),
): Promise<PromoCode> {
  const problems: string[] = [];
  const code = input.code.trim();
  if (!/^[A-Za-z0-9_-]{3,64}$/.test(code))
    problems.push(`code: expected 3–64 letters, digits, - or _, received ${JSON.stringify(input.code)}`);
  const plan = input.plan ?? 'pro';
  if (!isPlanId(plan)) problems.push(`plan: expected free or pro, received ${JSON.stringify(plan)}`);
  const uses = input.uses ?? 1;
  if (!Number.isInteger(uses) || uses < 1)
    problems.push(`uses: expected a whole number ≥ 1, received ${JSON.stringify(uses)}`);
  let expiresAt: string | null = null;
  if (input.expiresAt != null) {
    const date = promoExpiry(input.expiresAt);
    if (date === undefined)
      problems.push(
        `expires: expected a date (e.g. 2027-01-31), received ${JSON.stringify(input.expiresAt)}`,
      );
    else expiresAt = date.toISOString();
  }
  if (problems.length) throw new CompressoError('INVALID_REQUEST', problems.join('; '));
  const promo: PromoCode = { code, plan, maxUses: uses, uses: 0, expiresAt, createdAt: now.toISOString() };
  try {
    await db.insertPromo(promo);
  } catch (error) {
    if (error instanceof DuplicateError)
      throw new CompressoError('CONFLICT', `Promo code ${code} already exists.`);
    throw error;
  }
  return promo;
}

const REDEEM_MESSAGES = {
  unknown_code: ['NOT_FOUND', 'No promo code %s.'],
  unknown_account: ['NOT_FOUND', 'No such account.'],
  expired: ['INVALID_REQUEST', 'Promo code %s has expired.'],
  used_up: ['INVALID_REQUEST', 'Promo code %s has no uses left.'],
  already_redeemed: ['CONFLICT', 'This account already redeemed promo code %s.'],
} as const;

/** Activate the promo code's plan on the account (by id or email). */
export async function applyPromo(
  db: AccountStore,
  idOrEmail: string,
  code: string,
  now = new Date(),
): Promise<Account> {
  const account = await requireAccount(db, idOrEmail);
  const outcome = await db.redeemPromo(code.trim(), account.id, now.toISOString());
  if (outcome.ok) return outcome.account;
  const [errorCode, message] = REDEEM_MESSAGES[outcome.reason];
  throw new CompressoError(errorCode, message.replace('%s', code.trim()));
}

/** A key as shown to its owner: never the secret, never the hash. */
export interface ApiKeyView {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export function viewOf(key: ApiKeyRecord): ApiKeyView {
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    created_at: key.createdAt,
    last_used_at: key.lastUsedAt,
    revoked_at: key.revokedAt,
  };
}

export const MAX_KEY_NAME = 100;
/** Active keys per account: enough for every environment and integration, small enough that a leaked key cannot mint thousands. */
export const MAX_ACTIVE_KEYS = 50;

export async function createApiKey(
  db: AccountStore,
  accountId: string,
  name?: string,
  now = new Date(),
): Promise<{ key: ApiKeyView; secret: string }> {
  const cleanName = (name ?? '').trim() || 'default';
  if (cleanName.length > MAX_KEY_NAME) {
    throw new CompressoError(
      'INVALID_REQUEST',
      `name: expected at most ${MAX_KEY_NAME} characters, received ${cleanName.length}`,
    );
  }
  const active = (await db.listApiKeys(accountId)).filter((k) => k.revokedAt === null).length;
  if (active >= MAX_ACTIVE_KEYS) {
    throw new CompressoError(
      'CONFLICT',
      `This account already has ${MAX_ACTIVE_KEYS} active keys; revoke one first.`,
    );
  }
  const { secret, prefix, hash } = generateKeySecret();
  const record: ApiKeyRecord = {
    id: newId('key'),
    accountId,
    name: cleanName,
    prefix,
    hash,
    createdAt: now.toISOString(),
    lastUsedAt: null,
    revokedAt: null,
  };
  await db.insertApiKey(record);
  return { key: viewOf(record), secret };
}

export async function listApiKeys(
  db: AccountStore,
  accountId: string,
  includeRevoked = false,
): Promise<ApiKeyView[]> {
  const keys = await db.listApiKeys(accountId);
  return keys.filter((k) => includeRevoked || k.revokedAt === null).map(viewOf);
}

/**
 * Revoke a key. With accountId, only that account's key (an unknown id and another account's key
 * answer the same NOT_FOUND, so ids of other accounts cannot be probed).
 */
export async function revokeApiKey(
  db: AccountStore,
  keyId: string,
  accountId?: string,
  now = new Date(),
): Promise<void> {
  const revoked = await db.revokeApiKey(keyId, now.toISOString(), accountId);
  if (!revoked) throw new CompressoError('NOT_FOUND', `No active key ${keyId}.`);
}
