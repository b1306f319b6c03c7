/**
 * The test harness other packages' tests use (`@compresso/server/testing`): a real server on a
 * loopback port over a real SQLite database, accounts with keys, a fixture image, form helpers. An
 * entry of its own so tests import it by name rather than reaching into this package's files, and
 * so the package index (what `serve` loads) never pulls in sharp's test fixture code.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createEngine, type Engine } from '@compresso/engine';
import {
  applyPromo,
  type BlobStore,
  type Config,
  createAccount,
  createApiKey,
  createLogger,
  createPromoCode,
  type Database,
  type IdempotencyStore,
  type JobQueue,
  type Logger,
  loadConfig,
  sqliteDatabase,
} from '@compresso/runtime';
import sharp from 'sharp';
import type { AiProvider } from './ai/provider.ts';
import { createApp } from './app.ts';
import { type Billing, type BillingOptions, createBilling } from './billing/billing.ts';
import { createHttpServer } from './start.ts';

export interface TestServer {
  url: string;
  db: Database;
  config: Config;
  logLines: Record<string, unknown>[];
  rawLog: string[];
  dbPath: string;
  server: Server;
  engine: Engine;
  logger: Logger;
  /** Paid plans, when the STRIPE_* overrides are given (its sweep is for tests to call). */
  billing: Billing | undefined;
  close(): Promise<void>;
}

export function tempDir(): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'compresso-server-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A real server on a loopback port over a real SQLite file, logging into memory so tests can read the log. */
export async function startTestServer(
  options: {
    dbPath: string;
    overrides?: Partial<Config>;
    engine?: Engine;
    /** For batch jobs: the queue and blob store the app hands work to. */
    queue?: JobQueue;
    blobs?: BlobStore;
    /** The app's clock (quota day, throttle windows; see AppDeps.now); the system clock when not given. */
    now?: () => Date;
    /** Where Idempotency-Key answers are kept; the test database's own (`db.idempotency`) when not given. */
    idempotency?: IdempotencyStore;
    /** Where the Stripe client goes (a fake's `api`) and the origins its pages live at; with the STRIPE_* overrides. */
    billing?: BillingOptions;
    /** The AI provider (an adapter pointed at a fake); by default the one the config names. */
    ai?: AiProvider;
  } = { dbPath: ':memory:' },
): Promise<TestServer> {
  const config = loadConfig({}, { logLevel: 'info', maxUploadBytes: 1024 * 1024, ...options.overrides });
  const rawLog: string[] = [];
  const logLines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      const text = String(chunk);
      rawLog.push(text);
      for (const line of text.split('\n').filter(Boolean)) logLines.push(JSON.parse(line));
      done();
    },
  });
  const logger: Logger = createLogger(config, sink);
  const db = sqliteDatabase({ path: options.dbPath });
  await db.migrate();
  const engine =
    options.engine ?? createEngine({ concurrency: 2, limits: { maxInputBytes: config.maxUploadBytes } });
  const billing = createBilling(
    { db, logger, config, now: options.now ?? (() => new Date()) },
    options.billing,
  );
  const app = createApp({
    ...(billing ? { billing } : {}),
    engine,
    db,
    logger,
    config,
    ...(options.queue ? { queue: options.queue } : {}),
    ...(options.blobs ? { blobs: options.blobs } : {}),
    ...(options.now ? { now: options.now } : {}),
    ...(options.idempotency ? { idempotency: options.idempotency } : {}),
    ...(options.ai ? { ai: options.ai } : {}),
  });
  const server = createHttpServer(app, config);
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 2048 }, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    db,
    config,
    logLines,
    rawLog,
    dbPath: options.dbPath,
    server,
    engine,
    logger,
    billing,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await db.close();
    },
  };
}

let promoCounter = 0;

/** An account on the Pro plan (through a real promo code) and one key for it. */
export async function proAccount(
  db: Database,
  email: string,
): Promise<{ accountId: string; key: string; keyId: string }> {
  const account = await createAccount(db, email);
  const code = `TEST-${process.pid}-${++promoCounter}`;
  await createPromoCode(db, { code, plan: 'pro', uses: 1 });
  await applyPromo(db, email, code);
  const { key, secret } = await createApiKey(db, account.id, 'test');
  return { accountId: account.id, key: secret, keyId: key.id };
}

/** A 64×64 JPEG with some texture, made once: cheap to compress, real enough to shrink. */
let fixture: Buffer | undefined;
export async function smallJpeg(): Promise<Buffer> {
  if (fixture) return fixture;
  const pixels = Buffer.alloc(64 * 64 * 3);
  for (let y = 0; y < 64; y++) {
    for (let x = 0; x < 64; x++) {
      const i = (y * 64 + x) * 3;
      pixels[i] = x * 4;
      pixels[i + 1] = y * 4;
      pixels[i + 2] = (x * y) % 256;
    }
  }
  fixture = await sharp(pixels, { raw: { width: 64, height: 64, channels: 3 } })
    .jpeg({ quality: 95 })
    .toBuffer();
  return fixture;
}

export function form(
  file: Uint8Array | undefined,
  fields: Record<string, string> = {},
  filename = 'photo.jpg',
): FormData {
  const body = new FormData();
  for (const [name, value] of Object.entries(fields)) body.append(name, value);
  if (file) body.append('file', new Blob([new Uint8Array(file)], { type: 'image/jpeg' }), filename);
  return body;
}

export function bearer(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` };
}

/** The token of the last sign-up link a server logged (no SMTP_URL: the log is the mailbox). */
export function signupTokenFromLog(rawLog: string[]): string {
  const all = [...rawLog.join('').matchAll(/\/signup\/([A-Za-z0-9_-]{60,1200})/g)];
  const token = all.at(-1)?.[1];
  if (!token) throw new Error('no sign-up link in the log');
  return token;
}

export {
  type FakeProvider,
  type FakeRequest,
  fakeOpenAi,
  fakeReplicate,
  gradientPng,
  type OpenAiFakeMode,
  type ReplicateFakeMode,
} from './ai/fakes.ts';
export { replicateProvider } from './ai/replicate.ts';
/** A loopback fake of Stripe's API and hosted pages, for tests of paid plans. */
export { type FakeStripe, type FakeStripeOptions, startFakeStripe } from './billing/fake-stripe.ts';
/**
 * A compress endpoint run by a hostile server (crafted Content-Disposition and X-Output-Format), for
 * the clients' tests that they never write outside the folder they were given.
 */
export {
  filesUnder,
  HOSTILE_DISPOSITIONS,
  HOSTILE_FORMATS,
  type HostileServer,
  startHostileServer,
} from './hostile-server.ts';
/** The batch worker, for tests that run jobs against a test server's queue and blob store. */
export { startBatchWorker } from './jobs/worker.ts';
/** The account password hash the web pages store, for tests that seed an account with a password. */
export { hashPassword } from './web/passwords.ts';
/** A cookie-keeping HTTP client for the web pages (sign-in, forms with their CSRF tokens). */
export { Browser } from './web/test-browser.ts';
