import type { BlobStore, Config, Database, JobQueue, Logger } from '@compresso/runtime';
import {
  type CompressOptions,
  CompressoError,
  fieldProblems,
  type InfoResult,
  parseCompressOptions,
  UrlBatchRequestSchema,
} from '@compresso/schema';
import express, { type Request, type RequestHandler, type Response } from 'express';
import { authOf } from '../auth.ts';
import { setInfoHeaders } from '../compress-response.ts';
import { sendContinue } from '../expect-continue.ts';
import { fingerprintOf, type Idempotency } from '../idempotency.ts';
import type { RouteRegistrar } from '../routes.ts';
import type { UploadBudget } from '../upload-budget.ts';
import { batchItemJob, batchView, inputKey, newBatchId, outputKey, ownBatch } from './batch.ts';
import { type BatchUpload, readBatchUpload } from './batch-upload.ts';
import { checkLiteralHost, checkUrlSyntax, nameFromUrl } from './url-fetch.ts';

export interface BatchRouteDeps {
  db: Database;
  config: Config;
  logger: Logger;
  queue: JobQueue | undefined;
  blobs: BlobStore | undefined;
  budget: UploadBudget;
  /** Counts the request (like every API call), or defers that to `idempotency` (Idempotency-Key). */
  auth: RequestHandler;
  idempotency: Idempotency;
  /** Authenticates without counting: progress and downloads of work already counted. */
  authNoCount: RequestHandler;
}

/** Blob writes at once while storing a batch's originals: enough to overlap I/O, not a flood. */
const STORE_PARALLELISM = 16;

async function inChunks<T>(list: readonly T[], size: number, work: (item: T, i: number) => Promise<void>) {
  for (let start = 0; start < list.length; start += size) {
    await Promise.all(list.slice(start, start + size).map((item, k) => work(item, start + k)));
  }
}

function parseJson(req: Request, res: Response): Promise<unknown> {
  sendContinue(req, res);
  const parser = express.json({ limit: '1mb', strict: true });
  return new Promise((resolve, reject) => {
    parser(req, res, (error?: unknown) => (error ? reject(error) : resolve(req.body)));
  });
}

interface NewItem {
  name: string;
  sourceUrl: string | null;
  bytes?: Uint8Array;
}

/**
 * POST /api/v1/jobs, GET /api/v1/jobs/:id, GET /api/v1/jobs/:id/items/:index.
 *
 * Quota: a batch of n items counts n requests, reserved all at once at submission (the request
 * itself is the first; the other n − 1 in one atomic statement), so a batch is admitted whole or
 * refused whole with 429, never half-run. Items that fail through the image's fault stay counted
 * (as a 4xx answer does); items that fail through ours are given back. Reading progress and
 * downloading results is not counted: polling a 500-item batch must not burn the quota.
 */
export function registerBatchRoutes(routes: RouteRegistrar, deps: BatchRouteDeps): void {
  const { db, config, logger, budget } = deps;

  const ports = () => {
    if (!deps.queue || !deps.blobs) {
      throw new CompressoError('SERVICE_UNAVAILABLE', 'Batch jobs are not available on this server.');
    }
    return { queue: deps.queue, blobs: deps.blobs };
  };

  routes.add('createJob', deps.auth, async (req, res) => {
    const { queue, blobs } = ports();
    const state = authOf(res);
    const contentType = req.headers['content-type'] ?? '';
    let body: { json: unknown } | { upload: BatchUpload };
    if (/^application\/json\b/i.test(contentType)) {
      body = { json: await parseJson(req, res) };
    } else {
      // Anything else is for the multipart reader, which refuses a Content-Type that is neither.
      body = {
        upload: await readBatchUpload(req, res, {
          maxFileBytes: config.maxUploadBytes,
          maxBodyBytes: Math.min(config.uploadMemoryBytes, config.maxUploadBytes * config.maxBatchItems),
          maxFiles: config.maxBatchItems,
          idleTimeoutMs: config.idleTimeoutMs,
          budget,
          owner: state.account.id,
        }),
      };
    }
    const fingerprint =
      'json' in body
        ? fingerprintOf(req, { json: body.json })
        : fingerprintOf(req, { fields: body.upload.fields, files: body.upload.files });
    await deps.idempotency.run(req, res, fingerprint, () => submit(req, res, body, queue, blobs));
  });

  async function submit(
    _req: Request,
    res: Response,
    body: { json: unknown } | { upload: BatchUpload },
    queue: JobQueue,
    blobs: BlobStore,
  ): Promise<void> {
    const state = authOf(res);
    let items: NewItem[];
    let options: CompressOptions;
    let source: 'upload' | 'url';
    if ('json' in body) {
      const parsed = UrlBatchRequestSchema.safeParse(body.json);
      if (!parsed.success) {
        throw new CompressoError(
          'INVALID_REQUEST',
          'Expected a JSON body {"urls": ["https://…", …], "options": {…}} with at least one URL.',
          {
            details: fieldProblems(parsed.error.issues, body.json),
          },
        );
      }
      if (parsed.data.urls.length > config.maxBatchItems) {
        throw new CompressoError(
          'INVALID_REQUEST',
          `Too many URLs: a batch holds at most ${config.maxBatchItems}.`,
          {
            details: [
              {
                field: 'urls',
                expected: `at most ${config.maxBatchItems} URLs`,
                received: `${parsed.data.urls.length} URLs`,
              },
            ],
          },
        );
      }
      options = parseCompressOptions(parsed.data.options ?? {});
      items = parsed.data.urls.map((raw, i) => {
        const field = `urls[${i}]`;
        const url = checkUrlSyntax(raw, field);
        checkLiteralHost(url, field, config.fetchAllowPrivate);
        return { name: nameFromUrl(url.href), sourceUrl: url.href };
      });
      source = 'url';
    } else {
      const { upload } = body;
      if (upload.files.length === 0) {
        throw new CompressoError('MISSING_FILE', 'file: expected one or more images in parts named "file".');
      }
      options = parseCompressOptions(upload.fields);
      items = upload.files.map((f) => ({ name: f.name, sourceUrl: null, bytes: f.bytes }));
      source = 'upload';
    }

    // This request was counted by auth as the first item; the rest are reserved now, all or none.
    const extra = items.length - 1;
    if (extra > 0) {
      const reserved = await db.consumeQuotaMany(state.account.id, state.day, state.limit, extra);
      if (!reserved.allowed) {
        await db.refundQuota(state.account.id, state.day);
        const remaining = Math.max(0, state.limit - reserved.used + 1);
        throw new CompressoError(
          'QUOTA_EXCEEDED',
          `This batch of ${items.length} items needs ${items.length} requests of today's quota; ${remaining} remain. Send a smaller batch, or wait for the reset at 00:00 UTC.`,
          { details: { items: items.length, remaining, limit: state.limit } },
        );
      }
    }

    const batch = {
      id: newBatchId(),
      accountId: state.account.id,
      source,
      options: JSON.stringify(options),
      total: items.length,
      quotaDay: state.day,
      createdAt: new Date().toISOString(),
    };
    let recorded = false;
    try {
      await inChunks(items, STORE_PARALLELISM, async (item, i) => {
        if (item.bytes) await blobs.put(inputKey(batch.id, i), item.bytes);
      });
      // The sweep leaves batches younger than its grace period alone, counted from createdAt: taken
      // here, after the originals are stored (which may take long), only the addBulk below is left
      // inside that window.
      batch.createdAt = new Date().toISOString();
      await db.insertBatch(
        batch,
        items.map((item, index) => ({ index, name: item.name, sourceUrl: item.sourceUrl })),
      );
      recorded = true;
      await queue.addBulk(items.map((_, index) => batchItemJob(batch.id, index)));
    } catch (error) {
      // Nothing will run: give the items back (the request itself is given back as a 5xx), and
      // leave no item waiting forever in the record.
      if (extra > 0) await db.refundQuota(state.account.id, state.day, extra).catch(() => {});
      if (recorded) {
        const now = new Date().toISOString();
        await Promise.all(
          items.map((_, index) =>
            db
              .finishBatchItem(
                batch.id,
                index,
                {
                  status: 'failed',
                  errorCode: 'SERVICE_UNAVAILABLE',
                  errorMessage: 'The job queue was unavailable; the item was not counted.',
                  inputSize: null,
                },
                now,
              )
              .catch(() => false),
          ),
        );
      }
      logger.error({ err: error, batch_id: batch.id }, 'batch submission failed');
      throw new CompressoError(
        'SERVICE_UNAVAILABLE',
        'The batch could not be queued (the job queue or storage is unavailable); it was not counted. Retry shortly.',
      );
    }
    const view = batchView(
      batch,
      items.map((item, index) => ({
        batchId: batch.id,
        index,
        name: item.name,
        sourceUrl: item.sourceUrl,
        status: 'queued' as const,
        inputSize: null,
        outputSize: null,
        result: null,
        errorCode: null,
        errorMessage: null,
        finishedAt: null,
      })),
    );
    res.status(202).setHeader('Location', view.status_url);
    res.json(view);
  }

  routes.add('getJob', deps.authNoCount, async (req, res) => {
    const batch = await ownBatch(db, String(req.params.id), authOf(res).account.id);
    res.setHeader('Cache-Control', 'no-store');
    res.json(batchView(batch, await db.listBatchItems(batch.id)));
  });

  routes.add('getJobItem', deps.authNoCount, async (req, res) => {
    const { blobs } = ports();
    const batch = await ownBatch(db, String(req.params.id), authOf(res).account.id);
    const raw = String(req.params.index);
    const index = /^\d{1,6}$/.test(raw) ? Number(raw) : -1;
    const item = index >= 0 ? await db.findBatchItem(batch.id, index) : undefined;
    if (!item) {
      throw new CompressoError(
        'NOT_FOUND',
        `index: expected an item index from 0 to ${batch.total - 1} (received ${JSON.stringify(raw.slice(0, 20))}).`,
      );
    }
    if (item.status !== 'done') {
      throw new CompressoError(
        'CONFLICT',
        item.status === 'failed'
          ? `Item ${index} failed (${item.errorCode}): ${item.errorMessage}`
          : `Item ${index} is not finished yet; poll ${`/api/v1/jobs/${batch.id}`} and download it once its status is "done".`,
        { details: { status: item.status, ...(item.errorCode ? { error: { code: item.errorCode } } : {}) } },
      );
    }
    const stored = await blobs.getStream(outputKey(batch.id, index));
    if (!stored) throw new Error(`result blob of ${batch.id}/${index} is missing`);
    const info = JSON.parse(item.result ?? '{}') as Partial<InfoResult>;
    const view = batchView(batch, [item]).items[0]!;
    res.setHeader('Content-Type', stored.info.contentType ?? 'application/octet-stream');
    res.setHeader('Content-Length', String(stored.info.size));
    res.setHeader('Content-Disposition', `attachment; filename="${view.output_name ?? `image-${index}`}"`);
    // The same X-* facts as a /compress answer, so a client reads a result the same way from either.
    if (info.output_format && info.input_format) setInfoHeaders(res, info as InfoResult);
    else {
      if (info.output_format) res.setHeader('X-Output-Format', info.output_format);
      if (item.inputSize !== null) res.setHeader('X-Input-Size', String(item.inputSize));
      if (item.outputSize !== null) res.setHeader('X-Output-Size', String(item.outputSize));
    }
    stored.stream.on('error', (err) => {
      logger.error({ err, batch_id: batch.id, index }, 'reading a result failed');
      res.destroy(err);
    });
    stored.stream.pipe(res);
  });
}
