import { createHash, timingSafeEqual } from 'node:crypto';
import { type Engine, heicDecoderStats } from '@compresso/engine';
import type { JobQueue, Logger, QueueCounts } from '@compresso/runtime';
import { CompressoError } from '@compresso/schema';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/**
 * Prometheus metrics of one process, in a registry of its own (not prom-client's global one), so
 * several apps in one test process never share or double-register series.
 *
 * Labels are bounded on purpose: `route` is the express route template (`/api/v1/jobs/:id`), never the
 * raw path, and requests no route matched share `(unmatched)` — a scanner probing random paths must
 * not be able to create a series per path.
 */
export interface Metrics {
  readonly registry: Registry;
  /** Counts and times every request; install before the routes. */
  observe: RequestHandler;
  /** Count this process's queue workers' outcomes (completed, failed, retried). Returns the unsubscribe. */
  watchQueue(queue: JobQueue): () => void;
}

export interface MetricsDeps {
  engine: Engine;
  /** Queue depth comes from here (queue-wide, whichever process asks). */
  queue?: JobQueue;
  logger?: Logger;
}

const UNMATCHED = '(unmatched)';

/** Seconds: from a cached JSON answer (~1 ms) to a slow AVIF encode (~10 s). */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

function routeOf(req: Request): string {
  const route = (req as Request & { route?: { path?: unknown } }).route;
  if (!route || route.path === undefined) return UNMATCHED;
  return `${req.baseUrl ?? ''}${String(route.path)}`;
}

export function createMetrics(deps: MetricsDeps): Metrics {
  const { engine, queue, logger } = deps;
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'compresso_' });

  const labelNames = ['method', 'route', 'status'] as const;
  const requests = new Counter({
    name: 'compresso_http_requests_total',
    help: 'HTTP requests answered, by route template and status.',
    labelNames,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'compresso_http_request_duration_seconds',
    help: 'Time from the request arriving to the last byte of the answer, by route template and status.',
    labelNames,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const received = new Counter({
    name: 'compresso_http_received_bytes_total',
    help: 'Bytes read from clients (headers and body, as on the wire), by route template.',
    labelNames: ['route'],
    registers: [registry],
  });
  const sent = new Counter({
    name: 'compresso_http_sent_bytes_total',
    help: 'Bytes written to clients (headers and body, as on the wire), by route template.',
    labelNames: ['route'],
    registers: [registry],
  });
  new Gauge({
    name: 'compresso_engine_images',
    help: 'Images in the engine now: state="active" being processed, state="waiting" queued for a slot.',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const stats = engine.stats();
      this.set({ state: 'active' }, stats.active);
      this.set({ state: 'waiting' }, stats.waiting);
    },
  });
  new Gauge({
    name: 'compresso_engine_concurrency',
    help: 'Images in sharp at once, the engine semaphore (COMPRESSO_CONCURRENCY).',
    registers: [registry],
    collect() {
      this.set(engine.stats().concurrency);
    },
  });
  new Gauge({
    name: 'compresso_engine_memory_bytes',
    help: 'Estimated native memory of the images in the engine: state="in_use" admitted, state="waiting" queued for room in the budget.',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const stats = engine.stats();
      this.set({ state: 'in_use' }, stats.memoryInUse);
      this.set({ state: 'waiting' }, stats.memoryWaiting);
    },
  });
  new Gauge({
    name: 'compresso_engine_memory_budget_bytes',
    help: 'Estimated native memory the images in flight may hold together (COMPRESSO_MEMORY_BUDGET_MB).',
    registers: [registry],
    collect() {
      this.set(engine.stats().memoryBudget);
    },
  });
  new Gauge({
    name: 'compresso_sharp_threads_per_image',
    help: 'libvips threads per image (sharp.concurrency()): 1 on glibc unless MALLOC_ARENA_MAX is set, else the cores.',
    registers: [registry],
    collect() {
      this.set(engine.stats().threadsPerImage);
    },
  });
  new Gauge({
    name: 'compresso_heic_decoder_images',
    help: 'HEIC images in the decoder worker threads: state="running" or "waiting" for a thread.',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const heic = heicDecoderStats();
      this.set({ state: 'running' }, heic.running);
      this.set({ state: 'waiting' }, heic.waiting);
    },
  });
  if (queue) {
    // One counts() round trip per scrape, shared by both gauges: prom-client runs their collect()
    // concurrently, so each awaits the same answer instead of one reading the other's stale value.
    let pending: Promise<QueueCounts | undefined> | undefined;
    const countsOnce = () => {
      pending ??= queue
        .counts()
        .catch((err: unknown) => {
          // A scrape during a Redis outage still answers, with the outage in compresso_queue_up.
          logger?.warn({ err }, 'metrics: queue counts unavailable');
          return undefined;
        })
        .finally(() => {
          pending = undefined;
        });
      return pending;
    };
    new Gauge({
      name: 'compresso_queue_up',
      help: '1 when the job queue answered this scrape, 0 when it did not (e.g. Redis down).',
      registers: [registry],
      async collect() {
        this.set((await countsOnce()) ? 1 : 0);
      },
    });
    new Gauge({
      name: 'compresso_queue_jobs',
      help: 'Jobs in the queue by state (queue-wide, all processes): waiting, active, delayed, failed, completed.',
      labelNames: ['queue', 'state'],
      registers: [registry],
      async collect() {
        const counts = await countsOnce();
        if (!counts) return;
        for (const [state, n] of Object.entries(counts)) this.set({ queue: queue.name, state }, n);
      },
    });
  }
  const jobOutcomes = new Counter({
    name: 'compresso_jobs_total',
    help: "Job attempts finished by this process's workers: outcome completed, retried (failed, will run again) or failed (for good).",
    labelNames: ['name', 'outcome'],
    registers: [registry],
  });
  const jobDuration = new Histogram({
    name: 'compresso_job_duration_seconds',
    help: "Duration of job attempts in this process's workers, by job name and outcome.",
    labelNames: ['name', 'outcome'],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });

  const seen = new WeakMap<object, { read: number; written: number }>();
  const observe: RequestHandler = (req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint();
    const socket = req.socket;
    let done = false;
    const record = () => {
      if (done) return;
      done = true;
      const labels = { method: req.method, route: routeOf(req), status: String(res.statusCode) };
      requests.inc(labels);
      duration.observe(labels, Number(process.hrtime.bigint() - started) / 1e9);
      // What the connection carried since the previous request on it ended: a small body arrives in
      // the same read as its headers, before any middleware runs, so a delta from here would miss it.
      // Exact for HTTP/1.1 keep-alive, where a connection carries one request at a time.
      const before = seen.get(socket) ?? { read: 0, written: 0 };
      const now = { read: socket.bytesRead, written: socket.bytesWritten };
      seen.set(socket, now);
      received.inc({ route: labels.route }, Math.max(0, now.read - before.read));
      sent.inc({ route: labels.route }, Math.max(0, now.written - before.written));
    };
    res.once('finish', record);
    res.once('close', record);
    next();
  };

  return {
    registry,
    observe,
    watchQueue(watched) {
      return watched.on((event) => {
        if (event.type === 'completed') {
          jobOutcomes.inc({ name: event.name, outcome: 'completed' });
          jobDuration.observe({ name: event.name, outcome: 'completed' }, event.durationMs / 1000);
        } else if (event.type === 'failed') {
          const outcome = event.willRetry ? 'retried' : 'failed';
          jobOutcomes.inc({ name: event.name, outcome });
          jobDuration.observe({ name: event.name, outcome }, event.durationMs / 1000);
        }
      });
    },
  };
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * GET /metrics behind its own bearer token (METRICS_TOKEN), separate from API keys: a scraper's
 * credential should open the metrics and nothing else. Without a token configured the endpoint does
 * not exist (404), so a forgotten setting never publishes process internals.
 */
export function metricsEndpoint(metrics: Metrics, token: string | undefined): RequestHandler {
  const expected = token === undefined ? undefined : digest(token);
  return async (req: Request, res: Response) => {
    if (!expected) {
      throw new CompressoError(
        'NOT_FOUND',
        'Metrics are off on this server: set METRICS_TOKEN (at least 16 characters) to serve /metrics.',
      );
    }
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? '');
    // Compared as digests: equal lengths for timingSafeEqual, and no timing hint about the token.
    if (!match || !timingSafeEqual(digest(match[1]!), expected)) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="metrics"');
      throw new CompressoError(
        'UNAUTHENTICATED',
        'Send the metrics token as "Authorization: Bearer <token>".',
      );
    }
    res.setHeader('Content-Type', metrics.registry.contentType);
    res.setHeader('Cache-Control', 'no-store');
    res.end(await metrics.registry.metrics());
  };
}
