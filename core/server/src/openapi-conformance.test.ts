import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import {
  type BlobStore,
  fileBlobStore,
  inlineQueue,
  type JobQueue,
  type QueueWorker,
} from '@compresso/runtime';
import { API_ROUTES, ROUTE_IDS } from '@compresso/schema';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type FakeProvider, fakeOpenAi, gradientPng } from './ai/fakes.ts';
import { startBatchWorker } from './jobs/worker.ts';
import { bearer, form, proAccount, smallJpeg, startTestServer, type TestServer, tempDir } from './testing.ts';

/**
 * The OpenAPI document against what the server really sends: every route of the table is called on
 * a real server (port 0, SQLite, the in-process queue and a worker), for its success and its
 * documented refusals, and each answer is checked against the document the same server publishes —
 * the status is documented for the operation, a JSON body validates against its schema, every
 * header marked required is sent and parses as its type, and no X-*, RateLimit-*, Retry-After or
 * Location header is sent that the document does not describe for that answer.
 */
type Json = Record<string, unknown>;
interface Operation {
  operationId: string;
  responses: Record<
    string,
    {
      headers?: Record<string, { required?: boolean; schema: { type: string } }>;
      content?: Record<string, { schema: Json }>;
    }
  >;
}

const tmp = tempDir();
let srv: TestServer;
let queue: JobQueue;
let blobs: BlobStore;
let worker: QueueWorker;
let images: Server;
let doc: { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Json> } };
let key: string;
let ai: FakeProvider;
const seen = new Set<string>();

function resolveRefs(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(resolveRefs);
  if (!schema || typeof schema !== 'object') return schema;
  const ref = (schema as { $ref?: string }).$ref;
  if (ref) return resolveRefs(doc.components.schemas[ref.replace('#/components/schemas/', '')]);
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, resolveRefs(v)]));
}

const CHECKED_HEADER = /^(x-|ratelimit-|retry-after$|location$)/;
/** Browser hardening (nosniff, framing) the answers carry, not facts of the API. */
const HARDENING = new Set(['x-content-type-options', 'x-frame-options']);

const ADMIN_TOKEN = 'conformance-operator-token-0123456789';

/** Call one route and check the answer against the published document. */
async function call(
  id: (typeof ROUTE_IDS)[number],
  init: RequestInit & { params?: Record<string, string | number> } = {},
  expectStatus?: number,
): Promise<Response> {
  const route = API_ROUTES[id];
  const path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => String(init.params?.[name]));
  const res = await fetch(`${srv.url}${path}`, { method: route.method, ...init });
  const status = String(res.status);
  if (expectStatus !== undefined) expect(res.status, `${id}: ${await res.clone().text()}`).toBe(expectStatus);
  const operation = doc.paths[route.path]?.[route.method.toLowerCase()];
  expect(operation?.operationId, id).toBe(id);
  const documented = operation!.responses[status];
  expect(documented, `${id} answered ${status}, which its operation does not document`).toBeDefined();
  seen.add(`${id} ${status}`);
  const headers = Object.fromEntries(
    Object.entries(documented!.headers ?? {}).map(([name, spec]) => [name.toLowerCase(), spec]),
  );
  for (const [name, spec] of Object.entries(headers)) {
    const value = res.headers.get(name);
    if (spec.required) expect(value, `${id} ${status}: header ${name} is required`).not.toBeNull();
    if (value === null) continue;
    if (spec.schema.type === 'integer') expect(value, `${id}: ${name}`).toMatch(/^-?\d+$/);
    if (spec.schema.type === 'number')
      expect(Number.isFinite(Number(value)), `${id}: ${name}=${value}`).toBe(true);
    if (spec.schema.type === 'boolean') expect(['true', 'false'], `${id}: ${name}`).toContain(value);
  }
  for (const name of res.headers.keys()) {
    if (CHECKED_HEADER.test(name) && !HARDENING.has(name)) {
      expect(
        headers[name],
        `${id} ${status} sends ${name}, which the document does not describe`,
      ).toBeDefined();
    }
  }
  const type = (res.headers.get('content-type') ?? '').split(';')[0]!;
  const content = documented!.content;
  if (content) expect(Object.keys(content), `${id} ${status}: Content-Type ${type}`).toContain(type);
  if (type === 'application/json' && content?.[type]) {
    const schema = z.fromJSONSchema(resolveRefs(content[type]!.schema) as never);
    const body = await res.clone().json();
    const parsed = schema.safeParse(body);
    expect(
      parsed.success,
      `${id} ${status}: ${JSON.stringify(parsed.error?.issues)} in ${JSON.stringify(body)}`,
    ).toBe(true);
  }
  return res;
}

beforeAll(async () => {
  queue = inlineQueue({ attempts: 1, backoff: { type: 'fixed', delayMs: 10 } });
  blobs = fileBlobStore({ root: join(tmp.dir, 'blobs') });
  ai = await fakeOpenAi({ apiKey: 'sk-conformance' });
  srv = await startTestServer({
    dbPath: join(tmp.dir, 'conformance.sqlite'),
    overrides: {
      fetchAllowPrivate: true,
      adminToken: ADMIN_TOKEN,
      openaiApiKey: 'sk-conformance',
      openaiBaseUrl: ai.url,
      aiTimeoutMs: 1000,
    },
    queue,
    blobs,
  });
  worker = startBatchWorker({
    queue,
    db: srv.db,
    blobs,
    engine: srv.engine,
    logger: srv.logger,
    config: srv.config,
    concurrency: 2,
  });
  const jpeg = await smallJpeg();
  images = createServer((_req, res) => {
    res.setHeader('Content-Type', 'image/jpeg');
    res.end(jpeg);
  });
  await new Promise<void>((resolve) => images.listen(0, '127.0.0.1', resolve));
  doc = (await (await fetch(`${srv.url}/api/v1/openapi.json`)).json()) as typeof doc;
  ({ key } = await proAccount(srv.db, 'conformance@example.com'));
});

afterAll(async () => {
  await worker.close({ timeoutMs: 1000 });
  await queue.close();
  await srv.close();
  await blobs.close();
  await new Promise((resolve) => images.close(resolve));
  await ai.close();
  tmp.cleanup();
});

async function finished(id: string): Promise<{ items: { status: string }[] }> {
  for (;;) {
    const res = await call('getJob', { headers: bearer(key), params: { id } }, 200);
    const view = (await res.json()) as { status: string; items: { status: string }[] };
    if (view.status === 'completed') return view;
    // Each poll is a real request; the worker finishes in milliseconds, so a few polls suffice.
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('the OpenAPI document describes what the server sends', () => {
  it('on every route, for its success and its refusals', { timeout: 60_000 }, async () => {
    const jpeg = await smallJpeg();
    await call('healthz', {}, 200);
    await call('readyz', {}, 200);
    await call('openapi', {}, 200);
    await call('docs', {}, 200);

    await call(
      'compress',
      { headers: bearer(key), body: form(jpeg, { quality: 'auto', output_format: 'webp' }) },
      200,
    );
    await call(
      'compress',
      { headers: bearer(key), body: form(jpeg, { output_format: 'avif', max_dimension: '32' }) },
      200,
    );
    await call('compress', { headers: bearer(key), body: form(jpeg) }, 200);
    const bad = await call('compress', { headers: bearer(key), body: form(jpeg, { quality: '0' }) }, 400);
    expect(((await bad.json()) as { error: { details: unknown } }).error.details).toEqual([
      { field: 'quality', expected: expect.any(String), received: '"0"' },
    ]);
    await call(
      'compress',
      { headers: bearer(key), body: form(new TextEncoder().encode('not an image')) },
      415,
    );
    await call('info', { headers: bearer(key), body: form(jpeg, { quality: 'auto' }) }, 200);
    await call('info', { headers: bearer(key), body: form(undefined) }, 400);

    const operatorJson = (token: string) => ({
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
    });
    await call(
      'createOperatorAccount',
      {
        headers: operatorJson(ADMIN_TOKEN),
        body: JSON.stringify({ email: 'shop@example.com', plan: 'pro' }),
      },
      201,
    );
    await call(
      'createOperatorAccount',
      { headers: operatorJson(key), body: JSON.stringify({ email: 'a@b.co' }) },
      401,
    );
    await call(
      'createOperatorAccount',
      { headers: operatorJson(ADMIN_TOKEN), body: JSON.stringify({ email: 1 }) },
      400,
    );

    const created = await call(
      'createKey',
      {
        headers: { ...bearer(key), 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'ci' }),
      },
      201,
    );
    const badKey = await call(
      'createKey',
      { headers: { ...bearer(key), 'content-type': 'application/json' }, body: JSON.stringify({ name: 5 }) },
      400,
    );
    expect(((await badKey.json()) as { error: { details: unknown } }).error.details).toEqual([
      { field: 'name', expected: expect.any(String), received: '5' },
    ]);
    await call('listKeys', { headers: bearer(key) }, 200);
    const { id } = (await created.json()) as { id: string };
    await call('revokeKey', { headers: bearer(key), params: { id } }, 200);
    await call('revokeKey', { headers: bearer(key), params: { id: 'key_unknown' } }, 404);
    await call('usage', { headers: bearer(key) }, 200);

    const upload = new FormData();
    upload.append('quality', '70');
    for (const name of ['a.jpg', 'b.jpg']) upload.append('file', new Blob([new Uint8Array(jpeg)]), name);
    const job = (await (await call('createJob', { headers: bearer(key), body: upload }, 202)).json()) as {
      id: string;
    };
    const byUrl = await call(
      'createJob',
      {
        headers: { ...bearer(key), 'content-type': 'application/json' },
        body: JSON.stringify({
          urls: [`http://127.0.0.1:${(images.address() as AddressInfo).port}/photo.jpg`],
        }),
      },
      202,
    );
    const badBatch = await call(
      'createJob',
      { headers: { ...bearer(key), 'content-type': 'application/json' }, body: JSON.stringify({ urls: [] }) },
      400,
    );
    expect(((await badBatch.json()) as { error: { details: unknown } }).error.details).toEqual([
      { field: 'urls', expected: expect.any(String), received: '[]' },
    ]);
    expect((await finished(job.id)).items.map((i) => i.status)).toEqual(['done', 'done']);
    expect((await finished(((await byUrl.json()) as { id: string }).id)).items.map((i) => i.status)).toEqual([
      'done',
    ]);
    await call('getJob', { headers: bearer(key), params: { id: 'job_unknown' } }, 404);
    await call('getJobItem', { headers: bearer(key), params: { id: job.id, index: 1 } }, 200);
    await call('getJobItem', { headers: bearer(key), params: { id: job.id, index: 7 } }, 404);

    const generate = (body: unknown) => ({
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    await call('generate', generate({ prompt: 'a kite', aspect_ratio: '16:9', output_format: 'webp' }), 200);
    await call('generate', generate({ prompt: '' }), 400);
    for (const [mode, status] of [
      ['content-policy', 422],
      ['rate-limit', 503],
      ['malformed', 502],
      ['slow', 504],
    ] as const) {
      ai.mode = mode;
      await call('generate', generate({ prompt: 'a kite' }), status);
    }
    ai.mode = 'ok';
    await call(
      'edit',
      { headers: bearer(key), body: form(jpeg, { instruction: 'rotate left and convert to webp' }) },
      200,
    );
    await call(
      'edit',
      { headers: bearer(key), body: form(jpeg, { instruction: 'remove the background' }) },
      200,
    );
    await call('edit', { headers: bearer(key), body: form(jpeg, { instruction: 'make it pop' }) }, 422);
    await call('edit', { headers: bearer(key), body: form(jpeg, { instruction: 'quality 0' }) }, 400);
    await call(
      'altText',
      { headers: bearer(key), body: form(await gradientPng(40, 30), { vendor: 'Acme' }) },
      200,
    );
    await call('altText', { headers: bearer(key), body: form(jpeg, { language: 'not a tag' }) }, 400);

    for (const id of ROUTE_IDS) {
      if (API_ROUTES[id].auth === 'key') await call(id, { params: { id: 'x', index: 0 } }, 401);
    }
  });

  it('has exercised the success of every route of the table', () => {
    for (const id of ROUTE_IDS) expect(seen, id).toContain(`${id} ${API_ROUTES[id].status}`);
  });

  it('answers every other method on a route of the table with 405, Allow and the error body', async () => {
    for (const id of ROUTE_IDS) {
      const { path } = API_ROUTES[id];
      const allowed = ROUTE_IDS.filter((other) => API_ROUTES[other].path === path).map(
        (o) => API_ROUTES[o].method,
      );
      // The table's methods are GET, POST and DELETE: PUT is never one of them.
      const other = 'PUT';
      const res = await fetch(`${srv.url}${path.replace(/\{\w+\}/g, '1')}`, { method: other });
      expect(res.status, `${other} ${path}`).toBe(405);
      expect(res.headers.get('allow')).toBe(allowed.join(', '));
      const body = (await res.json()) as { error: { code: string } };
      expect(body.error.code).toBe('METHOD_NOT_ALLOWED');
    }
  });
});
