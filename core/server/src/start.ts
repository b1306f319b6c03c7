import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createEngine, type Engine } from '@compresso/engine';
import {
  type BlobStore,
  type Config,
  type Database,
  type JobQueue,
  type Logger,
  type ProcessContext,
  type QueueWorker,
  startProcess,
} from '@compresso/runtime';
import { CompressoError } from '@compresso/schema';
import type express from 'express';
import { createApp } from './app.ts';
import { createBilling, startBillingSweep } from './billing/billing.ts';
import { deferContinue } from './expect-continue.ts';
import { logQueueErrors, requeueQueuedItems, startBatchWorker, startSweeper } from './jobs/worker.ts';
import { createMetrics } from './metrics.ts';

/**
 * An http.Server around the app with the timeouts that bound what a slow client can hold:
 * requestTimeout caps the whole request (headers and body), headersTimeout the headers, and the
 * connection check runs every second so those limits are enforced promptly (Node's default is 30 s).
 * No socket inactivity timeout: a long AVIF encode leaves the socket idle while the client waits
 * legitimately.
 */
export function createHttpServer(app: express.Express, config: Pick<Config, 'requestTimeoutMs'>): Server {
  const server = createServer(
    {
      requestTimeout: config.requestTimeoutMs,
      headersTimeout: Math.min(config.requestTimeoutMs, 20_000),
      connectionsCheckingInterval: 1000,
    },
    app,
  );
  server.keepAliveTimeout = 5000;
  // With a checkContinue listener Node does not answer `Expect: 100-continue` itself; the app sends
  // the 100 only when a handler starts reading the body (after auth, plan, quota and size checks).
  server.on('checkContinue', (req, res) => {
    deferContinue(res);
    app(req, res);
  });
  return server;
}

export interface RunningServer {
  server: Server;
  url: string;
  config: Config;
  db: Database;
  logger: Logger;
  engine: Engine;
  queue: JobQueue;
  blobs: BlobStore;
  /** This process's batch workers (`--workers`), when it runs any. */
  worker: QueueWorker | undefined;
  /** Stop accepting connections, finish in-flight requests (up to shutdownTimeoutMs), close the database. */
  close(): Promise<void>;
}

export interface StartOptions {
  env?: Record<string, string | undefined>;
  overrides?: Partial<Config>;
  logger?: Logger;
  /** Install SIGINT/SIGTERM handlers that close gracefully. Default true. */
  handleSignals?: boolean;
}

export async function startServer(options: StartOptions = {}): Promise<RunningServer> {
  const running = await startProcess<Config, ServerParts>({
    name: 'server',
    ...(options.env ? { env: options.env } : {}),
    ...(options.overrides ? { overrides: options.overrides } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    handleSignals: options.handleSignals !== false,
    messages: { closing: 'shutting down: finishing in-flight requests', closed: 'stopped' },
    start: serve,
  });
  const { config, db, logger, queue, blobs, app, close } = running;
  return { ...app, config, db, logger, queue, blobs, close };
}

interface ServerParts {
  server: Server;
  url: string;
  engine: Engine;
  worker: QueueWorker | undefined;
}

/** The server's own part of the process: engine, app, HTTP, and batch work when it runs any. */
async function serve(context: ProcessContext): Promise<ServerParts> {
  const { config, logger, db, queue, blobs, onClose } = context;
  // With the in-process queue nothing but this process can run batch items, so it runs them by
  // default; with Redis the worker service does, unless asked (`serve --workers N`).
  const workers = config.workers ?? (queue.kind === 'inline' ? 1 : 0);
  if (workers === 0 && queue.kind === 'inline') {
    throw new Error(
      'COMPRESSO_WORKERS=0 (--workers 0) needs REDIS_URL and `compresso worker` processes: with the in-process queue, batch jobs would never run.',
    );
  }
  const engine = createEngine({
    limits: { maxInputBytes: config.maxUploadBytes },
    ...(config.concurrency ? { concurrency: config.concurrency } : {}),
    memoryBudget: config.memoryBudgetMiB * 1024 * 1024,
  });
  // Closed after the HTTP server and the workers (closers run in reverse): an image whose client
  // went away is still being worked on; let it finish (the engine's own time limit bounds it) and
  // stop the HEIC/metric worker threads before the database closes.
  onClose('engine', () => engine.close());
  const metrics = createMetrics({ engine, queue, logger });
  onClose('queue metrics', metrics.watchQueue(queue));
  onClose('queue log', logQueueErrors(queue, logger));
  // Paid Pro (STRIPE_* set): a once-a-minute sweep ends plans whose grace or cancelled period ran out.
  const billing = createBilling({ db, logger, config, now: () => new Date() });
  if (billing) {
    const stopSweep = startBillingSweep(billing, logger);
    // After the HTTP server (closers run in reverse): events already answered finish being handled.
    onClose('billing', async () => {
      stopSweep();
      await billing.settled();
    });
  }
  const app = createApp({
    engine,
    db,
    logger,
    config,
    queue,
    blobs,
    metrics,
    ...(billing ? { billing } : {}),
  });
  const server = createHttpServer(app, config);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    // A port in use or not allowed: startProcess closes what was opened (Redis and database
    // connections) so the process ends with the error instead of hanging on open handles.
    throw listenError(error, config.host, config.port);
  }
  // Batch work starts only once this process has its port: a second `serve` started by mistake on
  // the same data directory fails above before it can take the first one's queued items.
  let worker: QueueWorker | undefined;
  if (workers > 0) {
    const batchWorker = startBatchWorker({ queue, db, blobs, engine, logger, config, concurrency: workers });
    worker = batchWorker;
    // Batch items in flight finish within the grace period or go back to the queue.
    onClose('batch worker', () => batchWorker.close({ timeoutMs: config.shutdownTimeoutMs }));
    // All of them at once, without the sweep's grace: this queue is new, so every item the database
    // has queued was lost with the previous process. The sweep then keeps it that way. Re-adding an
    // item a request queued meanwhile is harmless: job ids make adds idempotent.
    if (queue.kind === 'inline') await requeueQueuedItems(db, queue, logger);
    const batchSweeper = startSweeper({ db, queue, logger, config });
    onClose('batch sweep', () => batchSweeper.close());
  }
  // Registered last, so closed first: stop taking requests before anything they use goes away.
  onClose('http server', () => closeHttpServer(server, config, logger));
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host === '0.0.0.0' || host === '[::]' ? 'localhost' : host}:${address.port}`;
  logger.info(
    {
      url,
      database: db.kind,
      data_dir: config.dataDir,
      engine: engine.stats(),
      queue: queue.kind,
      blobs: blobs.kind,
      workers,
      metrics: config.metricsToken ? 'on' : 'off',
      payments: billing ? 'stripe' : 'off',
    },
    'compresso server listening',
  );

  if ((await db.countAccounts()) === 0) {
    // First start: say how to get in, without creating or printing any secret.
    logger.warn(
      {
        // As typed in the clone, where `compresso` is not on the PATH but `npx compresso` finds it.
        next_steps: [
          'npx compresso account create --email you@example.com',
          'npx compresso promo create LAUNCH --plan pro --uses 1',
          'npx compresso account plan you@example.com --promo LAUNCH',
          'npx compresso keys create --account you@example.com --name laptop',
        ],
      },
      // The CLI must reach the same database. The PostgreSQL URL is not repeated: it may hold a password.
      `No accounts yet. Create the first account and API key with the CLI (${config.databaseUrl ? 'with the same DATABASE_URL' : `same COMPRESSO_DATA_DIR=${config.dataDir}`}); the key is shown once by the last command. Or make the promo code with the CLI, then sign up at ${url}/signup and enter it in the account area, where Generate API Key makes the key.`,
    );
  }
  return { server, url, engine, worker };
}

/** Stop accepting connections and let in-flight requests finish, up to shutdownTimeoutMs. */
async function closeHttpServer(
  server: Server,
  config: Pick<Config, 'shutdownTimeoutMs'>,
  logger: Logger,
): Promise<void> {
  const done = new Promise<void>((resolve) => server.close(() => resolve()));
  // A keep-alive connection whose request finishes during shutdown becomes idle and would otherwise
  // hold close() open until keepAliveTimeout: sweep idle connections until everything is closed.
  server.closeIdleConnections();
  const sweeper = setInterval(() => server.closeIdleConnections(), 100);
  sweeper.unref();
  const timer = setTimeout(() => {
    logger.warn({ timeout_ms: config.shutdownTimeoutMs }, 'shutdown timeout: closing remaining connections');
    server.closeAllConnections();
  }, config.shutdownTimeoutMs);
  timer.unref();
  await done;
  clearInterval(sweeper);
  clearTimeout(timer);
}

/**
 * The listen failures an operator causes (a port in use, a privileged port, an address this machine
 * does not have) as a CompressoError that says what to change; anything else as it came.
 */
function listenError(error: unknown, host: string, port: number): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const where = `${host}:${port}`;
  const fix = 'choose another with --port or PORT (and --host or HOST)';
  const message =
    code === 'EADDRINUSE'
      ? `${where} is already in use (another compresso serve?). Stop that process, or ${fix}.`
      : code === 'EACCES'
        ? `No permission to listen on ${where} (ports below 1024 need privileges); ${fix}.`
        : code === 'EADDRNOTAVAIL'
          ? `${host} is not an address of this machine; ${fix}.`
          : undefined;
  return message ? new CompressoError('SERVICE_UNAVAILABLE', message, { cause: error }) : error;
}
