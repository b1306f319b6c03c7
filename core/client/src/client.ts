import { randomUUID } from 'node:crypto';
import { join, resolve } from 'node:path';
import {
  COMPRESS_OPTIONS,
  decodeJsonHeader,
  decodeResultHeaders,
  resultClientName,
  resultHeaderName,
} from '@compresso/schema/wire';
import {
  AbortError,
  AuthenticationError,
  BadRequestError,
  CompressoError,
  errorFromResponse,
  PermissionError,
  RateLimitError,
} from './errors.ts';
import { type PreparedInput, prepareInput } from './input.ts';
import { Jobs, jobItemError } from './jobs.ts';
import {
  besideInput,
  EXTENSIONS,
  isDirectory,
  looksLikeDirectory,
  stemOf,
  writeAtomically,
} from './output.ts';
import { dispositionFileName, safeExtension, safeFileName } from './safe-name.ts';
import {
  fetchTransport,
  httpTransport,
  parseJson,
  type Transport,
  type WireRequest,
  type WireResponse,
} from './transport.ts';
import type {
  AltTextContext,
  AltTextOptions,
  AltTextResult,
  ApiKey,
  BatchItem,
  ClientOptions,
  CompressBatchOptions,
  CompressOptions,
  CompressResult,
  CreatedApiKey,
  CreateKeyOptions,
  EditOperation,
  EditOptions,
  EditResult,
  GenerateOptions,
  GenerateResult,
  ImageInput,
  ImageOptions,
  InfoOptions,
  InfoResult,
  Job,
  OutputFormat,
  RequestOptions,
  RevokedApiKey,
  Usage,
} from './types.ts';
import { VERSION } from './version.ts';
import { bodyFromWire, route } from './wire-body.ts';

export const DEFAULT_BASE_URL = 'http://localhost:3000';
const DEFAULT_TIMEOUT_MS = 120_000;
const DEFAULT_MAX_RETRIES = 2;
/** The server's default upload limit (COMPRESSO_MAX_UPLOAD_BYTES). */
const DEFAULT_MAX_UPLOAD_BYTES = 50 * 1024 * 1024;
const DEFAULT_MAX_RETRY_AFTER_S = 60;
/** compressBatch via a job: how often it asks the server which items finished. */
const JOB_POLL_MS = 500;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 8_000;

interface CallSpec {
  method: WireRequest['method'];
  path: string;
  multipart?: WireRequest['multipart'];
  json?: unknown;
  accept: string;
  /**
   * False for requests that change state on the server (creating a key): those are retried only
   * when the answer proves nothing was done (408, 429, 503), never after a lost connection.
   */
  idempotent: boolean;
  /**
   * Send an `Idempotency-Key` (the caller's `idempotencyKey`, else a new one for this call) on every
   * attempt: the server answers a retry with the first answer, counted once (compress, info, jobs).
   */
  idempotencyKey?: boolean;
}

/** `client.keys`: the API keys of the caller's account. */
export class Keys {
  readonly #client: Compresso;

  constructor(client: Compresso) {
    this.#client = client;
  }

  /** POST /api/v1/key — a new key; its secret (`key`) is only in this answer. */
  async create(options: CreateKeyOptions = {}): Promise<CreatedApiKey> {
    const { name, ...request } = options;
    const response = await this.#client.request(
      {
        ...route('createKey'),
        json: name === undefined ? {} : { name },
        accept: 'application/json',
        idempotent: false,
      },
      request,
    );
    return bodyFromWire<CreatedApiKey>('CreatedApiKey', parseJson(response));
  }

  /** GET /api/v1/keys — the account's active keys (never a secret). */
  async list(options: RequestOptions = {}): Promise<ApiKey[]> {
    const response = await this.#client.request(
      { ...route('listKeys'), accept: 'application/json', idempotent: true },
      options,
    );
    return parseJson<{ keys: unknown[] }>(response).keys.map((key) => bodyFromWire<ApiKey>('ApiKey', key));
  }

  /** DELETE /api/v1/keys/{id} — the key fails from the next request on. */
  async revoke(id: string, options: RequestOptions = {}): Promise<RevokedApiKey> {
    if (typeof id !== 'string' || id === '') {
      throw new BadRequestError('INVALID_OPTION', `id: expected a key id, received ${JSON.stringify(id)}.`);
    }
    const response = await this.#client.request(
      {
        ...route('revokeKey', { id }),
        accept: 'application/json',
        idempotent: true,
      },
      options,
    );
    return bodyFromWire<RevokedApiKey>('RevokedApiKey', parseJson(response));
  }
}

/** The camelCase options as the form fields the server reads, named by the contract's option table. */
function fields(options: ImageOptions): Record<string, string> {
  const form: Record<string, string> = {};
  const given = options as Record<string, unknown>;
  for (const [wire, spec] of Object.entries(COMPRESS_OPTIONS)) {
    const value = given[spec.client];
    if (value !== undefined) form[wire] = String(value);
  }
  return form;
}

const IMAGE_OPTIONS = [...Object.values(COMPRESS_OPTIONS).map((spec) => spec.client), 'filename'];
const REQUEST_OPTIONS = ['signal', 'timeout', 'maxRetries', 'idempotencyKey'];
const KNOWN_OPTIONS = {
  info: new Set([...IMAGE_OPTIONS, ...REQUEST_OPTIONS]),
  generate: new Set([
    ...REQUEST_OPTIONS,
    'model',
    'aspectRatio',
    'format',
    'quality',
    'maxDimension',
    'outputPath',
    'overwrite',
  ]),
  edit: new Set([...IMAGE_OPTIONS, ...REQUEST_OPTIONS, 'output', 'overwrite']),
  altText: new Set([...REQUEST_OPTIONS, 'filename']),
  altTextContext: new Set(['productTitle', 'vendor', 'pageTitle', 'language']),
  compress: new Set([...IMAGE_OPTIONS, ...REQUEST_OPTIONS, 'output', 'overwrite']),
  compressBatch: new Set([
    ...IMAGE_OPTIONS,
    ...REQUEST_OPTIONS,
    'outputDir',
    'concurrency',
    'onProgress',
    'via',
  ]),
};

/**
 * A misspelt option would otherwise be dropped without a word — above all the HTTP API's
 * snake_case names (`max_dimension`), which this client spells in camelCase.
 */
function checkOptions(method: keyof typeof KNOWN_OPTIONS, options: object): void {
  const known = KNOWN_OPTIONS[method];
  const problems = Object.keys(options)
    .filter((name) => !known.has(name))
    .map((name) => {
      const camel = name.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
      const hint = camel === 'outputFormat' ? 'format' : known.has(camel) ? camel : undefined;
      return {
        field: name,
        expected: hint ? `${hint} (camelCase)` : `one of ${[...known].join(', ')}`,
        received: name,
      };
    });
  if (problems.length === 0) return;
  throw new BadRequestError(
    'INVALID_OPTION',
    `Unknown option for ${method}() — ${problems.map((p) => `${p.field}: expected ${p.expected}`).join('; ')}`,
    { details: problems },
  );
}

/**
 * The server's download name when it is one plain file name, else the name derived from the input
 * (as if no header had come): a refused name is not an error, the bytes are still good.
 */
function filenameOf(headers: Record<string, string>, fallback: string): string {
  return safeFileName(dispositionFileName(headers['content-disposition'])) ?? fallback;
}

function resultOf(
  response: WireResponse,
  outputPath: string | null,
  format: OutputFormat,
  filename: string,
): CompressResult {
  const h = response.headers;
  const data = Buffer.from(response.body.buffer, response.body.byteOffset, response.body.byteLength);
  // The facts come through the contract's header codec: every header of its table, decoded by type
  // and named as the client names the fact; a required one missing is not our server's answer.
  const { values, missing } = decodeResultHeaders(h);
  if (missing.length) {
    throw new CompressoError(
      'INVALID_RESPONSE',
      `The server's answer lacks the ${missing.map(resultHeaderName).join(', ')} header${missing.length > 1 ? 's' : ''}.`,
      { status: response.status, requestId: h['x-request-id'] },
    );
  }
  const facts: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(values)) {
    facts[resultClientName(field as keyof typeof values)] = value;
  }
  const result = {
    ...facts,
    data,
    outputPath,
    format,
    contentType: h['content-type'] ?? 'application/octet-stream',
    filename,
    requestId: h['x-request-id'],
  } as CompressResult;
  return result;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolveSleep, reject) => {
    if (signal?.aborted) {
      reject(
        new AbortError('ABORTED', 'The request was aborted while waiting to retry.', {
          cause: signal.reason,
        }),
      );
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(
        new AbortError('ABORTED', 'The request was aborted while waiting to retry.', {
          cause: signal?.reason,
        }),
      );
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolveSleep();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Exponential backoff with jitter, so many clients failing together do not retry in step. */
function backoffMs(attempt: number): number {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt);
  return Math.round(ceiling * (0.5 + Math.random() * 0.5));
}

/**
 * Whether an answer may be retried, and after how long at least (the server's Retry-After, in ms).
 * The server's `X-Should-Retry` wins when present; the daily quota (`QUOTA_EXCEEDED`) is never
 * retried — it resets at midnight UTC, and retrying would only burn requests.
 */
function retryDecision(error: CompressoError, idempotent: boolean): boolean {
  const shouldRetry = error.headers?.['x-should-retry'];
  if (shouldRetry === 'false') return false;
  if (error.code === 'QUOTA_EXCEEDED') return false;
  if (shouldRetry === 'true') return true;
  // The first request with this Idempotency-Key is still running: its answer comes on a retry.
  if (error.code === 'IDEMPOTENCY_KEY_IN_USE') return true;
  const status = error.status ?? 0;
  if (status === 408) return true;
  if (status === 429) return error instanceof RateLimitError && error.retryAfter !== undefined;
  if (status === 503) return true;
  if (!idempotent) return false;
  // 501 (a feature not configured) will not change by retrying.
  return status >= 500 && status !== 501;
}

/**
 * The Compresso API client. One instance per key; it holds no connection state, so it is safe to
 * share across concurrent calls.
 */
export class Compresso {
  readonly baseUrl: string;
  readonly keys: Keys;
  /** Server-side batch jobs (POST /api/v1/jobs): create, get, wait, download. */
  readonly jobs: Jobs;
  readonly timeout: number;
  readonly maxRetries: number;
  readonly maxUploadBytes: number;
  readonly maxRetryAfter: number;
  readonly #apiKey: string;
  readonly #transport: Transport;

  constructor(apiKey?: string, options: ClientOptions = {}) {
    const env = options.env ?? (typeof process === 'object' ? process.env : {});
    const key = apiKey ?? env['COMPRESSO_API_KEY'];
    if (typeof key !== 'string' || key.trim() === '') {
      throw new AuthenticationError(
        'MISSING_API_KEY',
        'No API key: pass one to new Compresso(apiKey) or set COMPRESSO_API_KEY. Keys come from `compresso keys create` or POST /api/v1/key.',
      );
    }
    this.#apiKey = key.trim();
    const base = options.baseUrl ?? env['COMPRESSO_BASE_URL'] ?? DEFAULT_BASE_URL;
    let url: URL;
    try {
      url = new URL(base);
    } catch (cause) {
      throw new BadRequestError(
        'INVALID_OPTION',
        `baseUrl: expected an http(s) URL, received ${JSON.stringify(base)}.`,
        {
          cause,
        },
      );
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new BadRequestError(
        'INVALID_OPTION',
        `baseUrl: expected an http(s) URL, received ${JSON.stringify(base)}.`,
      );
    }
    // Accept the server root or the API root alike: both `https://host` and `https://host/api/v1`.
    this.baseUrl = `${url.origin}${url.pathname.replace(/\/+$/, '').replace(/\/api\/v1$/, '')}`;
    this.timeout = positive(options.timeout, DEFAULT_TIMEOUT_MS, 'timeout');
    this.maxRetries = nonNegativeInteger(options.maxRetries, DEFAULT_MAX_RETRIES, 'maxRetries');
    this.maxUploadBytes = positive(options.maxUploadBytes, DEFAULT_MAX_UPLOAD_BYTES, 'maxUploadBytes');
    this.maxRetryAfter = positive(options.maxRetryAfter, DEFAULT_MAX_RETRY_AFTER_S, 'maxRetryAfter');
    const fetchImpl =
      options.fetch ?? (typeof globalThis.fetch === 'function' ? globalThis.fetch : undefined);
    this.#transport = fetchImpl ? fetchTransport(fetchImpl) : httpTransport();
    this.keys = new Keys(this);
    this.jobs = new Jobs(this, fields);
  }

  /** POST /api/v1/compress: the compressed bytes, written to a file as `output` says, and the facts. */
  async compress(input: ImageInput, options: CompressOptions = {}): Promise<CompressResult> {
    checkOptions('compress', options);
    const prepared = await prepareInput(input, { maxBytes: this.maxUploadBytes, filename: options.filename });
    return this.#compressPrepared(prepared, options, undefined);
  }

  async #compressPrepared(
    prepared: PreparedInput,
    options: CompressOptions,
    batch: { target: { dir: string; stem: string } | undefined; claimed: Set<string> } | undefined,
  ): Promise<CompressResult> {
    const explicit = options.output;
    // An explicit file path that is the input is refused before spending a request on it.
    if (typeof explicit === 'string' && !looksLikeDirectory(explicit) && !(await isDirectory(explicit))) {
      this.#refuseOverwrite(resolve(explicit), prepared, options);
    }
    const response = await this.request(
      {
        ...route('compress'),
        multipart: { file: prepared, fields: fields(options) },
        accept: '*/*',
        idempotent: true,
        idempotencyKey: true,
      },
      options,
    );
    return this.#finishCompressed(response, prepared, options, batch);
  }

  /** A compress answer (from /compress, or a job item's download): checked, written, reported. */
  async #finishCompressed(
    response: WireResponse,
    prepared: PreparedInput,
    options: CompressOptions,
    batch: { target: { dir: string; stem: string } | undefined; claimed: Set<string> } | undefined,
  ): Promise<CompressResult> {
    const explicit = options.output;
    const format = (response.headers['x-output-format'] ?? '') as OutputFormat;
    // The extension is part of every path written below: a format name that could carry a path
    // (`../../x`) fails the call before anything is written.
    const ext = Object.hasOwn(EXTENSIONS, format) ? EXTENSIONS[format] : safeExtension(format);
    if (ext === undefined) {
      throw new CompressoError(
        'INVALID_RESPONSE',
        `The server's answer names no usable output format (X-Output-Format: ${JSON.stringify(format.slice(0, 40))}).`,
        { status: response.status, requestId: response.headers['x-request-id'] },
      );
    }
    const filename = filenameOf(response.headers, `${stemOf(prepared.filename)}.${ext}`);
    let target: string | null = null;
    if (batch?.target) {
      target = join(batch.target.dir, `${batch.target.stem}.${ext}`);
    } else if (typeof explicit === 'string') {
      target =
        looksLikeDirectory(explicit) || (await isDirectory(explicit))
          ? join(explicit, prepared.path ? `${stemOf(prepared.path)}.${ext}` : filename)
          : explicit;
    } else if (explicit === undefined && prepared.path) {
      target = besideInput(prepared.path, ext);
    }
    let outputPath: string | null = null;
    if (target !== null) {
      this.#refuseOverwrite(resolve(target), prepared, options);
      if (batch) {
        // Beside their inputs, x.png and x.jpg converted to WebP both make x.min.webp: the second to
        // finish is refused rather than replace an output this batch just wrote (as the Python client).
        const key = resolve(target);
        if (batch.claimed.has(key)) {
          throw new BadRequestError('CONFLICT', `output: another input of this batch already wrote ${key}.`, {
            details: [
              { field: 'output', expected: 'a path no other item of the batch writes', received: key },
            ],
          });
        }
        batch.claimed.add(key);
      }
      outputPath = await writeAtomically(target, response.body);
    }
    return resultOf(response, outputPath, format, filename);
  }

  #refuseOverwrite(target: string, prepared: PreparedInput, options: CompressOptions): void {
    if (prepared.path && target === prepared.path && !options.overwrite) {
      throw new BadRequestError(
        'INVALID_OPTION',
        `output: ${target} is the input file; pass overwrite: true to replace it, or choose another path.`,
        { details: [{ field: 'output', expected: 'a path other than the input', received: target }] },
      );
    }
  }

  /** POST /api/v1/info: what compression would give, as the server's JSON; nothing is written. */
  async info(input: ImageInput, options: InfoOptions = {}): Promise<InfoResult> {
    checkOptions('info', options);
    const prepared = await prepareInput(input, { maxBytes: this.maxUploadBytes, filename: options.filename });
    const response = await this.request(
      {
        ...route('info'),
        multipart: { file: prepared, fields: fields(options) },
        accept: 'application/json',
        idempotent: true,
        idempotencyKey: true,
      },
      options,
    );
    return parseJson<InfoResult>(response);
  }

  /**
   * POST /api/v1/generate: an image from a prompt, made by the server's AI provider and compressed
   * like any other (format, quality, size). Written to `outputPath` when given.
   */
  async generate(prompt: string, options: GenerateOptions = {}): Promise<GenerateResult> {
    checkOptions('generate', options);
    if (typeof prompt !== 'string' || prompt.trim() === '') {
      throw new BadRequestError('INVALID_OPTION', 'prompt: expected the words of what to draw.', {
        details: [
          { field: 'prompt', expected: 'a non-empty string', received: JSON.stringify(prompt) ?? 'nothing' },
        ],
      });
    }
    const json: Record<string, unknown> = { prompt };
    if (options.model !== undefined) json.model = options.model;
    if (options.aspectRatio !== undefined) json.aspect_ratio = options.aspectRatio;
    if (options.format !== undefined) json.output_format = options.format;
    if (options.quality !== undefined) json.quality = options.quality;
    if (options.maxDimension !== undefined) json.max_dimension = options.maxDimension;
    const response = await this.request(
      { ...route('generate'), json, accept: '*/*', idempotent: true, idempotencyKey: true },
      options,
    );
    // No input: the download name is the server's (generated.<ext>), nothing is beside an input.
    const prepared: PreparedInput = {
      bytes: new Uint8Array(),
      filename: 'generated',
      contentType: 'application/octet-stream',
      path: undefined,
      label: 'generated',
    };
    const result = await this.#finishCompressed(
      response,
      prepared,
      { output: options.outputPath ?? false, overwrite: options.overwrite ?? true },
      undefined,
    );
    const h = response.headers;
    return {
      ...result,
      provider: h['x-ai-provider'] ?? '',
      model: h['x-ai-model'] ?? '',
      aspectRatio: h['x-aspect-ratio'] ?? '',
      ...(h['x-aspect-ratio-requested'] ? { aspectRatioRequested: h['x-aspect-ratio-requested'] } : {}),
    };
  }

  /**
   * POST /api/v1/edit: the image changed as a plain-language instruction says ("make it 800 wide
   * and black and white"); the result lists the operations applied and the words not understood.
   */
  async edit(input: ImageInput, instruction: string, options: EditOptions = {}): Promise<EditResult> {
    checkOptions('edit', options);
    if (typeof instruction !== 'string' || instruction.trim() === '') {
      throw new BadRequestError('INVALID_OPTION', 'instruction: expected what to do, in words.', {
        details: [
          {
            field: 'instruction',
            expected: 'a non-empty string',
            received: JSON.stringify(instruction) ?? 'nothing',
          },
        ],
      });
    }
    const prepared = await prepareInput(input, { maxBytes: this.maxUploadBytes, filename: options.filename });
    const explicit = options.output;
    if (typeof explicit === 'string' && !looksLikeDirectory(explicit) && !(await isDirectory(explicit))) {
      this.#refuseOverwrite(resolve(explicit), prepared, options);
    }
    const response = await this.request(
      {
        ...route('edit'),
        multipart: { file: prepared, fields: { ...fields(options), instruction } },
        accept: '*/*',
        idempotent: true,
        idempotencyKey: true,
      },
      options,
    );
    const result = await this.#finishCompressed(
      response,
      prepared,
      { ...options, output: explicit ?? false },
      undefined,
    );
    const h = response.headers;
    const list = <T>(name: string): T[] => {
      const value = decodeJsonHeader(h[name]);
      return Array.isArray(value) ? (value as T[]) : [];
    };
    if (h['x-edit-operations'] === undefined) {
      throw new CompressoError(
        'INVALID_RESPONSE',
        "The server's answer lacks the X-Edit-Operations header.",
        {
          status: response.status,
          requestId: h['x-request-id'],
        },
      );
    }
    return {
      ...result,
      operations: list<EditOperation>('x-edit-operations'),
      unrecognized: list<string>('x-edit-unrecognized'),
      generated: list<string>('x-edit-generated'),
      ...(h['x-ai-provider'] ? { provider: h['x-ai-provider'] } : {}),
      ...(h['x-ai-model'] ? { model: h['x-ai-model'] } : {}),
    };
  }

  /**
   * POST /api/v1/alt-text: alt text for an image, from the server's vision provider (`source:
   * 'provider'`) or composed offline from `context` and measured facts (`source: 'offline'`).
   */
  async altText(
    input: ImageInput,
    context: AltTextContext = {},
    options: AltTextOptions = {},
  ): Promise<AltTextResult> {
    checkOptions('altTextContext', context);
    checkOptions('altText', options);
    const prepared = await prepareInput(input, { maxBytes: this.maxUploadBytes, filename: options.filename });
    const form: Record<string, string> = {};
    if (context.productTitle !== undefined) form.product_title = context.productTitle;
    if (context.vendor !== undefined) form.vendor = context.vendor;
    if (context.pageTitle !== undefined) form.page_title = context.pageTitle;
    if (context.language !== undefined) form.language = context.language;
    const response = await this.request(
      {
        ...route('altText'),
        multipart: { file: prepared, fields: form },
        accept: 'application/json',
        idempotent: true,
        idempotencyKey: true,
      },
      options,
    );
    const wire = parseJson<{
      alt: string;
      source: 'provider' | 'offline';
      language: string;
      basis: string[];
      provider?: string;
      model?: string;
      facts: {
        width: number;
        height: number;
        orientation: 'landscape' | 'portrait' | 'square';
        dominant_color: string;
        color_name: string;
        transparent: boolean;
      };
    }>(response);
    return {
      alt: wire.alt,
      source: wire.source,
      language: wire.language,
      basis: wire.basis,
      ...(wire.provider !== undefined ? { provider: wire.provider } : {}),
      ...(wire.model !== undefined ? { model: wire.model } : {}),
      facts: {
        width: wire.facts.width,
        height: wire.facts.height,
        orientation: wire.facts.orientation,
        dominantColor: wire.facts.dominant_color,
        colorName: wire.facts.color_name,
        transparent: wire.facts.transparent,
      },
    };
  }

  /**
   * Compress many inputs, `concurrency` at a time. Never rejects for one input: each item says
   * `ok` with its result or its typed error. Once the key is refused (401/403) or the daily quota
   * is used up, the inputs not yet sent fail with that same error instead of spending requests.
   */
  async compressBatch(
    inputs: readonly ImageInput[],
    options: CompressBatchOptions = {},
  ): Promise<BatchItem[]> {
    checkOptions('compressBatch', options);
    const {
      outputDir,
      concurrency: wanted,
      onProgress,
      via = 'requests',
      idempotencyKey,
      ...compressOptions
    } = options;
    if (via !== 'requests' && via !== 'job') {
      throw new BadRequestError(
        'INVALID_OPTION',
        `via: expected "requests" or "job", received ${JSON.stringify(via)}.`,
        {
          details: [{ field: 'via', expected: '"requests" or "job"', received: String(via) }],
        },
      );
    }
    const concurrency = nonNegativeInteger(wanted, 2, 'concurrency') || 1;
    const total = inputs.length;
    const items: BatchItem[] = new Array(total);
    const stems = outputDir === undefined ? undefined : batchStems(inputs);
    const claimed = new Set<string>();
    let completed = 0;
    let fatal: CompressoError | undefined;

    const finish = (item: BatchItem) => {
      items[item.index] = item;
      completed++;
      if (!onProgress) return;
      try {
        onProgress({ completed, total, item });
      } catch (error) {
        // A faulty progress callback must not lose the batch; it is reported, not swallowed.
        process.emitWarning(`compressBatch onProgress threw: ${String(error)}`);
      }
    };
    const targetOf = (index: number) =>
      outputDir !== undefined && stems ? { dir: outputDir, stem: stems[index]! } : undefined;

    let pending = inputs.map((_, index) => index);
    if (via === 'job' && total > 0) {
      pending = await this.#batchAsJob(inputs, compressOptions, idempotencyKey, targetOf, claimed, finish);
    }
    let next = 0;
    const worker = async () => {
      while (next < pending.length) {
        const index = pending[next++]!;
        const input = inputs[index]!;
        const label = labelOf(input, index);
        if (fatal) {
          finish({ index, input: label, ok: false, error: fatal });
          continue;
        }
        try {
          const prepared = await prepareInput(input, { maxBytes: this.maxUploadBytes, filename: undefined });
          const result = await this.#compressPrepared(prepared, compressOptions, {
            target: targetOf(index),
            claimed,
          });
          finish({ index, input: label, ok: true, result });
        } catch (caught) {
          const error = asCompressoError(caught);
          if (
            error instanceof AuthenticationError ||
            error instanceof PermissionError ||
            error instanceof AbortError ||
            (error instanceof RateLimitError && error.quotaExceeded)
          ) {
            fatal ??= error;
          }
          finish({ index, input: label, ok: false, error });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, Math.max(pending.length, 1)) }, worker));
    return items;
  }

  /**
   * compressBatch through one server-side job: the inputs in one submission (POST /api/v1/jobs, with
   * its Idempotency-Key), then each result downloaded as soon as the job reports it and written as
   * the fan-out writes it. Resolves with the indices left for the fan-out: all of them when the
   * server cannot take the batch as a job (no job queue: 503; the batch over its body limit: 413).
   */
  async #batchAsJob(
    inputs: readonly ImageInput[],
    options: CompressOptions,
    idempotencyKey: string | undefined,
    targetOf: (index: number) => { dir: string; stem: string } | undefined,
    claimed: Set<string>,
    finish: (item: BatchItem) => void,
  ): Promise<number[]> {
    const prepared: { index: number; input: PreparedInput }[] = [];
    for (const [index, input] of inputs.entries()) {
      try {
        prepared.push({
          index,
          input: await prepareInput(input, { maxBytes: this.maxUploadBytes, filename: undefined }),
        });
      } catch (caught) {
        finish({ index, input: labelOf(input, index), ok: false, error: asCompressoError(caught) });
      }
    }
    if (prepared.length === 0) return [];
    const request = {
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.timeout ? { timeout: options.timeout } : {}),
      ...(options.maxRetries !== undefined ? { maxRetries: options.maxRetries } : {}),
    };
    let job: Job;
    try {
      job = await this.jobs.submit(
        prepared.map((p) => p.input),
        fields(options),
        { ...request, ...(idempotencyKey !== undefined ? { idempotencyKey } : {}) },
      );
    } catch (caught) {
      const error = asCompressoError(caught);
      if (error.code === 'SERVICE_UNAVAILABLE' || error.code === 'FILE_TOO_LARGE')
        return prepared.map((p) => p.index);
      for (const { index } of prepared)
        finish({ index, input: labelOf(inputs[index]!, index), ok: false, error });
      return [];
    }
    const handled = new Set<number>();
    for (;;) {
      const current = await this.jobs.get(job.id, request);
      for (const item of current.items) {
        if (item.status === 'queued' || handled.has(item.index)) continue;
        handled.add(item.index);
        const { index, input } = prepared[item.index]!;
        const label = labelOf(inputs[index]!, index);
        try {
          if (item.status === 'failed') throw jobItemError(item);
          const response = await this.request(
            {
              ...route('getJobItem', { id: current.id, index: item.index }),
              accept: '*/*',
              idempotent: true,
            },
            request,
          );
          const result = await this.#finishCompressed(response, input, options, {
            target: targetOf(index),
            claimed,
          });
          finish({ index, input: label, ok: true, result });
        } catch (caught) {
          finish({ index, input: label, ok: false, error: asCompressoError(caught) });
        }
      }
      if (current.status === 'completed') return [];
      await sleep(JOB_POLL_MS, options.signal);
    }
  }

  /** GET /api/v1/usage: the plan and today's count (this request included). */
  async usage(options: RequestOptions = {}): Promise<Usage> {
    const response = await this.request(
      { ...route('usage'), accept: 'application/json', idempotent: true },
      options,
    );
    return bodyFromWire<Usage>('Usage', parseJson(response));
  }

  /**
   * One call with its retries. Internal (used by `keys`), not part of the documented surface.
   * @internal
   */
  async request(spec: CallSpec, options: RequestOptions): Promise<WireResponse> {
    const maxRetries = nonNegativeInteger(options.maxRetries, this.maxRetries, 'maxRetries');
    const timeoutMs = positive(options.timeout, this.timeout, 'timeout');
    const signal = options.signal;
    const wire: WireRequest = {
      method: spec.method,
      url: `${this.baseUrl}${spec.path}`,
      server: this.baseUrl,
      headers: {
        authorization: `Bearer ${this.#apiKey}`,
        accept: spec.accept,
        'user-agent': `compresso-node/${VERSION} node/${process.version}`,
      },
      ...(spec.multipart ? { multipart: spec.multipart } : {}),
      ...(spec.json !== undefined ? { json: spec.json } : {}),
    };
    if (spec.idempotencyKey) {
      // One key per logical call, the same on each retry below: that is what makes retrying a
      // submission after a lost answer safe (the server replays the first answer, counted once).
      const given = options.idempotencyKey;
      if (given !== undefined && (typeof given !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(given))) {
        throw new BadRequestError(
          'INVALID_OPTION',
          `idempotencyKey: expected 1 to 255 visible ASCII characters, received ${JSON.stringify(given)}.`,
          {
            details: [
              {
                field: 'idempotencyKey',
                expected: '1 to 255 visible ASCII characters',
                received: String(given),
              },
            ],
          },
        );
      }
      wire.headers['idempotency-key'] = given ?? randomUUID();
    }
    for (let attempt = 0; ; attempt++) {
      let error: CompressoError;
      try {
        const response = await this.#attempt(wire, timeoutMs, signal);
        if (response.status < 400) return response;
        error = errorFromResponse(response.status, response.headers, response.body);
      } catch (caught) {
        error = asCompressoError(caught);
        if (error instanceof AbortError || error.status !== undefined) throw error;
        const refused = (error.details as { code?: string } | undefined)?.code === 'ECONNREFUSED';
        const retryable = error.code === 'CONNECTION_ERROR' || error.code === 'TIMEOUT';
        if (!retryable || attempt >= maxRetries || !(spec.idempotent || refused)) throw error;
        await sleep(backoffMs(attempt), signal);
        continue;
      }
      if (attempt >= maxRetries || !retryDecision(error, spec.idempotent)) throw error;
      const retryAfter = error instanceof RateLimitError ? error.retryAfter : undefined;
      const fromHeader = retryAfter ?? parseRetryAfterHeader(error.headers);
      // A server asking for a longer pause than the cap gets its error back now, with retryAfter,
      // rather than a process blocked for minutes.
      if (fromHeader !== undefined && fromHeader > this.maxRetryAfter) throw error;
      await sleep(fromHeader !== undefined ? fromHeader * 1000 : backoffMs(attempt), signal);
    }
  }

  async #attempt(
    wire: WireRequest,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<WireResponse> {
    // AbortSignal.any() is not on Node 16/18: one controller per attempt, fed by the timer and the caller.
    const controller = new AbortController();
    let reason: 'timeout' | 'aborted' = 'aborted';
    const timer = setTimeout(() => {
      reason = 'timeout';
      controller.abort(new Error(`timeout after ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = () => controller.abort(signal?.reason);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await this.#transport(wire, { signal: controller.signal, reason: () => reason, timeoutMs });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }
}

function parseRetryAfterHeader(headers: Record<string, string> | undefined): number | undefined {
  const value = headers?.['retry-after'];
  if (value === undefined) return undefined;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined;
}

/** How a batch item names its input: the path, a File's or file stream's name, else `#<index>`. */
function labelOf(input: ImageInput, index: number): string {
  if (typeof input === 'string') return input;
  const named = input as { name?: unknown; path?: unknown };
  if (typeof named.name === 'string' && named.name) return named.name;
  if (typeof named.path === 'string' && named.path) return named.path;
  return `#${index}`;
}

/**
 * Output stems for a batch, in input order: a stem seen before gets the first of `-2`, `-3`… that no
 * input is named already (`a/logo.png`, `b/logo.png`, `logo-2.png` → logo, logo-3, logo-2).
 */
function batchStems(inputs: readonly ImageInput[]): string[] {
  const natural = inputs.map((input, index) => {
    const name = typeof input === 'string' ? input : (input as { name?: unknown; path?: unknown }).name;
    const streamPath = typeof input === 'object' ? (input as { path?: unknown }).path : undefined;
    const source =
      typeof name === 'string' ? name : typeof streamPath === 'string' ? streamPath : `image-${index + 1}`;
    return stemOf(source);
  });
  const reserved = new Set(natural.map((stem) => stem.toLowerCase()));
  const used = new Set<string>();
  return natural.map((stem) => {
    let name = stem;
    // A suffixed name must be free in this batch and not another input's own name.
    for (let n = 2; used.has(name.toLowerCase()); n++) {
      const candidate = `${stem}-${n}`;
      if (!reserved.has(candidate.toLowerCase())) name = candidate;
    }
    used.add(name.toLowerCase());
    return name;
  });
}

function asCompressoError(error: unknown): CompressoError {
  if (error instanceof CompressoError) return error;
  return new CompressoError('CLIENT_ERROR', error instanceof Error ? error.message : String(error), {
    cause: error,
  });
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !(value > 0) || !Number.isFinite(value)) {
    throw new BadRequestError(
      'INVALID_OPTION',
      `${name}: expected a positive number, received ${String(value)}.`,
    );
  }
  return value;
}

function nonNegativeInteger(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0) {
    throw new BadRequestError(
      'INVALID_OPTION',
      `${name}: expected an integer of 0 or more, received ${String(value)}.`,
    );
  }
  return value;
}

/** Same as `new Compresso(apiKey, options)`. */
export function createClient(apiKey?: string, options: ClientOptions = {}): Compresso {
  return new Compresso(apiKey, options);
}
