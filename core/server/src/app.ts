import { randomUUID } from 'node:crypto';
import type { Engine } from '@compresso/engine';
import {
  type BlobStore,
  type Config,
  createApiKey,
  type Database,
  type IdempotencyStore,
  type JobQueue,
  type Logger,
  listApiKeys,
  MAX_KEY_NAME,
  nextReset,
  revokeApiKey,
  secondsUntilReset,
} from '@compresso/runtime';
import { CompressoError, CreateKeyRequestSchema, fieldProblems, KEY_NAME_MAX } from '@compresso/schema';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { AiProvider } from './ai/provider.ts';
import { registerAiRoutes } from './ai/routes.ts';
import { aiProviderFromConfig } from './ai/select.ts';
import { authOf, requireApiKey } from './auth.ts';
import { type Billing, type BillingOptions, createBilling } from './billing/billing.ts';
import { stripeWebhookRouter } from './billing/webhook.ts';
import { optimizeUpload, readImageUpload, sendCompressed, setInfoHeaders } from './compress-response.ts';
import { docsContent } from './docs.ts';
import { errorHandler, sendError } from './errors.ts';
import { sendContinue } from './expect-continue.ts';
import { createIdempotency, fingerprintOf } from './idempotency.ts';
import { registerBatchRoutes } from './jobs/routes.ts';
import { createMetrics, type Metrics, metricsEndpoint } from './metrics.ts';
import { openApiDocument } from './openapi.ts';
import { registerOperatorRoutes } from './operator.ts';
import { routeRegistrar } from './routes.ts';
import { createUploadBudget } from './upload-budget.ts';
import { accountRouter } from './web/account.ts';
import { compressorRouter } from './web/compressor.ts';
import { page, sendPage } from './web/layout.ts';
import { sessionOf } from './web/session.ts';

export interface AppDeps {
  engine: Engine;
  db: Database;
  logger: Logger;
  config: Config;
  /** The job queue, for batch jobs and the queue-depth metrics; batch routes answer 503 without one. */
  queue?: JobQueue;
  /** Where batch originals and results live; needed with `queue`. */
  blobs?: BlobStore;
  /** Shared with the process's workers (job outcomes); made here when not given. */
  metrics?: Metrics;
  /**
   * The one clock the app reads: the API quota (its UTC day, reset time and Retry-After) and the web
   * pages (throttle windows, session and link expiry); the system clock by default. Injected by tests,
   * so a run that crosses 00:00 UTC neither breaks them nor goes untested.
   */
  now?: () => Date;
  /**
   * Where first answers to `Idempotency-Key` requests are kept (see idempotency.ts); the database's
   * own store (`db.idempotency`, exact across every process on it) when not given.
   */
  idempotency?: IdempotencyStore;
  /**
   * Paid Pro through Stripe (with the STRIPE_* settings): made here from the config when not given;
   * `billingOptions` points it elsewhere (the tests' fake of Stripe's API).
   */
  billing?: Billing;
  billingOptions?: BillingOptions;
  /**
   * The AI provider of /generate, /edit (generative phrases) and /alt-text; by default the one the
   * configuration names (OPENAI_API_KEY, REPLICATE_API_TOKEN), none when it names none.
   */
  ai?: AiProvider | undefined;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

// The contract's key-name bound is the one the runtime stores; a mismatch is a bug at start.
if (KEY_NAME_MAX !== MAX_KEY_NAME)
  throw new Error('KEY_NAME_MAX (schema) differs from MAX_KEY_NAME (runtime)');

/** Routes outside the API table (operators'), for their 405 answers. */
const OPERATOR_ROUTES: Record<string, string[]> = { '/metrics': ['GET'] };

export function createApp(deps: AppDeps): express.Express {
  const { engine, db, logger, config } = deps;
  const idempotencyStore = deps.idempotency ?? db.idempotency;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Query strings are not part of this API; the simple parser cannot build nested objects from them.
  app.set('query parser', 'simple');
  // Whose X-Forwarded-For/-Proto to believe (TRUST_PROXY, validated at start): req.ip then is the
  // client's address, which keys every throttle and the visitor allowance, and req.secure follows the
  // scheme the client used. Default false: the socket's address, never a header a client can write.
  app.set('trust proxy', config.trustProxy);

  app.use((req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint();
    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    (req as Request & { requestId?: string }).requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    let logged = false;
    const log = (aborted: boolean) => {
      if (logged) return;
      logged = true;
      const auth = res.locals.auth as { account: { id: string }; key: { id: string } } | undefined;
      // One line per request. Deliberately no headers, query or body: keys and images never reach the log.
      logger.info(
        {
          request_id: requestId,
          method: req.method,
          path: req.path.length > 200 ? `${req.path.slice(0, 200)}…` : req.path,
          status: res.statusCode,
          duration_ms: Math.round(Number(process.hrtime.bigint() - started) / 1e5) / 10,
          bytes_in: Number(req.headers['content-length'] ?? 0) || undefined,
          bytes_out: Number(res.getHeader('content-length') ?? 0) || undefined,
          account_id: auth?.account.id,
          key_id: auth?.key.id,
          ...(aborted ? { aborted: true } : {}),
        },
        'request',
      );
    };
    res.on('finish', () => log(false));
    res.on('close', () => log(!res.writableFinished));
    next();
  });

  const metrics = deps.metrics ?? createMetrics({ engine, queue: deps.queue, logger });
  app.use(metrics.observe);
  app.get('/metrics', metricsEndpoint(metrics, config.metricsToken));

  const routes = routeRegistrar(app);
  routes.add('healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  routes.add('readyz', async (_req, res) => {
    try {
      await db.ping();
      res.json({ status: 'ready', database: db.kind });
    } catch (err) {
      logger.error({ err }, 'readiness check failed');
      throw new CompressoError('SERVICE_UNAVAILABLE', 'The database does not answer.');
    }
  });

  const document = openApiDocument(config);
  routes.add('openapi', (_req, res) => {
    res.json(document);
  });
  app.get('/docs', (_req, res) => {
    res.redirect(301, '/api/v1/docs');
  });

  const now = deps.now ?? (() => new Date());
  const auth = requireApiKey({ db, config, logger, now });
  const authOverQuota = requireApiKey({ db, config, logger, now }, { allowOverQuota: true });
  const uploadLimits = {
    maxBytes: config.maxUploadBytes,
    idleTimeoutMs: config.idleTimeoutMs,
    budget: createUploadBudget(config.uploadMemoryBytes),
  };

  // Compress, info and jobs take an Idempotency-Key: counted once it is claimed, answered once.
  const authIdempotent = requireApiKey({ db, config, logger, now }, { idempotent: true });
  const idempotency = createIdempotency({
    store: idempotencyStore,
    blobs: deps.blobs,
    logger,
    now,
  });
  const readImage = (req: Request, res: Response) =>
    readImageUpload(req, res, { ...uploadLimits, owner: authOf(res).account.id });
  const imageFingerprint = (req: Request, upload: Awaited<ReturnType<typeof readImage>>) =>
    fingerprintOf(req, { fields: upload.fields, files: [{ name: upload.filename, bytes: upload.file }] });

  routes.add('compress', authIdempotent, async (req, res) => {
    const upload = await readImage(req, res);
    await idempotency.run(req, res, imageFingerprint(req, upload), async () => {
      sendCompressed(res, upload, await optimizeUpload(engine, upload));
    });
  });

  routes.add('info', authIdempotent, async (req, res) => {
    const upload = await readImage(req, res);
    await idempotency.run(req, res, imageFingerprint(req, upload), async () => {
      const output = await optimizeUpload(engine, upload);
      setInfoHeaders(res, output.info);
      res.json(output.info);
    });
  });

  const continueBody = (req: Request, res: Response, next: NextFunction) => {
    sendContinue(req, res);
    next();
  };

  routes.add(
    'createKey',
    auth,
    continueBody,
    express.json({ limit: '4kb', strict: true }),
    async (req, res) => {
      const parsed = CreateKeyRequestSchema.safeParse(req.body ?? {});
      if (!parsed.success) {
        throw new CompressoError(
          'INVALID_REQUEST',
          `Expected an optional JSON body {"name": "<at most ${MAX_KEY_NAME} characters>"}.`,
          {
            details: fieldProblems(parsed.error.issues, req.body ?? {}),
          },
        );
      }
      const { key, secret } = await createApiKey(db, authOf(res).account.id, parsed.data.name);
      res.status(201).json({ ...key, key: secret });
    },
  );

  routes.add('listKeys', auth, async (_req, res) => {
    res.json({ keys: await listApiKeys(db, authOf(res).account.id) });
  });

  routes.add('revokeKey', authOverQuota, async (req, res) => {
    const id = String(req.params.id);
    await revokeApiKey(db, id, authOf(res).account.id);
    res.json({ id, revoked: true });
  });

  registerBatchRoutes(routes, {
    db,
    config,
    logger,
    queue: deps.queue,
    blobs: deps.blobs,
    budget: uploadLimits.budget,
    auth: authIdempotent,
    idempotency,
    authNoCount: requireApiKey({ db, config, logger, now }, { count: false }),
  });

  registerOperatorRoutes(routes, { db, logger, adminToken: config.adminToken });
  const ai = 'ai' in deps ? deps.ai : aiProviderFromConfig(config);
  registerAiRoutes(routes, {
    engine,
    config,
    logger,
    provider: ai,
    auth: authIdempotent,
    idempotency,
    continueBody,
    readImage,
  });

  routes.add('usage', auth, (_req, res) => {
    const state = authOf(res);
    // The reset belongs to the day the request was counted on: the same reading of the clock.
    const at = state.at;
    res.json({
      plan: state.account.plan,
      day: state.day,
      used: state.used,
      limit: state.limit,
      remaining: Math.max(0, state.limit - state.used),
      resets_at: nextReset(at).toISOString(),
      resets_in_seconds: secondsUntilReset(at),
    });
  });

  // Before the web routers: Stripe's deliveries carry no session, and their raw body must stay unparsed.
  const billing = deps.billing ?? createBilling({ db, logger, config, now }, deps.billingOptions);
  if (billing) app.use(stripeWebhookRouter(billing, logger));
  // First of the web routers: its session middleware sets res.locals.session for the ones after it.
  app.use(accountRouter({ db, logger, config, now, ...(billing ? { billing } : {}) }));
  app.use(compressorRouter({ engine, db, logger, config, uploadLimits, now, ai }));
  // After the session middleware, so the reference's navigation shows who is signed in.
  const docsBody = docsContent(document);
  routes.add('docs', (_req, res) => {
    sendPage(
      res,
      page({
        title: 'API reference',
        session: sessionOf(res),
        current: 'docs',
        styles: ['/static/docs.css'],
        body: docsBody,
      }),
    );
  });

  for (const [path, methods] of routes.finish(OPERATOR_ROUTES)) {
    app.all(path, (req, res) => {
      res.setHeader('Allow', methods.join(', '));
      sendError(
        res,
        req,
        new CompressoError(
          'METHOD_NOT_ALLOWED',
          `${req.method} is not allowed on ${req.path}; use ${methods.join(', ')}.`,
        ),
      );
    });
  }

  app.use((req: Request, res: Response) => {
    sendError(res, req, new CompressoError('NOT_FOUND', `No route ${req.method} ${req.path}.`));
  });
  app.use(errorHandler(logger));
  return app;
}
