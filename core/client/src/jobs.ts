import { join } from 'node:path';
import { AbortError, BadRequestError, CompressoError, errorClassFor } from './errors.ts';
import { prepareInput } from './input.ts';
import { stemOf, writeAtomically } from './output.ts';
import { safeExtension, safeFileName } from './safe-name.ts';
import { parseJson, type WireFile, type WireRequest, type WireResponse } from './transport.ts';
import type {
  CreateJobOptions,
  DownloadJobOptions,
  ImageInput,
  ImageOptions,
  Job,
  JobDownload,
  JobItem,
  RequestOptions,
  WaitJobOptions,
} from './types.ts';
import { bodyFromWire, route } from './wire-body.ts';

/** What `Jobs` needs of the client: one call with its retries, the option fields, the limits. */
export interface JobsHost {
  request(
    spec: {
      method: WireRequest['method'];
      path: string;
      multipart?: WireRequest['multipart'];
      json?: unknown;
      accept: string;
      idempotent: boolean;
      idempotencyKey?: boolean;
    },
    options: RequestOptions,
  ): Promise<WireResponse>;
  readonly maxUploadBytes: number;
  readonly maxRetryAfter: number;
}

const DEFAULT_POLL_MS = 1000;
const DEFAULT_DOWNLOAD_CONCURRENCY = 4;
const REQUEST_KEYS = ['signal', 'timeout', 'maxRetries'] as const;

/** A job answer as the client's Job: the contract's body lists, the item's `output_format` as `format`. */
function jobOf(wire: unknown): Job {
  return bodyFromWire<Job>('BatchJob', wire, {
    nested: {
      progress: (progress) => bodyFromWire('BatchJobProgress', progress),
      items: (items) =>
        (items as unknown[]).map((item) =>
          bodyFromWire('BatchItem', item, { rename: { output_format: 'format' } }),
        ),
    },
  });
}

function parseJob(response: WireResponse): Job {
  const wire = parseJson<{ id?: unknown; items?: unknown; progress?: unknown } | null>(response);
  if (!wire || typeof wire.id !== 'string' || !Array.isArray(wire.items) || !wire.progress) {
    throw new CompressoError('INVALID_RESPONSE', 'The server answered with something that is not a job.', {
      status: response.status,
      requestId: response.headers['x-request-id'],
    });
  }
  return jobOf(wire);
}

function requestOptions(options: RequestOptions & { idempotencyKey?: string }): RequestOptions {
  const picked: RequestOptions = {};
  for (const key of REQUEST_KEYS)
    if (options[key] !== undefined) (picked as Record<string, unknown>)[key] = options[key];
  if (options.idempotencyKey !== undefined) picked.idempotencyKey = options.idempotencyKey;
  return picked;
}

function idOf(job: string | Job): string {
  const id = typeof job === 'string' ? job : job?.id;
  if (typeof id !== 'string' || id === '') {
    throw new BadRequestError(
      'INVALID_OPTION',
      `id: expected a job id or a job, received ${JSON.stringify(id)}.`,
    );
  }
  return id;
}

function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = () =>
      new AbortError('ABORTED', 'Waiting for the job was aborted.', { cause: signal?.reason });
    if (signal?.aborted) {
      reject(aborted());
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The error an item failed with, as the typed error its code maps to. */
export function jobItemError(item: JobItem): CompressoError {
  if (item.error) {
    const Class = errorClassFor(item.error.code, 0);
    return new Class(item.error.code, `Item ${item.index} (${item.name}): ${item.error.message}`, {
      details: { index: item.index },
      ...(item.error.status !== undefined ? { status: item.error.status } : {}),
    });
  }
  return new BadRequestError(
    'CONFLICT',
    `Item ${item.index} (${item.name}) is not finished yet (${item.status}).`,
    {
      details: { index: item.index, status: item.status },
    },
  );
}

/**
 * `client.jobs`: batch jobs run by the server (POST /api/v1/jobs). A job is submitted in one request
 * (files or URLs, one set of options), counted as one request per item, and worked through by the
 * server's workers while the caller polls; the results are downloaded once done. Compare
 * `compressBatch()`, which sends one compress request per input from this process.
 */
export class Jobs {
  readonly #host: JobsHost;
  readonly #fields: (options: ImageOptions) => Record<string, string>;

  /** @internal — made by the client, with its mapping of the image options to form fields. */
  constructor(host: JobsHost, fields: (options: ImageOptions) => Record<string, string>) {
    this.#host = host;
    this.#fields = fields;
  }

  /**
   * POST /api/v1/jobs: uploads `files` (paths, bytes, streams…) or hands the server `urls` to fetch;
   * answers at once with the queued job. Sent with an Idempotency-Key (yours, or one made for this
   * call), so a retry after a lost answer never makes a second job or spends the quota twice.
   */
  async create(options: CreateJobOptions): Promise<Job> {
    const { files, urls, options: imageOptions = {}, ...rest } = options ?? ({} as CreateJobOptions);
    const hasFiles = files !== undefined;
    const hasUrls = urls !== undefined;
    if (hasFiles === hasUrls) {
      throw new BadRequestError(
        'INVALID_OPTION',
        'files / urls: give exactly one of them (a list of images, or a list of URLs).',
        {
          details: [
            {
              field: hasFiles ? 'urls' : 'files',
              expected: 'exactly one of files and urls',
              received: hasFiles ? 'both' : 'neither',
            },
          ],
        },
      );
    }
    const list = (hasFiles ? files : urls) as readonly unknown[];
    if (!Array.isArray(list) || list.length === 0) {
      throw new BadRequestError(
        'INVALID_OPTION',
        `${hasFiles ? 'files' : 'urls'}: expected a non-empty list.`,
        {
          details: [
            { field: hasFiles ? 'files' : 'urls', expected: 'a non-empty array', received: String(list) },
          ],
        },
      );
    }
    const fields = this.#fields(imageOptions);
    if (hasFiles) {
      const prepared = [];
      for (const input of files as readonly ImageInput[]) {
        prepared.push(
          await prepareInput(input, { maxBytes: this.#host.maxUploadBytes, filename: undefined }),
        );
      }
      return this.submit(prepared, fields, requestOptions(rest));
    }
    const response = await this.#host.request(
      {
        ...route('createJob'),
        json: { urls, options: fields },
        accept: 'application/json',
        idempotent: true,
        idempotencyKey: true,
      },
      requestOptions(rest),
    );
    return parseJob(response);
  }

  /**
   * POST /api/v1/jobs with inputs already read and option fields already mapped (what create and
   * compressBatch's `via: 'job'` send).
   * @internal
   */
  async submit(
    files: readonly WireFile[],
    fields: Record<string, string>,
    options: RequestOptions,
  ): Promise<Job> {
    const response = await this.#host.request(
      {
        ...route('createJob'),
        multipart: { files, fields },
        accept: 'application/json',
        idempotent: true,
        idempotencyKey: true,
      },
      options,
    );
    return parseJob(response);
  }

  /** GET /api/v1/jobs/{id}: the job's progress and every item (not counted against the quota). */
  async get(job: string | Job, options: RequestOptions = {}): Promise<Job> {
    return (await this.#get(idOf(job), options)).job;
  }

  async #get(id: string, options: RequestOptions): Promise<{ job: Job; retryAfter: number | undefined }> {
    const response = await this.#host.request(
      {
        ...route('getJob', { id }),
        accept: 'application/json',
        idempotent: true,
      },
      requestOptions(options),
    );
    const header = Number(response.headers['retry-after']);
    return {
      job: parseJob(response),
      retryAfter:
        response.headers['retry-after'] !== undefined && Number.isFinite(header) && header >= 0
          ? header
          : undefined,
    };
  }

  /**
   * Polls the job until every item is done or failed and resolves with it (failed items included:
   * look at `item.error`). Between polls it waits the server's `Retry-After` when one comes (capped by
   * the client's `maxRetryAfter`), else `pollInterval` ms. `onProgress(job)` is called with the first
   * state and after every change.
   */
  async wait(job: string | Job, options: WaitJobOptions = {}): Promise<Job> {
    const id = idOf(job);
    const { onProgress, pollInterval = DEFAULT_POLL_MS, signal } = options;
    if (!(pollInterval >= 0) || !Number.isFinite(pollInterval)) {
      throw new BadRequestError(
        'INVALID_OPTION',
        `pollInterval: expected milliseconds (0 or more), received ${String(pollInterval)}.`,
      );
    }
    let seen = '';
    for (;;) {
      const { job: current, retryAfter } = await this.#get(id, options);
      const state = `${current.status} ${current.progress.done} ${current.progress.failed}`;
      if (state !== seen) {
        seen = state;
        if (onProgress) {
          try {
            onProgress(current);
          } catch (error) {
            process.emitWarning(`jobs.wait onProgress threw: ${String(error)}`);
          }
        }
      }
      if (current.status === 'completed') return current;
      const delay =
        retryAfter !== undefined ? Math.min(retryAfter, this.#host.maxRetryAfter) * 1000 : pollInterval;
      await abortableSleep(delay, signal);
    }
  }

  /**
   * Writes each finished item's result into `outputDir` (created when missing) and resolves with one
   * entry per item, in item order: `ok` with the path written, or the item's error (a failed item,
   * or one not finished yet — wait() first to get them all). File names are the server's
   * `output_name` when it is one plain file name (see safeFileName), else `<item stem>.<format>`;
   * a name used twice gets `-2`, `-3`….
   */
  async download(job: string | Job, options: DownloadJobOptions): Promise<JobDownload[]> {
    const outputDir = options?.outputDir;
    if (typeof outputDir !== 'string' || outputDir === '') {
      throw new BadRequestError(
        'INVALID_OPTION',
        `outputDir: expected a directory path, received ${JSON.stringify(outputDir)}.`,
      );
    }
    const current = typeof job === 'string' ? await this.get(job, options) : job;
    const names = fileNames(current.items);
    const results: JobDownload[] = new Array(current.items.length);
    let next = 0;
    const worker = async () => {
      while (next < current.items.length) {
        const position = next++;
        const item = current.items[position]!;
        if (item.status !== 'done') {
          results[position] = {
            index: item.index,
            name: item.name,
            ok: false,
            error: jobItemError(item),
            item,
          };
          continue;
        }
        try {
          const response = await this.#host.request(
            {
              ...route('getJobItem', { id: current.id, index: item.index }),
              accept: '*/*',
              idempotent: true,
            },
            requestOptions(options),
          );
          const path = await writeAtomically(join(outputDir, names[position]!), response.body);
          results[position] = {
            index: item.index,
            name: item.name,
            ok: true,
            path,
            size: response.body.byteLength,
            item,
          };
        } catch (error) {
          if (error instanceof AbortError) throw error;
          results[position] = {
            index: item.index,
            name: item.name,
            ok: false,
            error:
              error instanceof CompressoError
                ? error
                : new CompressoError('CLIENT_ERROR', String(error), { cause: error }),
            item,
          };
        }
      }
    };
    const concurrency = Math.max(1, Math.floor(options.concurrency ?? DEFAULT_DOWNLOAD_CONCURRENCY));
    await Promise.all(
      Array.from({ length: Math.min(concurrency, Math.max(1, current.items.length)) }, worker),
    );
    return results;
  }
}

/** A plain, unique file name per item (see download()). */
function fileNames(items: readonly JobItem[]): string[] {
  const used = new Set<string>();
  return items.map((item) => {
    const ext = safeExtension(item.format ?? undefined) ?? 'bin';
    const suggested =
      safeFileName(item.outputName ?? undefined) ??
      safeFileName(`${stemOf(item.name)}.${ext}`) ??
      `image-${item.index}.${ext}`;
    const dot = suggested.lastIndexOf('.');
    const stem = dot > 0 ? suggested.slice(0, dot) : suggested;
    const suffix = dot > 0 ? suggested.slice(dot) : '';
    let name = suggested;
    for (let n = 2; used.has(name.toLowerCase()); n++) name = `${stem}-${n}${suffix}`;
    used.add(name.toLowerCase());
    return name;
  });
}
