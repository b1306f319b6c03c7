import type { BlobStore } from './blob-store.ts';
import { type Config, loadConfig } from './config.ts';
import type { Database } from './database.ts';
import { createLogger, type Logger } from './logger.ts';
import { openBlobStore } from './open-blob-store.ts';
import { type OpenDatabaseOptions, openDatabase } from './open-database.ts';
import { type OpenQueueOptions, openQueue } from './open-queue.ts';
import type { JobQueue } from './queue.ts';
import { exitOnSignals } from './signals.ts';

/** What every app process gets, opened in this order and closed in the reverse one. */
export interface ProcessContext<C extends Config = Config> {
  config: C;
  logger: Logger;
  db: Database;
  queue: JobQueue;
  blobs: BlobStore;
  /**
   * Register something the app opened (an HTTP server, an engine, a worker, a timer) to be closed
   * when the process stops. Closers run in the reverse order of registration, all of them before
   * the blob store, the queue and the database: register what must close last first.
   */
  onClose(what: string, close: () => Promise<void> | void): void;
}

export interface StartProcessOptions<C extends Config, A> {
  /** Names the process in log lines (`server`, `worker`, `shopify`). */
  name: string;
  /** Default process.env. */
  env?: Record<string, string | undefined>;
  /** Explicit settings; win over the environment. */
  overrides?: Partial<C>;
  /** The app's config loader (`defineConfig(...)`); default the base `loadConfig`. */
  loadConfig?: (env: Record<string, string | undefined>, overrides: Partial<C>) => C;
  /** Checks that need the whole config, before anything is opened: throw to refuse the start. */
  checkConfig?: (config: C) => void;
  /** Default: a pino logger at config.logLevel on stdout. */
  logger?: Logger;
  database?: OpenDatabaseOptions;
  queue?: OpenQueueOptions;
  /**
   * The app's own part: build on the context, register closers, return what callers need. When it
   * throws, everything opened so far is closed (in reverse) and the error is thrown on.
   */
  start(context: ProcessContext<C>): Promise<A>;
  /** Log lines for the close; default `<name> shutting down` and `<name> stopped`. */
  messages?: { closing?: string; closed?: string };
  /** Install SIGINT/SIGTERM handlers: first signal closes gracefully, a second exits at once. Default true. */
  handleSignals?: boolean;
}

export interface RunningProcess<C extends Config, A> {
  config: C;
  logger: Logger;
  db: Database;
  queue: JobQueue;
  blobs: BlobStore;
  /** What `start` returned. */
  app: A;
  /** Close everything in reverse order of opening; idempotent (every call gets the same promise). */
  close(): Promise<void>;
}

type Closer = { what: string; close: () => Promise<void> | void };

/**
 * Assemble an app process: config → logger → database → queue → blob store → the app's own start,
 * and close it all in reverse on close() or on SIGINT/SIGTERM. One implementation for `compresso
 * serve`, `compresso worker` and the integrations' processes, so the order (stop taking work, let
 * work in flight finish, then release connections) and the signal handling cannot drift between them.
 * A closer that fails is logged and the rest still run: a stuck S3 client must not leave the
 * database's connections open; the first failure is thrown once all have run.
 */
export async function startProcess<C extends Config = Config, A = undefined>(
  options: StartProcessOptions<C, A>,
): Promise<RunningProcess<C, A>> {
  const load = options.loadConfig ?? (loadConfig as unknown as NonNullable<typeof options.loadConfig>);
  const config = load(options.env ?? process.env, options.overrides ?? {});
  options.checkConfig?.(config);
  const logger = options.logger ?? createLogger(config);
  const closers: Closer[] = [];
  const closeAll = async () => {
    let failure: unknown;
    for (const closer of closers.splice(0).reverse()) {
      try {
        await closer.close();
      } catch (error) {
        logger.error({ err: error, closing: closer.what }, `${options.name}: closing ${closer.what} failed`);
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
  };

  let app: A;
  let db: Database;
  let queue: JobQueue;
  let blobs: BlobStore;
  try {
    db = await openDatabase(config, options.database);
    closers.push({ what: 'database', close: () => db.close() });
    queue = await openQueue(config, options.queue);
    closers.push({ what: 'queue', close: () => queue.close() });
    blobs = await openBlobStore(config);
    closers.push({ what: 'blob store', close: () => blobs.close() });
    app = await options.start({
      config,
      logger,
      db,
      queue,
      blobs,
      onClose: (what, close) => closers.push({ what, close }),
    });
  } catch (error) {
    // A start that fails (a port in use, a bad setting only the app can judge) must not leave
    // connections open: the process would hang instead of exiting with the error.
    await closeAll().catch(() => {});
    throw error;
  }

  let closing: Promise<void> | undefined;
  let removeSignals = () => {};
  const close = () => {
    closing ??= (async () => {
      logger.info(options.messages?.closing ?? `${options.name} shutting down`);
      try {
        await closeAll();
      } finally {
        // Closed by a call rather than a signal: a later signal has nothing left to close.
        removeSignals();
      }
      logger.info(options.messages?.closed ?? `${options.name} stopped`);
    })();
    return closing;
  };
  if (options.handleSignals !== false) removeSignals = exitOnSignals(logger, close, options.name);
  return { config, logger, db, queue, blobs, app, close };
}
