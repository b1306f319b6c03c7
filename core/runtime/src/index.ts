export {
  generateKeySecret,
  hashKey,
  KEY_PREFIX,
  looksLikeKey,
  type NewKeySecret,
  newId,
  sameHash,
} from './api-keys.ts';
export {
  type ApplyOutcome,
  type ApplySubscriptionInput,
  BILLING_MIGRATIONS,
  type BillingCustomer,
  type BillingStore,
  type BillingView,
  describeSubscription,
  entitles,
  type PendingEvent,
  type PlanSource,
  SUBSCRIPTION_STATUSES,
  type SubscriptionRecord,
  type SubscriptionSnapshot,
  type SubscriptionStatus,
} from './billing.ts';
export { billingStore } from './billing-store.ts';
export {
  type BlobBody,
  type BlobEntry,
  type BlobInfo,
  type BlobStore,
  checkBlobKey,
  checkBlobPrefix,
  DEFAULT_CONTENT_TYPE,
  MAX_BLOB_KEY,
  type PutBlobOptions,
} from './blob-store.ts';
// bullmqQueue() is reached through openQueue (REDIS_URL) or the '@compresso/runtime/bullmq' entry, never from
// here, so bullmq and ioredis load only in processes that use Redis.
export type { BullmqQueueOptions } from './bullmq-queue.ts';
export {
  type AppConfigDefinition,
  type AppConfigLoader,
  CONFIG_ENV,
  type Config,
  ConfigError,
  type ConfigField,
  type ConfigFields,
  type ConfigRule,
  type ConfigValues,
  defineConfig,
  loadConfig,
} from './config.ts';
export {
  type Account,
  type AccountStore,
  type ApiKeyRecord,
  type AttemptRule,
  type AttemptStore,
  type AttemptVerdict,
  type BatchItemOutcome,
  type BatchItemRecord,
  type BatchItemStatus,
  type BatchRecord,
  type BatchStore,
  type Database,
  DuplicateError,
  type ListQueuedBatchItemsOptions,
  type Migration,
  type MigrationSet,
  type PlanId,
  type PostgresSql,
  type PromoCode,
  type QueuedBatchItem,
  type QuotaResult,
  type RedeemOutcome,
  type SqlBackend,
  type SqliteSql,
  type SqlRow,
  type SqlValue,
  type UsageStore,
  type WebSessionRecord,
  type WebSessionStore,
} from './database.ts';
export { type FileBlobStoreOptions, fileBlobStore } from './file-blob-store.ts';
export type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecord,
  IdempotencyStore,
  StoredAnswer,
} from './idempotency-store.ts';
export { type InlineQueueOptions, inlineQueue } from './inline-queue.ts';
export { createLogger, type Logger, REDACT_PATHS } from './logger.ts';
export { openBlobStore } from './open-blob-store.ts';
export { type OpenDatabaseOptions, openDatabase } from './open-database.ts';
export { type OpenQueueOptions, openQueue } from './open-queue.ts';
export {
  type ApiKeyView,
  applyPromo,
  createAccount,
  createApiKey,
  createPromoCode,
  isEmailAddress,
  listApiKeys,
  MAX_ACTIVE_KEYS,
  MAX_KEY_NAME,
  type PromoInput,
  promoExpiry,
  requireAccount,
  revokeApiKey,
  viewOf,
} from './operator.ts';
export { isPlanId, nextReset, PLAN_IDS, type Plan, planOf, quotaDay, secondsUntilReset } from './plans.ts';
// postgresDatabase() is reached through openDatabase (DATABASE_URL) or the '@compresso/runtime/postgres'
// entry, never from here: every CLI start imports this index, and the driver should load only when used.
export type { PostgresOptions } from './postgres.ts';
export {
  type ProcessContext,
  type RunningProcess,
  type StartProcessOptions,
  startProcess,
} from './process.ts';
export {
  type AddJobOptions,
  backoffDelay,
  type CloseWorkerOptions,
  checkJobId,
  type JobBackoff,
  type JobContext,
  type JobHandler,
  type JobHandlers,
  type JobProgress,
  type JobQueue,
  type JobState,
  type JobView,
  QUEUE_DEFAULTS,
  type QueueCounts,
  type QueueEvent,
  type QueueWorker,
  type WorkOptions,
} from './queue.ts';
// s3BlobStore() too: openBlobStore (S3_BUCKET) or the '@compresso/runtime/s3' entry.
export type { S3BlobStoreOptions } from './s3-blob-store.ts';
export { exitOnSignals } from './signals.ts';
export { type SqliteOptions, sqliteDatabase } from './sqlite.ts';
