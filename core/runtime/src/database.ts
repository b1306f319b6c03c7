import type { IdempotencyStore } from './idempotency-store.ts';
/**
 * The database port, as narrow stores (accounts and keys, usage, batches, web sessions, attempt
 * throttles) composed into one Database. Every method is async even though the embedded SQLite
 * backend answers synchronously, so the PostgreSQL backend (`postgresDatabase()`) fits behind the
 * same interfaces. Each method is one small statement or one short transaction: the atomic
 * guarantees (quota, promo uses, throttles) live in the SQL, not in the calling process, so they hold
 * across many processes sharing one database.
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

/** Where one item of a batch job is: waiting (or running), finished with a result, or failed for good. */
export type BatchItemStatus = 'queued' | 'done' | 'failed';

/** A batch job: many images compressed with one set of options, on the job queue. */
export interface BatchRecord {
  id: string;
  accountId: string;
  /** How its items arrived: uploaded files, or URLs the workers fetch. */
  source: 'upload' | 'url';
  /** The validated compress options, as JSON. */
  options: string;
  total: number;
  /** The UTC day its items were counted on (for giving back items that fail through our fault). */
  quotaDay: string;
  createdAt: string;
}

export interface BatchItemRecord {
  batchId: string;
  index: number;
  /** File name of the upload, or the last segment of the URL. */
  name: string;
  sourceUrl: string | null;
  status: BatchItemStatus;
  inputSize: number | null;
  outputSize: number | null;
  /** The engine's InfoResult as JSON, once done. */
  result: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  finishedAt: string | null;
}

/** A queued item as the reconciliation sweep pages through them; also its place for the next page. */
export interface QueuedBatchItem {
  batchId: string;
  index: number;
  /** Its batch's createdAt. */
  createdAt: string;
}

export interface ListQueuedBatchItemsOptions {
  /** Only items of batches created before this instant (ISO 8601). */
  createdBefore?: string;
  /** Only items after this one in the list's order (batch createdAt, batch id, index): the next page. */
  after?: QueuedBatchItem;
}

export type BatchItemOutcome =
  | { status: 'done'; inputSize: number; outputSize: number; result: string }
  | { status: 'failed'; errorCode: string; errorMessage: string; inputSize: number | null };

/** A signed-in browser session. The cookie carries the id; only its SHA-256 is stored. */
export interface WebSessionRecord {
  /** SHA-256 (hex) of the session id. */
  idHash: string;
  accountId: string;
  createdAt: string;
  expiresAt: string;
}

/**
 * How attempts at one thing (a log-in, a sign-up, a promo code) are rationed for one subject (an
 * account, a network, an (account, network) pair). `free` attempts pass; the attempt that reaches
 * `free` and every later one blocks the subject for a time that starts at `baseLockMs` and doubles
 * with each further attempt, up to `maxLockMs`. A subject with no attempt for `windowMs` starts again.
 */
export interface AttemptRule {
  windowMs: number;
  free: number;
  baseLockMs: number;
  maxLockMs: number;
}

export interface AttemptVerdict {
  /** True when this attempt was counted and may go ahead. */
  allowed: boolean;
  /** Attempts counted in the current window (this one included when allowed). */
  attempts: number;
  /** ISO 8601 instant before which the subject is refused, or null when it is not blocked. */
  blockedUntil: string | null;
}

/** Accounts, the promo codes that change their plan, and their API keys. */
export interface AccountStore {
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
}

/** Daily counts: accounts' API requests (the plan's quota) and the web compressor's visitors. */
export interface UsageStore {
  /**
   * Count one request for (account, day) if the count is below `limit`, atomically: one
   * `INSERT … ON CONFLICT DO UPDATE … WHERE count < limit RETURNING count`. Concurrent callers can
   * never push the count past the limit, in one process or many.
   */
  consumeQuota(accountId: string, day: string, limit: number): Promise<QuotaResult>;
  /** Give back counted requests (`n`, default 1) that failed through our fault. */
  refundQuota(accountId: string, day: string, n?: number): Promise<void>;
  /**
   * Count `n` requests at once, all or none, atomically like consumeQuota: a batch of n items is
   * admitted only when all of them fit. `used` is the count after (allowed) or as it stands (refused).
   */
  consumeQuotaMany(accountId: string, day: string, limit: number, n: number): Promise<QuotaResult>;
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

/** Batch jobs (POST /api/v1/jobs) and the outcome of each of their items. */
export interface BatchStore {
  /** A batch and its items (status queued), in one transaction. */
  insertBatch(
    batch: BatchRecord,
    items: ReadonlyArray<{ index: number; name: string; sourceUrl: string | null }>,
  ): Promise<void>;
  findBatch(id: string): Promise<BatchRecord | undefined>;
  /** Items in index order. */
  listBatchItems(batchId: string): Promise<BatchItemRecord[]>;
  findBatchItem(batchId: string, index: number): Promise<BatchItemRecord | undefined>;
  /**
   * Record an item's end, only if it is still queued: one conditional UPDATE, so of several workers
   * finishing the same item (a retry, a stalled job taken over) exactly one write wins. True when
   * this call made the change.
   */
  finishBatchItem(batchId: string, index: number, outcome: BatchItemOutcome, now: string): Promise<boolean>;
  /**
   * Items still queued, oldest batches first (batch createdAt, batch id, index): to hand back to an
   * in-process queue after a restart, and for the sweep that checks them against the queue, page by
   * page (`after`: the last item of the previous page).
   */
  listQueuedBatchItems(limit: number, options?: ListQueuedBatchItemsOptions): Promise<QueuedBatchItem[]>;
}

/** The web pages' sign-in: passwords, browser sessions, reset tokens, and the server's own secrets. */
export interface WebSessionStore {
  /** A password hash (self-describing string, e.g. scrypt with its parameters) for the account; replaces any earlier one. */
  setPasswordHash(accountId: string, hash: string, now: string): Promise<void>;
  /** The account's password hash; undefined for accounts without a password (e.g. made by the CLI). */
  findPasswordHash(accountId: string): Promise<string | undefined>;
  insertWebSession(session: WebSessionRecord): Promise<void>;
  /** The session with this id hash and its account, only while `now` is before its expiry. */
  findWebSession(
    idHash: string,
    now: string,
  ): Promise<{ session: WebSessionRecord; account: Account } | undefined>;
  deleteWebSession(idHash: string): Promise<void>;
  /** Sign an account out everywhere (after a password change). */
  deleteAccountWebSessions(accountId: string): Promise<void>;
  /** Forget sessions and reset tokens that expired before `now`. */
  pruneWebSessions(now: string): Promise<void>;
  /** A one-time password-reset token, stored by its SHA-256 (hex). */
  insertResetToken(hash: string, accountId: string, now: string, expiresAt: string): Promise<void>;
  /**
   * Use a reset token: one conditional UPDATE, so of two concurrent uses exactly one wins. The account
   * id when the token existed, was unused and unexpired at `now`; undefined otherwise.
   */
  consumeResetToken(hash: string, now: string): Promise<string | undefined>;
  /** Whether a reset token would still work at `now` (unused, unexpired), without using it. */
  resetTokenUsable(hash: string, now: string): Promise<boolean>;
  /**
   * A server-wide secret by name, made once: the first caller's `candidate` is stored and every
   * process (sharing the database) gets the same value back.
   */
  webSecret(name: string, candidate: string): Promise<string>;
}

/** Attempt throttles (log-ins, sign-ups, promo codes) and the networks accounts signed in from. */
export interface AttemptStore {
  /**
   * Count one attempt for `subject` before the thing is tried, atomically: one
   * `INSERT … ON CONFLICT DO UPDATE … WHERE not blocked RETURNING`, like consumeQuota, so of any
   * number of concurrent callers (in one process or many) only those within the rule are allowed.
   * A refused attempt changes nothing.
   */
  takeAttempt(subject: string, now: string, rule: AttemptRule): Promise<AttemptVerdict>;
  /**
   * Give back one counted attempt (it succeeded: a right password, a code that worked). When the
   * count drops below `free`, any block that attempt set is lifted.
   */
  refundAttempt(subject: string, free: number): Promise<void>;
  /** Forget every attempt counted for `subject`. */
  clearAttempts(subject: string): Promise<void>;
  /** Remember that `subject` (an opaque account-and-network key) signed in successfully at `now`. */
  rememberLoginNetwork(subject: string, now: string): Promise<void>;
  /** Whether `subject` signed in successfully at or after `since`. */
  knownLoginNetwork(subject: string, since: string): Promise<boolean>;
}

/**
 * One schema change, as SQL for one backend. Never edit a shipped migration: add the next version.
 * Versions are per namespace, applied in ascending order; gaps are fine.
 */
export interface Migration {
  version: number;
  sql: string;
}

/**
 * The tables an integration owns (Shopify's shops, WordPress sites …), as migrations for both
 * backends under its own namespace: applied by migrate() after the core's, in the order the sets
 * were registered, and recorded in the namespace's own version table (`<namespace>_schema_migrations`),
 * so its version numbers never collide with the core's or another integration's.
 */
export interface MigrationSet {
  /** Lowercase letters, digits and _, starting with a letter; also the prefix of its version table. */
  namespace: string;
  sqlite: readonly Migration[];
  postgres: readonly Migration[];
}

/** A row as a driver returns it, column name to value. */
export type SqlRow = Record<string, unknown>;

/**
 * The embedded connection, for stores outside the runtime: prepared statements (cached by their
 * text; `?` or `?N` parameters) and an IMMEDIATE transaction (takes the write lock up front).
 */
export interface SqliteSql {
  run(sql: string, ...params: SqlValue[]): { changes: number };
  get(sql: string, ...params: SqlValue[]): SqlRow | undefined;
  all(sql: string, ...params: SqlValue[]): SqlRow[];
  transaction<T>(work: () => T): T;
}

/** Values a statement takes as a parameter. */
export type SqlValue = string | number | bigint | null | Uint8Array;

/**
 * The PostgreSQL pool, for stores outside the runtime: `$1`-style parameters; an outage surfaces as
 * a CompressoError SERVICE_UNAVAILABLE, as for the core's stores. The search_path is the database's
 * schema, so unqualified table names land beside the core's.
 */
export interface PostgresSql {
  query(sql: string, params?: unknown[]): Promise<{ rows: SqlRow[]; rowCount: number }>;
  transaction<T>(
    work: (tx: {
      query(sql: string, params?: unknown[]): Promise<{ rows: SqlRow[]; rowCount: number }>;
    }) => Promise<T>,
  ): Promise<T>;
}

/** Which backend a Database is, with its connection for an integration's own store to use. */
export type SqlBackend = { kind: 'sqlite'; sql: SqliteSql } | { kind: 'postgres'; sql: PostgresSql };

/**
 * The database port: every store of the core, composed on one connection (file or pool), plus its
 * life cycle. Code that needs one store can take its narrow type (AccountStore, UsageStore, …); a
 * backend's battery for each store is in test/conformance.
 */
export interface Database extends AccountStore, UsageStore, BatchStore, WebSessionStore, AttemptStore {
  /** Which backend this is, for logs and /readyz. */
  readonly kind: 'sqlite' | 'postgres';
  /** The connection, for an integration's own store (see MigrationSet and the runtime README). */
  readonly backend: SqlBackend;
  /** First answers to Idempotency-Key requests, on this connection (idempotency-store.ts). */
  readonly idempotency: IdempotencyStore;
  /**
   * Have migrate() also apply an integration's migrations (after the core's, in registration order).
   * Throws for a namespace registered twice or not matching the rule.
   */
  registerMigrations(set: MigrationSet): void;
  /** Apply pending migrations (the core's, then every registered set's); idempotent. */
  migrate(): Promise<void>;
  /** Cheap round trip proving the database answers. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

const NAMESPACE = /^[a-z][a-z0-9_]{0,39}$/;

/** Check a migration set before it is accepted: a bad one should fail at registration, not mid-migrate. */
export function checkMigrationSet(set: MigrationSet, taken: ReadonlySet<string>): void {
  if (!NAMESPACE.test(set.namespace)) {
    throw new TypeError(
      `migrations: namespace must be 1 to 40 lowercase letters, digits or _, starting with a letter; received ${JSON.stringify(set.namespace)}`,
    );
  }
  if (taken.has(set.namespace))
    throw new TypeError(`migrations: namespace ${set.namespace} is already registered`);
  for (const [backend, list] of [
    ['sqlite', set.sqlite],
    ['postgres', set.postgres],
  ] as const) {
    const versions = list.map((m) => m.version);
    if (versions.some((v) => !Number.isInteger(v) || v < 1) || new Set(versions).size !== versions.length) {
      throw new TypeError(
        `migrations ${set.namespace} (${backend}): versions must be distinct whole numbers from 1; received ${versions.join(', ')}`,
      );
    }
  }
}

/** The version table of a namespace. */
export const migrationTable = (namespace: string) => `${namespace}_schema_migrations`;

/** A set's migrations in version order. */
export const inOrder = (list: readonly Migration[]) => [...list].sort((a, b) => a.version - b.version);

/** A unique constraint was hit (email, promo code). */
export class DuplicateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DuplicateError';
  }
}
