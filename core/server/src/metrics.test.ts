import { createEngine, DEFAULT_MEMORY_BUDGET } from '@compresso/engine';
import { inlineQueue } from '@compresso/runtime';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { createMetrics } from './metrics.ts';
import { bearer, form, proAccount, smallJpeg, startTestServer, type TestServer } from './testing.ts';

const TOKEN = 'metrics-token-0123456789abcdef';

/** One sample's value from the Prometheus text format, or undefined when the series is absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

const servers: TestServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

describe('GET /metrics', () => {
  it('does not exist without METRICS_TOKEN: 404 that says how to turn it on', async () => {
    const srv = await startTestServer();
    servers.push(srv);
    const res = await fetch(`${srv.url}/metrics`, { headers: bearer(TOKEN) });
    expect(res.status).toBe(404);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('NOT_FOUND');
    expect(body.error.message).toContain('METRICS_TOKEN');
  });

  it('wants its own token: none, a wrong one, or an API key answer 401', async () => {
    const srv = await startTestServer({ dbPath: ':memory:', overrides: { metricsToken: TOKEN } });
    servers.push(srv);
    const { key } = await proAccount(srv.db, 'metrics-auth@example.com');
    for (const headers of [{}, bearer(`${TOKEN}x`), bearer(key), { authorization: TOKEN }]) {
      const res = await fetch(`${srv.url}/metrics`, { headers });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toContain('Bearer');
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('UNAUTHENTICATED');
    }
    expect((await fetch(`${srv.url}/metrics`, { method: 'POST', headers: bearer(TOKEN) })).status).toBe(405);
  });

  it('counts requests by route template and status, times them, and counts bytes, engine and process', async () => {
    const srv = await startTestServer({ dbPath: ':memory:', overrides: { metricsToken: TOKEN } });
    servers.push(srv);
    const { key } = await proAccount(srv.db, 'metrics@example.com');
    const image = await smallJpeg();
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: bearer(key),
        body: form(image, { output_format: 'webp' }),
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    // Three different raw ids, one template: one series.
    for (const id of ['key_aaaaaaaaaaaa', 'key_bbbbbbbbbbbb', 'key_cccccccccccc']) {
      expect(
        (await fetch(`${srv.url}/api/v1/keys/${id}`, { method: 'DELETE', headers: bearer(key) })).status,
      ).toBe(404);
    }
    for (const path of ['/wp-login.php', '/.env', '/random/probe/123']) {
      expect((await fetch(`${srv.url}${path}`)).status).toBe(404);
    }

    const res = await fetch(`${srv.url}/metrics`, { headers: bearer(TOKEN) });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();

    expect(
      sample(text, 'compresso_http_requests_total', {
        method: 'POST',
        route: '/api/v1/compress',
        status: '200',
      }),
    ).toBe(3);
    expect(
      sample(text, 'compresso_http_requests_total', {
        method: 'DELETE',
        route: '/api/v1/keys/:id',
        status: '404',
      }),
    ).toBe(3);
    expect(sample(text, 'compresso_http_requests_total', { route: '(unmatched)', status: '404' })).toBe(3);
    // No raw path ever becomes a label.
    expect(text).not.toContain('key_aaaaaaaaaaaa');
    expect(text).not.toContain('wp-login');

    expect(
      sample(text, 'compresso_http_request_duration_seconds_count', {
        method: 'POST',
        route: '/api/v1/compress',
        status: '200',
      }),
    ).toBe(3);
    const slowest = sample(text, 'compresso_http_request_duration_seconds_bucket', {
      route: '/api/v1/compress',
      le: '+Inf',
    });
    expect(slowest).toBe(3);

    // Each upload carries the whole image; each answer a WebP and headers.
    expect(
      sample(text, 'compresso_http_received_bytes_total', { route: '/api/v1/compress' }),
    ).toBeGreaterThan(3 * image.length);
    expect(sample(text, 'compresso_http_sent_bytes_total', { route: '/api/v1/compress' })).toBeGreaterThan(
      3 * 200,
    );

    expect(sample(text, 'compresso_engine_concurrency')).toBe(2);
    expect(sample(text, 'compresso_sharp_threads_per_image')).toBe(sharp.concurrency());
    expect(sample(text, 'compresso_engine_images', { state: 'active' })).toBe(0);
    expect(sample(text, 'compresso_engine_images', { state: 'waiting' })).toBe(0);
    expect(sample(text, 'compresso_engine_memory_budget_bytes')).toBe(DEFAULT_MEMORY_BUDGET);
    expect(sample(text, 'compresso_engine_memory_bytes', { state: 'in_use' })).toBe(0);
    expect(sample(text, 'compresso_engine_memory_bytes', { state: 'waiting' })).toBe(0);
    expect(sample(text, 'compresso_heic_decoder_images', { state: 'running' })).toBe(0);
    expect(sample(text, 'compresso_process_resident_memory_bytes')).toBeGreaterThan(10 * 1024 * 1024);
    expect(text).toContain('# TYPE compresso_http_request_duration_seconds histogram');
  });
});

describe('queue metrics', () => {
  it('queue depth by state, and the outcomes of this process’s job attempts', async () => {
    const queue = inlineQueue({ attempts: 2, backoff: { type: 'fixed', delayMs: 10 } });
    const metrics = createMetrics({ engine: createEngine({ concurrency: 1 }), queue });
    const unwatch = metrics.watchQueue(queue);
    try {
      const worker = queue.work({
        ok: async () => 'fine',
        broken: async () => {
          throw new Error('always');
        },
      });
      await queue.add('ok', {}, { jobId: 'ok-1' });
      await queue.add('broken', {}, { jobId: 'broken-1' });
      await queue.add('ok', {}, { jobId: 'ok-2' });
      // A hang guard, not a speed check.
      const deadline = Date.now() + 30_000;
      while ((await queue.counts()).failed < 1 || (await queue.counts()).completed < 2) {
        if (Date.now() > deadline) throw new Error(JSON.stringify(await queue.counts()));
        await new Promise((r) => setTimeout(r, 10));
      }
      await worker.close();
      const text = await metrics.registry.metrics();
      expect(sample(text, 'compresso_jobs_total', { name: 'ok', outcome: 'completed' })).toBe(2);
      expect(sample(text, 'compresso_jobs_total', { name: 'broken', outcome: 'retried' })).toBe(1);
      expect(sample(text, 'compresso_jobs_total', { name: 'broken', outcome: 'failed' })).toBe(1);
      expect(sample(text, 'compresso_job_duration_seconds_count', { name: 'ok', outcome: 'completed' })).toBe(
        2,
      );
      expect(sample(text, 'compresso_queue_jobs', { queue: 'compresso', state: 'failed' })).toBe(1);
      expect(sample(text, 'compresso_queue_jobs', { queue: 'compresso', state: 'completed' })).toBe(2);
      expect(sample(text, 'compresso_queue_jobs', { queue: 'compresso', state: 'waiting' })).toBe(0);
      expect(sample(text, 'compresso_queue_up')).toBe(1);
    } finally {
      unwatch();
      await queue.close();
    }
  });
});
