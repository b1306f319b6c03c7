import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import {
  type BlobStore,
  fileBlobStore,
  inlineQueue,
  type JobQueue,
  type loadConfig,
  type QueueWorker,
  quotaDay,
} from '@compresso/runtime';
import { CompressoError } from '@compresso/schema';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, proAccount, startTestServer, type TestServer, tempDir } from '../testing.ts';
import { BATCH_ITEM_JOB, batchHandlers } from './batch.ts';
import { requeueQueuedItems, startBatchWorker } from './worker.ts';

const corpus = join(import.meta.dirname, '../../../../../shared/corpus');
const tmp = tempDir();

interface ItemView {
  index: number;
  name: string;
  status: string;
  input_size: number | null;
  output_size: number | null;
  savings_percent: number | null;
  output_format: string | null;
  output_name: string | null;
  error: { code: string; message: string } | null;
  download_url: string | null;
}
interface JobView {
  id: string;
  status: string;
  status_url: string;
  progress: { total: number; done: number; failed: number; queued: number; percent: number };
  items: ItemView[];
}

/** Real corpus images, made small so a batch finishes in well under a second. */
async function corpusImages(): Promise<{ name: string; bytes: Buffer }[]> {
  return Promise.all(
    [
      ['photo-skimage-rocket.jpg', 'jpeg'],
      ['icon-oxygen-folder-red.png', 'png'],
      ['photo-skimage-chelsea.png', 'png'],
      ['graphic-skimage-text.png', 'png'],
    ].map(async ([name, format]) => ({
      name: name!,
      bytes: await sharp(join(corpus, name!))
        .resize(96, 96, { fit: 'inside' })
        .toFormat(format as 'jpeg' | 'png', { quality: 95 })
        .toBuffer(),
    })),
  );
}

function batchForm(
  files: { name: string; bytes: Uint8Array }[],
  fields: Record<string, string> = {},
): FormData {
  const body = new FormData();
  for (const [k, v] of Object.entries(fields)) body.append(k, v);
  for (const f of files) body.append('file', new Blob([new Uint8Array(f.bytes)]), f.name);
  return body;
}

interface Harness {
  srv: TestServer;
  queue: JobQueue;
  blobs: BlobStore;
  worker: QueueWorker | undefined;
  close(): Promise<void>;
}

let counter = 0;
async function harness(overrides: Parameters<typeof loadConfig>[1] = {}, work = true): Promise<Harness> {
  const queue = inlineQueue({ attempts: 2, backoff: { type: 'fixed', delayMs: 50 } });
  const blobs = fileBlobStore({ root: join(tmp.dir, `blobs-${++counter}`) });
  const srv = await startTestServer({
    dbPath: join(tmp.dir, `jobs-${counter}.sqlite`),
    overrides: { jobAttempts: 2, ...overrides },
    queue,
    blobs,
  });
  const worker = work
    ? startBatchWorker({
        queue,
        db: srv.db,
        blobs,
        engine: srv.engine,
        logger: srv.logger,
        config: srv.config,
        concurrency: 2,
      })
    : undefined;
  return {
    srv,
    queue,
    blobs,
    worker,
    async close() {
      await worker?.close({ timeoutMs: 1000 });
      await queue.close();
      await srv.close();
      await blobs.close();
    },
  };
}

async function until(
  srv: TestServer,
  key: string,
  id: string,
  done: (v: JobView) => boolean,
): Promise<JobView> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const res = await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(key) });
    expect(res.status).toBe(200);
    const view = (await res.json()) as JobView;
    if (done(view)) return view;
    if (Date.now() > deadline) throw new Error(`job ${id} did not finish: ${JSON.stringify(view.progress)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function postEarly(
  url: string,
  headers: Record<string, string>,
  form: FormData,
): Promise<{ status: number; body: { error: { code: string; message: string } } }> {
  const encoded = new Response(form);
  const bytes = Buffer.from(await encoded.arrayBuffer());
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      headers: {
        ...headers,
        'content-type': encoded.headers.get('content-type')!,
        'content-length': bytes.length,
      },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }),
      );
    });
    let answered = false;
    req.on('response', () => {
      answered = true;
    });
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    req.end(bytes);
  });
}

let origin: Server;
let originUrl: string;
let images: { name: string; bytes: Buffer }[];

beforeAll(async () => {
  images = await corpusImages();
  origin = createServer((req, res) => {
    const found = images.find((i) => req.url === `/img/${i.name}`);
    if (!found) {
      res.statusCode = 404;
      res.end();
      return;
    }
    res.setHeader('content-type', 'application/octet-stream');
    res.end(found.bytes);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
});
afterAll(() => {
  origin.close();
  tmp.cleanup();
});

describe('POST /api/v1/jobs with files', () => {
  it('queues every file, answers 202 at once, and finishes each item with its result or its error', async () => {
    const h = await harness();
    try {
      const { key, accountId } = await proAccount(h.srv.db, 'batch@example.com');
      const files = [...images, { name: 'broken.jpg', bytes: images[0]!.bytes.subarray(0, 300) }];
      const res = await fetch(`${h.srv.url}/api/v1/jobs`, {
        method: 'POST',
        headers: bearer(key),
        body: batchForm(files, { output_format: 'webp', quality: '70' }),
      });
      expect(res.status).toBe(202);
      const submitted = (await res.json()) as JobView;
      expect(res.headers.get('location')).toBe(`/api/v1/jobs/${submitted.id}`);
      expect(submitted.status_url).toBe(`/api/v1/jobs/${submitted.id}`);
      expect(submitted.progress.total).toBe(5);
      expect(submitted.items.map((i) => i.name)).toEqual(files.map((f) => f.name));

      const view = await until(h.srv, key, submitted.id, (v) => v.status === 'completed');
      expect(view.progress).toEqual({ total: 5, done: 4, failed: 1, queued: 0, percent: 100 });
      for (const item of view.items.slice(0, 4)) {
        expect(item).toMatchObject({ status: 'done', output_format: 'webp', error: null });
        expect(item.input_size).toBe(files[item.index]!.bytes.length);
        expect(item.download_url).toBe(`/api/v1/jobs/${submitted.id}/items/${item.index}`);
        const got = await fetch(`${h.srv.url}${item.download_url}`, { headers: bearer(key) });
        expect(got.status).toBe(200);
        expect(got.headers.get('content-type')).toBe('image/webp');
        expect(got.headers.get('content-disposition')).toContain(`filename="${item.output_name}"`);
        const bytes = Buffer.from(await got.arrayBuffer());
        expect(bytes.length).toBe(item.output_size);
        expect((await sharp(bytes).metadata()).format).toBe('webp');
      }
      const broken = view.items[4]!;
      expect(broken.status).toBe('failed');
      expect(broken.error?.code).toBe('CORRUPT_IMAGE');
      expect(broken.download_url).toBeNull();
      const refused = await fetch(`${h.srv.url}/api/v1/jobs/${submitted.id}/items/4`, {
        headers: bearer(key),
      });
      expect(refused.status).toBe(409);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('CONFLICT');

      // Five items, five requests: polling and downloads were not counted; the corrupt file counts.
      expect(await h.srv.db.usageOn(accountId, quotaDay())).toBe(5);
    } finally {
      await h.close();
    }
  });

  it("another account's job answers 404 like an unknown one; bad indexes 404", async () => {
    const h = await harness();
    try {
      const owner = await proAccount(h.srv.db, 'owner@example.com');
      const other = await proAccount(h.srv.db, 'other@example.com');
      const res = await fetch(`${h.srv.url}/api/v1/jobs`, {
        method: 'POST',
        headers: bearer(owner.key),
        body: batchForm(images.slice(0, 1)),
      });
      const { id } = (await res.json()) as JobView;
      await until(h.srv, owner.key, id, (v) => v.status === 'completed');
      for (const path of [`/api/v1/jobs/${id}`, `/api/v1/jobs/${id}/items/0`, '/api/v1/jobs/job_nope']) {
        const r = await fetch(`${h.srv.url}${path}`, { headers: bearer(other.key) });
        expect(r.status, path).toBe(404);
        expect(((await r.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
      }
      for (const index of ['1', '-1', 'x', '99999999']) {
        const r = await fetch(`${h.srv.url}/api/v1/jobs/${id}/items/${index}`, {
          headers: bearer(owner.key),
        });
        expect(r.status, index).toBe(404);
      }
      expect((await fetch(`${h.srv.url}/api/v1/jobs/${id}`)).status).toBe(401);
      expect(
        (await fetch(`${h.srv.url}/api/v1/jobs/${id}`, { method: 'DELETE', headers: bearer(owner.key) }))
          .status,
      ).toBe(405);
    } finally {
      await h.close();
    }
  });

  it('refuses bad requests with the field named, before counting more than the request', async () => {
    const h = await harness({ maxBatchItems: 3 });
    try {
      const { key, accountId } = await proAccount(h.srv.db, 'bad@example.com');
      const post = (body: FormData | string, type?: string) =>
        fetch(`${h.srv.url}/api/v1/jobs`, {
          method: 'POST',
          headers: { ...bearer(key), ...(type ? { 'content-type': type } : {}) },
          body,
        }).then(async (r) => ({
          status: r.status,
          body: (await r.json()) as { error: { code: string; message: string; details?: unknown } },
        }));
      const badOption = await post(batchForm(images.slice(0, 2), { quality: '500' }));
      expect(badOption.status).toBe(400);
      expect(badOption.body.error.code).toBe('INVALID_OPTION');
      expect(JSON.stringify(badOption.body.error.details)).toContain('quality');
      const none = await post(batchForm([], { output_format: 'webp' }));
      expect(none.body.error.code).toBe('MISSING_FILE');
      // Refused at the fourth file part, before the body is read to its end: the server answers and
      // closes, so the client may still be writing (fetch reports that as a failure); read the answer
      // with node:http, which hands over the response whatever happens to the rest of the upload.
      const many = await postEarly(`${h.srv.url}/api/v1/jobs`, bearer(key), batchForm(images));
      expect(many.status).toBe(400);
      expect(many.body.error.message).toContain('at most 3');
      const text = await post('hello', 'text/plain');
      expect(text.body.error.code).toBe('INVALID_REQUEST');
      // Each refused request counted once (a 4xx counts); none reserved its items.
      expect(await h.srv.db.usageOn(accountId, quotaDay())).toBe(4);
    } finally {
      await h.close();
    }
  });

  it('counts a batch of n as n requests, all or none: a batch that does not fit is refused whole with 429', async () => {
    const h = await harness({ proDailyLimit: 5 });
    try {
      const { key, accountId } = await proAccount(h.srv.db, 'quota@example.com');
      const six = [...images, ...images.slice(0, 2)];
      const refused = await fetch(`${h.srv.url}/api/v1/jobs`, {
        method: 'POST',
        headers: bearer(key),
        body: batchForm(six),
      });
      expect(refused.status).toBe(429);
      const body = (await refused.json()) as {
        error: { code: string; details: { items: number; remaining: number } };
      };
      expect(body.error.code).toBe('QUOTA_EXCEEDED');
      expect(body.error.details).toMatchObject({ items: 6, remaining: 5 });
      expect(await h.srv.db.usageOn(accountId, quotaDay())).toBe(0);

      const ok = await fetch(`${h.srv.url}/api/v1/jobs`, {
        method: 'POST',
        headers: bearer(key),
        body: batchForm([...images, images[0]!]),
      });
      expect(ok.status).toBe(202);
      expect(await h.srv.db.usageOn(accountId, quotaDay())).toBe(5);
      const { id } = (await ok.json()) as JobView;
      // Progress can still be read with the quota used up.
      const view = await until(h.srv, key, id, (v) => v.status === 'completed');
      expect(view.progress.done).toBe(5);
      expect((await fetch(`${h.srv.url}/api/v1/usage`, { headers: bearer(key) })).status).toBe(429);
    } finally {
      await h.close();
    }
  });
});

describe('POST /api/v1/jobs with URLs', () => {
  it('fetches each URL in the worker; an origin 404 fails that item alone', async () => {
    const h = await harness({ fetchAllowPrivate: true });
    try {
      const { key } = await proAccount(h.srv.db, 'urls@example.com');
      const res = await fetch(`${h.srv.url}/api/v1/jobs`, {
        method: 'POST',
        headers: { ...bearer(key), 'content-type': 'application/json' },
        body: JSON.stringify({
          urls: [
            `${originUrl}/img/${images[0]!.name}`,
            `${originUrl}/img/${images[1]!.name}`,
            `${originUrl}/img/missing.png`,
          ],
          options: { output_format: 'avif', max_dimension: 64 },
        }),
      });
      expect(res.status).toBe(202);
      const { id } = (await res.json()) as JobView;
      const view = await until(h.srv, key, id, (v) => v.status === 'completed');
      expect(view.items.map((i) => [i.name, i.status, i.output_format, i.error?.code ?? null])).toEqual([
        [images[0]!.name, 'done', 'avif', null],
        [images[1]!.name, 'done', 'avif', null],
        ['missing.png', 'failed', null, 'URL_FETCH_FAILED'],
      ]);
      expect(view.items[0]!.input_size).toBe(images[0]!.bytes.length);
    } finally {
      await h.close();
    }
  });

  it('refuses private and non-http URLs at submission unless allowed', async () => {
    const h = await harness();
    try {
      const { key } = await proAccount(h.srv.db, 'ssrf@example.com');
      for (const url of [
        'http://169.254.169.254/latest/meta-data/',
        'http://127.0.0.1:6379/',
        'http://[::1]/x.png',
        'file:///etc/passwd',
      ]) {
        const res = await fetch(`${h.srv.url}/api/v1/jobs`, {
          method: 'POST',
          headers: { ...bearer(key), 'content-type': 'application/json' },
          body: JSON.stringify({ urls: ['https://example.com/a.jpg', url] }),
        });
        expect(res.status, url).toBe(400);
        const body = (await res.json()) as { error: { code: string; message: string } };
        expect(body.error.code).toBe('URL_NOT_ALLOWED');
        expect(body.error.message).toMatch(/^urls\[1\]: expected/);
      }
      // A name that resolves to loopback passes the submission check and fails in the worker.
      const res = await fetch(`${h.srv.url}/api/v1/jobs`, {
        method: 'POST',
        headers: { ...bearer(key), 'content-type': 'application/json' },
        body: JSON.stringify({
          urls: [`${originUrl.replace('127.0.0.1', 'localhost')}/img/${images[0]!.name}`],
        }),
      });
      expect(res.status).toBe(202);
      const { id } = (await res.json()) as JobView;
      const view = await until(h.srv, key, id, (v) => v.status === 'completed');
      expect(view.items[0]!.error?.code).toBe('URL_NOT_ALLOWED');
    } finally {
      await h.close();
    }
  });
});

describe('the worker side', () => {
  it('an item run twice is recorded once (a retry or a takeover never finishes it twice)', async () => {
    const h = await harness({}, false);
    try {
      const { key } = await proAccount(h.srv.db, 'twice@example.com');
      const res = await fetch(`${h.srv.url}/api/v1/jobs`, {
        method: 'POST',
        headers: bearer(key),
        body: batchForm(images.slice(0, 1)),
      });
      const { id } = (await res.json()) as JobView;
      const handler = batchHandlers({
        db: h.srv.db,
        blobs: h.blobs,
        engine: h.srv.engine,
        logger: h.srv.logger,
        attempts: 2,
        fetchLimits: { allowPrivate: false, timeoutMs: 1000, maxBytes: 1 << 20 },
      })[BATCH_ITEM_JOB]!;
      const context = (attempt: number) => ({
        id: `${id}-0`,
        name: BATCH_ITEM_JOB,
        data: { batchId: id, index: 0 },
        attempt,
        signal: new AbortController().signal,
        updateProgress: async () => {},
      });
      // Two runs at once (a stalled job taken over while the first still runs): one write wins.
      const both = await Promise.all([handler(context(1)), handler(context(2))]);
      expect(both.filter((r) => (r as { done?: boolean }).done === true)).toHaveLength(1);
      // A run after it finished is skipped outright.
      expect(await handler(context(2))).toEqual({ skipped: 'done' });
      const item = await h.srv.db.findBatchItem(id, 0);
      expect(item?.status).toBe('done');
    } finally {
      await h.close();
    }
  });

  it('an outage of the blob store is waited out without spending the last attempt; closing ends the wait', async () => {
    const h = await harness({}, false);
    try {
      const { key, accountId } = await proAccount(h.srv.db, 'outage@example.com');
      const res = await fetch(`${h.srv.url}/api/v1/jobs`, {
        method: 'POST',
        headers: bearer(key),
        body: batchForm(images.slice(0, 2)),
      });
      const { id } = (await res.json()) as JobView;
      // The real store behind a switch: while `down`, writes fail as an unreachable S3 endpoint does.
      let down = true;
      let refused = 0;
      const flaky: BlobStore = {
        ...h.blobs,
        put: async (...args: Parameters<BlobStore['put']>) => {
          if (down) {
            refused++;
            throw new CompressoError('SERVICE_UNAVAILABLE', 'The blob store is unavailable.');
          }
          return h.blobs.put(...args);
        },
      };
      const handler = batchHandlers({
        db: h.srv.db,
        blobs: flaky,
        engine: h.srv.engine,
        logger: h.srv.logger,
        attempts: 1,
        fetchLimits: { allowPrivate: false, timeoutMs: 1000, maxBytes: 1 << 20 },
      })[BATCH_ITEM_JOB]!;
      const context = (index: number, signal = new AbortController().signal) => ({
        id: `${id}-${index}`,
        name: BATCH_ITEM_JOB,
        data: { batchId: id, index },
        attempt: 1,
        signal,
        updateProgress: async () => {},
      });
      // The only attempt meets the outage: it waits, and finishes once the store is back.
      // Polled, not slept: on a loaded machine compressing the item can take longer than any fixed pause.
      let settled = false;
      const first = handler(context(0)).finally(() => {
        settled = true;
      });
      await vi.waitFor(() => expect(refused).toBeGreaterThanOrEqual(1), { timeout: 20_000, interval: 10 });
      expect(settled).toBe(false);
      down = false;
      expect(await first).toEqual({ done: true });
      expect((await h.srv.db.findBatchItem(id, 0))?.status).toBe('done');

      // A worker closing during an outage aborts the wait: the job goes back to the queue and the
      // item stays queued for the next worker, neither failed nor given back to the quota.
      down = true;
      const closing = new AbortController();
      const second = handler(context(1, closing.signal)).then(
        () => 'resolved',
        (error: unknown) => (error as CompressoError).code,
      );
      const before = refused;
      await vi.waitFor(() => expect(refused).toBeGreaterThan(before), { timeout: 20_000, interval: 10 });
      closing.abort();
      expect(await second).toBe('SERVICE_UNAVAILABLE');
      expect((await h.srv.db.findBatchItem(id, 1))?.status).toBe('queued');
      expect(await h.srv.db.usageOn(accountId, quotaDay())).toBe(2);
    } finally {
      await h.close();
    }
  });

  it('an outage that outlasts the limit fails the attempt; after the last the item is failed and given back', async () => {
    const h = await harness({}, false);
    let worker: QueueWorker | undefined;
    try {
      const { key, accountId } = await proAccount(h.srv.db, 'endless@example.com');
      const res = await fetch(`${h.srv.url}/api/v1/jobs`, {
        method: 'POST',
        headers: bearer(key),
        body: batchForm(images.slice(0, 2)),
      });
      const { id } = (await res.json()) as JobView;
      // One object whose read breaks off every time, with SERVICE_UNAVAILABLE as an unreachable store
      // answers: the store is fine for every other key, so no wait can ever end this.
      let reads = 0;
      const poisoned: BlobStore = {
        ...h.blobs,
        get: async (k: string) => {
          if (k !== `jobs/${id}/in/0`) return h.blobs.get(k);
          reads++;
          throw new CompressoError('SERVICE_UNAVAILABLE', 'The blob store is unavailable: aborted.');
        },
      };
      worker = h.queue.work(
        batchHandlers({
          db: h.srv.db,
          blobs: poisoned,
          engine: h.srv.engine,
          logger: h.srv.logger,
          attempts: 2,
          outageLimitMs: 300,
          fetchLimits: { allowPrivate: false, timeoutMs: 1000, maxBytes: 1 << 20 },
        }),
        { concurrency: 2 },
      );
      const view = await until(h.srv, key, id, (v) => v.status === 'completed');
      expect(view.items.map((i) => [i.status, i.error?.code ?? null])).toEqual([
        ['failed', 'INTERNAL_ERROR'],
        ['done', null],
      ]);
      expect(await h.srv.db.usageOn(accountId, quotaDay())).toBe(1); // the failed item given back
      expect((await h.queue.getJob(`${id}-0`))?.state).toBe('failed');
      // Both attempts waited (several reads each), then gave up; the item was recorded by the last.
      const gaveUp = h.srv.logLines.filter((l) => String(l.msg).startsWith('batch item gave up waiting'));
      expect(gaveUp.map((l) => l.attempt)).toEqual([1, 2]);
      expect(reads).toBeGreaterThanOrEqual(2 * 2);
    } finally {
      await worker?.close({ timeoutMs: 1000 });
      await h.close();
    }
  });

  it('items still queued when the process ended are handed back to the in-process queue at start', async () => {
    const h = await harness({}, false);
    try {
      const { key } = await proAccount(h.srv.db, 'restart@example.com');
      const res = await fetch(`${h.srv.url}/api/v1/jobs`, {
        method: 'POST',
        headers: bearer(key),
        body: batchForm(images.slice(0, 2)),
      });
      const { id } = (await res.json()) as JobView;
      // "Restart": a new in-process queue that knows nothing of the old jobs.
      const fresh = inlineQueue();
      try {
        expect(await requeueQueuedItems(h.srv.db, fresh, h.srv.logger)).toBe(2);
        const worker = startBatchWorker({
          queue: fresh,
          db: h.srv.db,
          blobs: h.blobs,
          engine: h.srv.engine,
          logger: h.srv.logger,
          config: h.srv.config,
          concurrency: 1,
        });
        const view = await until(h.srv, key, id, (v) => v.status === 'completed');
        expect(view.progress.done).toBe(2);
        await worker.close();
      } finally {
        await fresh.close();
      }
    } finally {
      await h.close();
    }
  });
});
