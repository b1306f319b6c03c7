import { resolve } from 'node:path';
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
  /** Longest wait for in-flight requests on SIGINT/SIGTERM, in ms (COMPRESSO_SHUTDOWN_TIMEOUT_MS). */
  shutdownTimeoutMs: number;
}

const intFrom = (min: number, max: number) =>
  z
    .union([z.int(), z.string().regex(/^\s*\d+\s*$/, 'expected a whole number')])
    .transform((v) => Number(v))
    .pipe(z.int().min(min).max(max));

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
  shutdownTimeoutMs: intFrom(0, 600_000).default(30_000),
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
  shutdownTimeoutMs: 'COMPRESSO_SHUTDOWN_TIMEOUT_MS',
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

type ConfigInput = { [K in keyof Config]?: Config[K] | string | undefined };

export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  overrides: Partial<Config> = {},
): Config {
  const raw: ConfigInput = {};
  for (const key of Object.keys(CONFIG_ENV) as (keyof Config)[]) {
    const fromEnv = env[CONFIG_ENV[key]];
    const value = overrides[key] !== undefined ? overrides[key] : fromEnv === '' ? undefined : fromEnv;
    if (value !== undefined) (raw as Record<string, unknown>)[key] = value;
  }
  const result = ConfigSchema.safeParse(raw);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => {
      const key = String(issue.path[0]) as keyof Config;
      const source = overrides[key] !== undefined ? key : `${CONFIG_ENV[key] ?? key}`;
      const value = (raw as Record<string, unknown>)[key];
      return `${source}: ${issue.message} (received ${JSON.stringify(withoutPassword(value))})`;
    });
    throw new ConfigError(problems);
  }
  const data = result.data;
  // A cross-field rule, checked once every field is valid on its own (so it cannot be misleading).
  if (data.uploadMemoryBytes !== undefined && data.uploadMemoryBytes < data.maxUploadBytes) {
    const source = (key: keyof Config) => (overrides[key] !== undefined ? key : CONFIG_ENV[key]);
    throw new ConfigError([
      `${source('uploadMemoryBytes')}: must be at least ${source('maxUploadBytes')} (${data.maxUploadBytes}), or an upload of the largest allowed size could never be held (received ${data.uploadMemoryBytes})`,
    ]);
  }
  return {
    ...data,
    uploadMemoryBytes: data.uploadMemoryBytes ?? Math.max(512 * 1024 * 1024, data.maxUploadBytes),
    dataDir: resolve(data.dataDir),
    databaseUrl: data.databaseUrl,
    concurrency: data.concurrency,
  };
}
