import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import { z } from 'zod';

/**
 * Everything a Compresso process is configured with. Resolution order: explicit override, then the
 * environment, then the default. Invalid configuration fails at start with one message listing
 * every problem, so an operator fixes them all in one go instead of one restart per typo.
 */
export interface Config {
  /** TCP port of the HTTP server (PORT). 3000: the usual Node default, unprivileged, and what the docs use. */
  port: number;
  /** Interface to listen on (HOST). */
  host: string;
  /** Directory for the embedded SQLite database and other local state (COMPRESSO_DATA_DIR). */
  dataDir: string;
  /** PostgreSQL URL (DATABASE_URL); unset means the embedded SQLite file in dataDir. */
  databaseUrl: string | undefined;
  /** pino level (LOG_LEVEL). */
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Largest upload in bytes (COMPRESSO_MAX_UPLOAD_BYTES); bigger bodies are cut off while streaming. */
  maxUploadBytes: number;
  /**
   * Upload bytes all requests together may hold in memory at once (COMPRESSO_UPLOAD_MEMORY_BYTES).
   * Each upload reserves its declared length (or maxUploadBytes when chunked) before its body is read;
   * one that does not fit is answered 503 with Retry-After instead of growing the heap without bound
   * under many parallel large uploads. Default: 512 MiB, or maxUploadBytes if larger.
   */
  uploadMemoryBytes: number;
  /**
   * Longest time a client may take to send a whole request, in ms (COMPRESSO_REQUEST_TIMEOUT_MS).
   * Bounds what a slow or abandoned upload can hold; 60 s moves 50 MB at under 7 Mbit/s.
   */
  requestTimeoutMs: number;
  /**
   * Longest pause inside an upload, in ms (COMPRESSO_IDLE_TIMEOUT_MS): a client that stops sending
   * mid-body is answered 408 and its partial upload dropped, long before requestTimeoutMs.
   */
  idleTimeoutMs: number;
  /** Daily API requests of the Pro plan (COMPRESSO_PRO_DAILY_LIMIT). */
  proDailyLimit: number;
  /**
   * Images a day the web compressor gives people without the Pro plan, per client network
   * (COMPRESSO_VISITOR_DAILY_LIMIT); 0 turns the allowance off.
   */
  visitorDailyLimit: number;
  /** Images processed at once by the engine (COMPRESSO_CONCURRENCY); default: the engine's (cores). */
  concurrency: number | undefined;
  /**
   * Native memory, in MiB, the images in flight may be estimated to hold together
   * (COMPRESSO_MEMORY_BUDGET_MB). Images that do not fit wait in line; one larger than the budget runs
   * alone. 768: measured with the soak benchmark (server README, "Memory").
   */
  memoryBudgetMiB: number;
  /** Longest wait for in-flight requests on SIGINT/SIGTERM, in ms (COMPRESSO_SHUTDOWN_TIMEOUT_MS). */
  shutdownTimeoutMs: number;
  /** Redis URL for the BullMQ job queue (REDIS_URL); unset means the in-process queue. */
  redisUrl: string | undefined;
  /**
   * Start of every Redis key Compresso's queues use (COMPRESSO_QUEUE_PREFIX), so several installs or
   * test runs can share one Redis without seeing each other's jobs.
   */
  queuePrefix: string;
  /** Jobs one worker runs at once (COMPRESSO_WORKER_CONCURRENCY); 2 matches a 2-core machine. */
  workerConcurrency: number;
  /** Runs a job gets in all before it lands in the dead letter (COMPRESSO_JOB_ATTEMPTS). */
  jobAttempts: number;
  /** First retry delay in ms, doubled for each later one (COMPRESSO_JOB_BACKOFF_MS). */
  jobBackoffMs: number;
  /**
   * How long a BullMQ worker's claim on a job lasts without renewal, in ms (COMPRESSO_JOB_LOCK_MS).
   * A worker renews it while alive; when one dies (SIGKILL, power loss) its jobs go to another worker
   * after about this long. Shorter means faster takeover and more Redis traffic.
   */
  jobLockMs: number;
  /**
   * How often each process running batch workers checks the items the database still has queued
   * against the queue, in ms (COMPRESSO_JOB_SWEEP_MS), ±25 % so processes spread out; also the age
   * a batch must reach before its items are checked, so a submission still adding its jobs is never
   * touched. A job the queue lost (Redis restarted empty) is added again, one dead-lettered without
   * its handler seeing it (its worker died too often) fails its item and gives back its quota. So
   * this bounds how long such an item can stay queued: about two of these.
   */
  jobSweepMs: number;
  /** Directory of the filesystem blob store (COMPRESSO_BLOB_DIR); default `<dataDir>/blobs`. */
  blobDir: string;
  /** S3 bucket for the blob store (S3_BUCKET); unset means files in blobDir. */
  s3Bucket: string | undefined;
  /** Endpoint of an S3-compatible service (S3_ENDPOINT), e.g. MinIO; unset means AWS S3 itself. */
  s3Endpoint: string | undefined;
  /** Region (AWS_REGION); default us-east-1, which S3-compatible services accept. */
  s3Region: string;
  /** Access key id (AWS_ACCESS_KEY_ID); unset means the AWS SDK's usual credential chain. */
  s3AccessKeyId: string | undefined;
  /** Secret access key (AWS_SECRET_ACCESS_KEY); never logged. */
  s3SecretAccessKey: string | undefined;
  /**
   * Path-style URLs, `endpoint/bucket/key` (S3_FORCE_PATH_STYLE): what most S3-compatible servers
   * need. Default: on when S3_ENDPOINT is set, off for AWS.
   */
  s3ForcePathStyle: boolean;
  /**
   * Bearer token of GET /metrics (METRICS_TOKEN), at least 16 characters; unset means /metrics
   * answers 404, so process internals are never public by accident. Never logged.
   */
  metricsToken: string | undefined;
  /**
   * The server operator's token (COMPRESSO_ADMIN_TOKEN), at least 24 characters: authorizes the
   * `operator` routes (POST /api/v1/operator/accounts, which the Shopify app calls to give each shop
   * an account and key). Unset means those routes answer 404. Set it only on servers and the
   * integrations' own servers, never in anything a browser loads; never logged.
   */
  adminToken: string | undefined;
  /**
   * Batch items `compresso serve` works on itself, at once (COMPRESSO_WORKERS, `serve --workers`).
   * Default: 1 with the in-process queue (nothing else could run its jobs), 0 with REDIS_URL (run
   * `compresso worker` processes instead).
   */
  workers: number | undefined;
  /** Most items in one batch job (COMPRESSO_MAX_BATCH_ITEMS). */
  maxBatchItems: number;
  /** Longest a batch's URL fetch may take, redirects included, in ms (COMPRESSO_FETCH_TIMEOUT_MS). */
  fetchTimeoutMs: number;
  /**
   * Let batch URLs reach private, loopback and link-local addresses (COMPRESSO_FETCH_ALLOW_PRIVATE).
   * Off by default: a URL the server fetches for a caller must not reach the server's own network
   * (cloud metadata, databases). Only for tests and closed networks.
   */
  fetchAllowPrivate: boolean;
  /**
   * SMTP server for password-reset mail (SMTP_URL), `smtp://user:pass@host:587` or `smtps://…:465`;
   * unset means reset links are printed to the server log instead. Never logged.
   */
  smtpUrl: string | undefined;
  /** Sender of the server's mail (COMPRESSO_MAIL_FROM). */
  mailFrom: string;
  /**
   * The address people reach this server at (COMPRESSO_PUBLIC_URL), e.g. `https://img.example.com`;
   * reset links are built on it, never on a request's Host header (which a caller chooses). Required
   * with SMTP_URL; without it, a printed link uses the address the request came to.
   */
  publicUrl: string | undefined;
  /**
   * Send the session cookie only over HTTPS (COMPRESSO_COOKIE_SECURE). Default: on when
   * COMPRESSO_PUBLIC_URL is https or the request arrived over HTTPS.
   */
  cookieSecure: boolean | undefined;
  /**
   * Which proxies in front of the server to believe (TRUST_PROXY), in express's trust-proxy terms: a
   * hop count (`1`: the one proxy right in front, whose X-Forwarded-For entry is the client) or a
   * comma-separated list of addresses, subnets and the names `loopback`, `linklocal`, `uniquelocal`.
   * The client address it yields (req.ip) keys every throttle; X-Forwarded-Proto from a trusted hop
   * decides whether cookies are Secure. Default: none (the socket's address), never "everything": a
   * trusted X-Forwarded-For is one any client could write otherwise.
   */
  trustProxy: number | string[] | false;
  /**
   * Stripe secret API key (STRIPE_SECRET_KEY), `sk_test_…`/`sk_live_…` or a restricted `rk_…` key.
   * The three STRIPE_* settings come together or not at all: without them the site offers promo codes
   * only and says nothing about payment. Never logged.
   */
  stripeSecretKey: string | undefined;
  /** Signing secret of the Stripe webhook endpoint (STRIPE_WEBHOOK_SECRET), `whsec_…`. Never logged. */
  stripeWebhookSecret: string | undefined;
  /** The Stripe Price a Pro subscription is for (STRIPE_PRICE_PRO), `price_…`. */
  stripePricePro: string | undefined;
  /**
   * Days a subscription whose payment failed (past_due/unpaid) keeps Pro before the plan falls back
   * (COMPRESSO_BILLING_GRACE_DAYS); 0 drops it at once. Default 3: Stripe's first automatic retry.
   */
  billingGraceDays: number;
  /**
   * Which AI provider does generation and generative edits (COMPRESSO_AI_PROVIDER): openai or
   * replicate. Default: openai when OPENAI_API_KEY is set, else replicate when REPLICATE_API_TOKEN
   * is; with neither, the AI routes that need one answer 501 PROVIDER_NOT_CONFIGURED.
   */
  aiProvider: 'openai' | 'replicate' | undefined;
  /** Key of an OpenAI-compatible API (OPENAI_API_KEY), the name that ecosystem uses. Never logged. */
  openaiApiKey: string | undefined;
  /** Its base URL (OPENAI_BASE_URL), with the /v1: any OpenAI-compatible images and chat API. */
  openaiBaseUrl: string;
  /** Replicate's API token (REPLICATE_API_TOKEN). Never logged. */
  replicateApiToken: string | undefined;
  /** Replicate's API base (REPLICATE_BASE_URL), with the /v1. */
  replicateBaseUrl: string;
  /** Longest a provider call may take, polling included, in ms (COMPRESSO_AI_TIMEOUT_MS). */
  aiTimeoutMs: number;
  /**
   * The provider's model for each of our generation models (COMPRESSO_AI_MODEL_FAST, _PHOTO,
   * _DESIGN, _ICON), for generative edits (COMPRESSO_AI_EDIT_MODEL) and for alt text
   * (COMPRESSO_AI_VISION_MODEL); unset means the adapter's default (server README, "AI").
   */
  aiModelFast: string | undefined;
  aiModelPhoto: string | undefined;
  aiModelDesign: string | undefined;
  aiModelIcon: string | undefined;
  aiEditModel: string | undefined;
  aiVisionModel: string | undefined;
}

const intFrom = (min: number, max: number) =>
  z
    .union([z.int(), z.string().regex(/^\s*\d+\s*$/, 'expected a whole number')])
    .transform((v) => Number(v))
    .pipe(z.int().min(min).max(max));

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** One TRUST_PROXY entry: a name express knows, an address, or an address/prefix (or /netmask). */
function proxyEntryProblem(entry: string): string | undefined {
  if (PROXY_NAMES.has(entry)) return undefined;
  const [address = '', range, ...rest] = entry.split('/');
  const family = isIP(address);
  if (!family || rest.length > 0)
    return `"${entry}" is not an address, subnet or one of ${[...PROXY_NAMES].join(', ')}`;
  if (range === undefined) return undefined;
  if (/^\d{1,3}$/.test(range) && Number(range) <= (family === 4 ? 32 : 128)) return undefined;
  if (family === 4 && isIP(range) === 4) return undefined;
  return `"${entry}" has a prefix length out of range for IPv${family}`;
}

const trustProxySchema = z
  .union([z.literal(false), z.int().min(0).max(32), z.array(z.string()), z.string()])
  .transform((value, ctx): number | string[] | false => {
    if (value === false) return false;
    if (typeof value === 'number') return value === 0 ? false : value;
    const text = Array.isArray(value) ? value.join(',') : value.trim();
    if (/^\d+$/.test(text)) {
      const hops = Number(text);
      if (hops > 32) ctx.addIssue({ code: 'custom', message: 'expected at most 32 hops' });
      return hops === 0 ? false : hops;
    }
    if (/^(false|off|none)$/i.test(text)) return false;
    if (/^(true|\*|all)$/i.test(text)) {
      ctx.addIssue({
        code: 'custom',
        message:
          "trusting every proxy lets any client choose its own address (X-Forwarded-For); give the hop count (e.g. 1) or the proxies' addresses or subnets",
      });
      return false;
    }
    const entries = text
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean);
    if (entries.length === 0)
      ctx.addIssue({ code: 'custom', message: 'expected a hop count or a list of addresses' });
    for (const entry of entries) {
      const problem = proxyEntryProblem(entry);
      if (problem)
        ctx.addIssue({ code: 'custom', message: `expected a hop count or addresses/subnets: ${problem}` });
    }
    return entries;
  });

/** A provider's model id: `gpt-image-1`, `black-forest-labs/flux-schnell`, `owner/name:version`. */
const aiModelName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$/, 'expected a model id such as gpt-image-1 or owner/name')
  .optional();

const ConfigSchema = z.object({
  port: intFrom(0, 65_535).default(3000),
  host: z.string().min(1).default('0.0.0.0'),
  dataDir: z.string().min(1).default('./.compresso-data'),
  databaseUrl: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'expected a postgres:// or postgresql:// URL')
    .optional(),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  maxUploadBytes: intFrom(1, 1024 * 1024 * 1024).default(50 * 1024 * 1024),
  uploadMemoryBytes: intFrom(1, 64 * 1024 * 1024 * 1024).optional(),
  requestTimeoutMs: intFrom(1000, 3_600_000).default(60_000),
  idleTimeoutMs: intFrom(100, 600_000).default(15_000),
  proDailyLimit: intFrom(1, 100_000_000).default(500),
  visitorDailyLimit: intFrom(0, 1_000_000).default(20),
  concurrency: intFrom(1, 256).optional(),
  memoryBudgetMiB: intFrom(16, 1024 * 1024).default(768),
  shutdownTimeoutMs: intFrom(0, 600_000).default(30_000),
  redisUrl: z
    .string()
    .regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL')
    .optional(),
  queuePrefix: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'expected 1 to 64 letters, digits, _ or -')
    .default('compresso'),
  workerConcurrency: intFrom(1, 256).default(2),
  jobAttempts: intFrom(1, 100).default(3),
  jobBackoffMs: intFrom(0, 3_600_000).default(1000),
  jobLockMs: intFrom(1000, 3_600_000).default(30_000),
  // At least 2 s: the age check must outlast a submission's own addBulk (bounded by 1.5 s).
  jobSweepMs: intFrom(2000, 86_400_000).default(60_000),
  blobDir: z.string().min(1).optional(),
  s3Bucket: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'expected an S3 bucket name (3 to 63 of a-z, 0-9, . and -)')
    .optional(),
  s3Endpoint: z.url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' }).optional(),
  s3Region: z
    .string()
    .regex(/^[a-z0-9-]{1,64}$/, 'expected a region name such as us-east-1')
    .default('us-east-1'),
  s3AccessKeyId: z.string().min(1).optional(),
  s3SecretAccessKey: z.string().min(1).optional(),
  s3ForcePathStyle: z
    .union([z.boolean(), z.enum(['true', 'false', '1', '0'], { error: 'expected true or false' })])
    .transform((v) => v === true || v === 'true' || v === '1')
    .optional(),
  metricsToken: z.string().min(16, 'expected at least 16 characters').max(512).optional(),
  adminToken: z.string().min(24, 'expected at least 24 characters').max(512).optional(),
  workers: intFrom(0, 256).optional(),
  maxBatchItems: intFrom(1, 10_000).default(500),
  fetchTimeoutMs: intFrom(100, 600_000).default(30_000),
  fetchAllowPrivate: z
    .union([z.boolean(), z.enum(['true', 'false', '1', '0'], { error: 'expected true or false' })])
    .transform((v) => v === true || v === 'true' || v === '1')
    .default(false),
  smtpUrl: z
    .string()
    .regex(/^smtps?:\/\/[^\s]+$/, 'expected an smtp:// or smtps:// URL')
    .optional(),
  mailFrom: z.string().min(3).max(320).default('Compresso <no-reply@localhost>'),
  publicUrl: z.url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' }).optional(),
  cookieSecure: z
    .union([z.boolean(), z.enum(['true', 'false', '1', '0'], { error: 'expected true or false' })])
    .transform((v) => v === true || v === 'true' || v === '1')
    .optional(),
  trustProxy: trustProxySchema.default(false),
  stripeSecretKey: z
    .string()
    .regex(/^(sk|rk)_(test|live)_[A-Za-z0-9]{8,}$/, 'expected a Stripe secret key (sk_test_… or sk_live_…)')
    .optional(),
  stripeWebhookSecret: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/=]{8,}$/, 'expected a webhook signing secret (whsec_…)')
    .optional(),
  stripePricePro: z
    .string()
    .regex(/^price_[A-Za-z0-9]{4,}$/, 'expected a Stripe price id (price_…)')
    .optional(),
  billingGraceDays: intFrom(0, 60).default(3),
  aiProvider: z.enum(['openai', 'replicate'], { error: 'expected openai or replicate' }).optional(),
  openaiApiKey: z.string().min(1).max(512).optional(),
  openaiBaseUrl: z
    .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
    .default('https://api.openai.com/v1'),
  replicateApiToken: z.string().min(1).max(512).optional(),
  replicateBaseUrl: z
    .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
    .default('https://api.replicate.com/v1'),
  aiTimeoutMs: intFrom(1000, 600_000).default(120_000),
  aiModelFast: aiModelName,
  aiModelPhoto: aiModelName,
  aiModelDesign: aiModelName,
  aiModelIcon: aiModelName,
  aiEditModel: aiModelName,
  aiVisionModel: aiModelName,
});

/** Environment variable behind each config field, for error messages and docs. */
export const CONFIG_ENV: Record<keyof Config, string> = {
  port: 'PORT',
  host: 'HOST',
  dataDir: 'COMPRESSO_DATA_DIR',
  databaseUrl: 'DATABASE_URL',
  logLevel: 'LOG_LEVEL',
  maxUploadBytes: 'COMPRESSO_MAX_UPLOAD_BYTES',
  uploadMemoryBytes: 'COMPRESSO_UPLOAD_MEMORY_BYTES',
  requestTimeoutMs: 'COMPRESSO_REQUEST_TIMEOUT_MS',
  idleTimeoutMs: 'COMPRESSO_IDLE_TIMEOUT_MS',
  proDailyLimit: 'COMPRESSO_PRO_DAILY_LIMIT',
  visitorDailyLimit: 'COMPRESSO_VISITOR_DAILY_LIMIT',
  concurrency: 'COMPRESSO_CONCURRENCY',
  memoryBudgetMiB: 'COMPRESSO_MEMORY_BUDGET_MB',
  shutdownTimeoutMs: 'COMPRESSO_SHUTDOWN_TIMEOUT_MS',
  redisUrl: 'REDIS_URL',
  queuePrefix: 'COMPRESSO_QUEUE_PREFIX',
  workerConcurrency: 'COMPRESSO_WORKER_CONCURRENCY',
  jobAttempts: 'COMPRESSO_JOB_ATTEMPTS',
  jobBackoffMs: 'COMPRESSO_JOB_BACKOFF_MS',
  jobLockMs: 'COMPRESSO_JOB_LOCK_MS',
  jobSweepMs: 'COMPRESSO_JOB_SWEEP_MS',
  blobDir: 'COMPRESSO_BLOB_DIR',
  s3Bucket: 'S3_BUCKET',
  s3Endpoint: 'S3_ENDPOINT',
  s3Region: 'AWS_REGION',
  s3AccessKeyId: 'AWS_ACCESS_KEY_ID',
  s3SecretAccessKey: 'AWS_SECRET_ACCESS_KEY',
  s3ForcePathStyle: 'S3_FORCE_PATH_STYLE',
  metricsToken: 'METRICS_TOKEN',
  adminToken: 'COMPRESSO_ADMIN_TOKEN',
  workers: 'COMPRESSO_WORKERS',
  maxBatchItems: 'COMPRESSO_MAX_BATCH_ITEMS',
  fetchTimeoutMs: 'COMPRESSO_FETCH_TIMEOUT_MS',
  fetchAllowPrivate: 'COMPRESSO_FETCH_ALLOW_PRIVATE',
  smtpUrl: 'SMTP_URL',
  mailFrom: 'COMPRESSO_MAIL_FROM',
  publicUrl: 'COMPRESSO_PUBLIC_URL',
  cookieSecure: 'COMPRESSO_COOKIE_SECURE',
  trustProxy: 'TRUST_PROXY',
  stripeSecretKey: 'STRIPE_SECRET_KEY',
  stripeWebhookSecret: 'STRIPE_WEBHOOK_SECRET',
  stripePricePro: 'STRIPE_PRICE_PRO',
  billingGraceDays: 'COMPRESSO_BILLING_GRACE_DAYS',
  aiProvider: 'COMPRESSO_AI_PROVIDER',
  openaiApiKey: 'OPENAI_API_KEY',
  openaiBaseUrl: 'OPENAI_BASE_URL',
  replicateApiToken: 'REPLICATE_API_TOKEN',
  replicateBaseUrl: 'REPLICATE_BASE_URL',
  aiTimeoutMs: 'COMPRESSO_AI_TIMEOUT_MS',
  aiModelFast: 'COMPRESSO_AI_MODEL_FAST',
  aiModelPhoto: 'COMPRESSO_AI_MODEL_PHOTO',
  aiModelDesign: 'COMPRESSO_AI_MODEL_DESIGN',
  aiModelIcon: 'COMPRESSO_AI_MODEL_ICON',
  aiEditModel: 'COMPRESSO_AI_EDIT_MODEL',
  aiVisionModel: 'COMPRESSO_AI_VISION_MODEL',
};

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/**
 * A connection URL's password must not reach stderr or a log through a config error: a typo'd scheme
 * (`postgress://user:secret@…`) is exactly when the value gets printed.
 */
function withoutPassword(value: unknown): unknown {
  return typeof value === 'string' ? value.replace(/(\/\/[^/@:\s]*):[^/@\s]*@/g, '$1:***@') : value;
}

/** Base fields whose value never appears in a config error. */
const BASE_SECRETS: ReadonlySet<string> = new Set([
  's3SecretAccessKey',
  'metricsToken',
  'adminToken',
  'smtpUrl',
  'stripeSecretKey',
  'stripeWebhookSecret',
  'openaiApiKey',
  'replicateApiToken',
]);

/**
 * One setting an app adds to the base configuration: the environment variable it is read from, the
 * zod schema that checks and converts it (it receives the raw string, or an explicit override), and
 * whether its value is a secret (then a config error shows `[redacted]` instead).
 */
export interface ConfigField<Schema extends z.ZodType = z.ZodType> {
  env: string;
  schema: Schema;
  secret?: boolean;
}

export type ConfigFields = Record<string, ConfigField>;

/** The values an app's fields parse to. */
export type ConfigValues<F extends ConfigFields> = { [K in keyof F]: z.output<F[K]['schema']> };

/**
 * A rule across fields, run once every field is valid on its own (so it cannot be misleading):
 * return one problem per broken rule; `source(key)` names a field as the operator set it (the
 * variable, or the override's key).
 */
export type ConfigRule<C> = (config: C, source: (key: keyof C & string) => string) => string[];

export interface AppConfigDefinition<F extends ConfigFields> {
  fields: F;
  rules?: ConfigRule<Config & ConfigValues<F>>[];
}

export type AppConfigLoader<F extends ConfigFields> = (
  env?: Record<string, string | undefined>,
  overrides?: Partial<Config & ConfigValues<F>>,
) => Config & ConfigValues<F>;

const BASE_RULES: ConfigRule<Config>[] = [
  (config, source) => {
    if (config.aiProvider === 'openai' && !config.openaiApiKey)
      return [`${source('aiProvider')}: openai needs ${source('openaiApiKey')}`];
    if (config.aiProvider === 'replicate' && !config.replicateApiToken)
      return [`${source('aiProvider')}: replicate needs ${source('replicateApiToken')}`];
    return [];
  },
  (config, source) =>
    config.uploadMemoryBytes < config.maxUploadBytes
      ? [
          `${source('uploadMemoryBytes')}: must be at least ${source('maxUploadBytes')} (${config.maxUploadBytes}), or an upload of the largest allowed size could never be held (received ${config.uploadMemoryBytes})`,
        ]
      : [],
  (config, source) =>
    config.smtpUrl !== undefined && config.publicUrl === undefined
      ? [
          `${source('publicUrl')}: required with ${source('smtpUrl')}, so mailed reset links point at this server and not at whatever Host a request claims`,
        ]
      : [],
  (config, source) => {
    // Payments work with all three or not at all: half a setup would show a button that cannot work.
    const keys = ['stripeSecretKey', 'stripeWebhookSecret', 'stripePricePro'] as const;
    const missing = keys.filter((key) => config[key] === undefined);
    if (missing.length === 0 || missing.length === keys.length) return [];
    const given = keys.filter((key) => config[key] !== undefined).map(source);
    return missing.map(
      (key) =>
        `${source(key)}: required with ${given.join(' and ')} (payments need all three Stripe settings, or none)`,
    );
  },
];

type BaseData = z.output<typeof ConfigSchema>;

/** Defaults that depend on other fields, and the normalisations the base schema leaves to the end. */
function finishBase(data: BaseData): Config {
  return {
    ...data,
    // Left undefined by the schema when unset, so a rule can tell "set too small" from "default".
    uploadMemoryBytes: data.uploadMemoryBytes ?? Math.max(512 * 1024 * 1024, data.maxUploadBytes),
    dataDir: resolve(data.dataDir),
    databaseUrl: data.databaseUrl,
    concurrency: data.concurrency,
    redisUrl: data.redisUrl,
    blobDir: resolve(data.blobDir ?? join(data.dataDir, 'blobs')),
    s3Bucket: data.s3Bucket,
    s3Endpoint: data.s3Endpoint,
    s3AccessKeyId: data.s3AccessKeyId,
    s3SecretAccessKey: data.s3SecretAccessKey,
    s3ForcePathStyle: data.s3ForcePathStyle ?? data.s3Endpoint !== undefined,
    metricsToken: data.metricsToken,
    adminToken: data.adminToken,
    workers: data.workers,
    smtpUrl: data.smtpUrl,
    publicUrl: data.publicUrl?.replace(/\/+$/, ''),
    cookieSecure: data.cookieSecure,
    stripeSecretKey: data.stripeSecretKey,
    stripeWebhookSecret: data.stripeWebhookSecret,
    stripePricePro: data.stripePricePro,
    aiProvider: data.aiProvider,
    openaiApiKey: data.openaiApiKey,
    openaiBaseUrl: data.openaiBaseUrl.replace(/\/+$/, ''),
    replicateApiToken: data.replicateApiToken,
    replicateBaseUrl: data.replicateBaseUrl.replace(/\/+$/, ''),
    aiModelFast: data.aiModelFast,
    aiModelPhoto: data.aiModelPhoto,
    aiModelDesign: data.aiModelDesign,
    aiModelIcon: data.aiModelIcon,
    aiEditModel: data.aiEditModel,
    aiVisionModel: data.aiVisionModel,
  };
}

/**
 * A loader for an app's configuration: the base fields every Compresso process has (port, database,
 * queue, blobs, …) plus the app's own (`SHOPIFY_API_KEY`, …), read and checked together so an
 * invalid configuration fails with one ConfigError listing every problem, base and app alike.
 * Resolution order as for the base: explicit override, then the environment, then the default.
 */
export function defineConfig<F extends ConfigFields>(definition: AppConfigDefinition<F>): AppConfigLoader<F> {
  const envOf: Record<string, string> = { ...CONFIG_ENV };
  const secrets = new Set(BASE_SECRETS);
  const shape: Record<string, z.ZodType> = {};
  const takenEnv = new Map(Object.entries(CONFIG_ENV).map(([key, name]) => [name, key]));
  for (const [key, field] of Object.entries(definition.fields)) {
    // A clash would make one variable feed two settings, or an app silently replace a base check.
    if (key in CONFIG_ENV || key in shape) throw new Error(`config field ${key} is already defined`);
    const owner = takenEnv.get(field.env);
    if (owner) throw new Error(`config field ${key}: ${field.env} is already read by ${owner}`);
    takenEnv.set(field.env, key);
    envOf[key] = field.env;
    shape[key] = field.schema;
    if (field.secret) secrets.add(key);
  }
  const schema = ConfigSchema.extend(shape);
  const rules = [...BASE_RULES, ...(definition.rules ?? [])] as ConfigRule<Config & ConfigValues<F>>[];

  return (env = process.env, overrides = {}) => {
    const given = overrides as Record<string, unknown>;
    const raw: Record<string, unknown> = {};
    for (const [key, name] of Object.entries(envOf)) {
      const fromEnv = env[name];
      const value = given[key] !== undefined ? given[key] : fromEnv === '' ? undefined : fromEnv;
      if (value !== undefined) raw[key] = value;
    }
    const source = (key: string) => (given[key] !== undefined ? key : (envOf[key] ?? key));
    const result = schema.safeParse(raw);
    if (!result.success) {
      throw new ConfigError(
        result.error.issues.map((issue) => {
          const key = String(issue.path[0]);
          // Not set at all: say so plainly instead of zod's "expected string, received undefined".
          if (raw[key] === undefined) return `${source(key)}: required, not set`;
          const value = secrets.has(key) ? '[redacted]' : raw[key];
          return `${source(key)}: ${issue.message} (received ${JSON.stringify(withoutPassword(value))})`;
        }),
      );
    }
    const data = result.data as BaseData & ConfigValues<F>;
    const config = { ...data, ...finishBase(data) } as Config & ConfigValues<F>;
    const problems = rules.flatMap((rule) => rule(config, source));
    if (problems.length > 0) throw new ConfigError(problems);
    return config;
  };
}

const loadBaseConfig = defineConfig({ fields: {} });

/** The base configuration every Compresso process has; apps that add settings use defineConfig. */
export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  overrides: Partial<Config> = {},
): Config {
  return loadBaseConfig(env, overrides);
}
