/**
 * The database port. Every method is async even though the embedded SQLite backend answers
 * synchronously, so a PostgreSQL backend (`postgresDatabase()`) fits behind the same interface with
 * no change to the server. Each method is one small statement or one short transaction: the atomic
 * guarantees (quota, promo uses) live in the SQL, not in the calling process, so they hold across
 * many processes sharing one database.
 */

export type PlanId = 'free' | 'pro';

export interface Account {
  id: string;
  email: string;
  plan: PlanId;
  createdAt: string;
}

export interface ApiKeyRecord {
  id: string;
  accountId: string;
  name: string;
  /** Non-secret start of the key (e.g. `cmp_live_AbCd1234`), shown in listings so a user can tell keys apart. */
  prefix: string;
  /** SHA-256 (hex) of the whole key; the key itself is never stored. */
  hash: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface PromoCode {
  code: string;
  plan: PlanId;
  maxUses: number;
  uses: number;
  expiresAt: string | null;
  createdAt: string;
}

export type RedeemOutcome =
  | { ok: true; account: Account; promo: PromoCode }
  | { ok: false; reason: 'unknown_code' | 'unknown_account' | 'expired' | 'used_up' | 'already_redeemed' };

export interface QuotaResult {
  /** True when this request fits in the limit and was counted. */
  allowed: boolean;
  /** Requests counted today, this one included when allowed. */
  used: number;
}

export interface Database {
  /** Which backend this is, for logs and /readyz. */
  readonly kind: 'sqlite' | 'postgres';
  /** Apply pending migrations; idempotent. */
  migrate(): Promise<void>;
  /** Cheap round trip proving the database answers. */
  ping(): Promise<void>;
  close(): Promise<void>;

  countAccounts(): Promise<number>;
  /** Throws DuplicateError when the email is taken (compared case-insensitively). */
  insertAccount(account: Account): Promise<void>;
  findAccountById(id: string): Promise<Account | undefined>;
  findAccountByEmail(email: string): Promise<Account | undefined>;
  setAccountPlan(accountId: string, plan: PlanId): Promise<void>;

  /** Throws DuplicateError when the code exists. */
  insertPromo(promo: PromoCode): Promise<void>;
  findPromo(code: string): Promise<PromoCode | undefined>;
  /** One transaction: check expiry, uses and earlier redemption, count one use, set the plan. */
  redeemPromo(code: string, accountId: string, now: string): Promise<RedeemOutcome>;

  insertApiKey(key: ApiKeyRecord): Promise<void>;
  /** The active (not revoked) key with this hash, and its account. */
  findActiveKeyByHash(hash: string): Promise<{ key: ApiKeyRecord; account: Account } | undefined>;
  listApiKeys(accountId: string): Promise<ApiKeyRecord[]>;
  findApiKey(id: string): Promise<ApiKeyRecord | undefined>;
  /** Revoke when the key exists, is active and (if given) belongs to accountId. True when revoked now. */
  revokeApiKey(id: string, now: string, accountId?: string): Promise<boolean>;
  /** Record use; backends may skip the write when the stored time is newer than `staleBefore`. */
  touchApiKey(id: string, now: string, staleBefore: string): Promise<void>;

  /**
   * Count one request for (account, day) if the count is below `limit`, atomically: one
   * `INSERT … ON CONFLICT DO UPDATE … WHERE count < limit RETURNING count`. Concurrent callers can
   * never push the count past the limit, in one process or many.
   */
  consumeQuota(accountId: string, day: string, limit: number): Promise<QuotaResult>;
  /** Give back one counted request (a request that failed through our fault). */
  refundQuota(accountId: string, day: string): Promise<void>;
  usageOn(accountId: string, day: string): Promise<number>;

  /**
   * The web compressor's allowance for people without the Pro plan: count one image for `visitor`
   * (an opaque key the server derives, e.g. a hash of the client's network) on `day` if below
   * `limit`, atomically, like consumeQuota. Kept apart from usage_daily, whose rows are accounts'.
   */
  consumeVisitorQuota(visitor: string, day: string, limit: number): Promise<QuotaResult>;
  /** Give back one counted image (it failed through our fault). */
  refundVisitorQuota(visitor: string, day: string): Promise<void>;
  visitorUsageOn(visitor: string, day: string): Promise<number>;
  /** Forget visitor counts of days before `day`: they are never read again. */
  pruneVisitorUsage(beforeDay: string): Promise<void>;
}

/** A unique constraint was hit (email, promo code). */
export class DuplicateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DuplicateError';
  }
}
