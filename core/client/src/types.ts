/**
 * Public types of @compresso/client. They are written out here rather than imported from
 * @compresso/schema so the published declarations stand alone (schema is zod and TypeScript source);
 * `contract.test.ts` fails the build when they drift from the schema.
 */

/** Formats the server writes. `jpg` is accepted as an alias of `jpeg`, in any case. */
export type OutputFormat = 'jpeg' | 'png' | 'webp' | 'avif' | 'gif';
/** Formats the server reads. */
export type InputFormat = OutputFormat | 'tiff' | 'heif';

/**
 * What the client accepts as an image: a file path, bytes, a Blob (or File), a Node readable stream
 * or a web ReadableStream. Streams are read into memory once (up to `maxUploadBytes`) so a retry can
 * send the same bytes again.
 */
export type ImageInput =
  | string
  | Uint8Array
  | ArrayBuffer
  | Blob
  | NodeJS.ReadableStream
  | ReadableStream<Uint8Array>;

export interface ClientOptions {
  /** Server address; default `COMPRESSO_BASE_URL`, then `http://localhost:3000`. */
  baseUrl?: string;
  /** Milliseconds one attempt may take, answer included (default 120 000). */
  timeout?: number;
  /** Retries after the first attempt for connection errors, 408, retryable 429 and 5xx (default 2). */
  maxRetries?: number;
  /** A fetch implementation (default: the global one; Node 16 without fetch uses node:http). */
  fetch?: typeof fetch;
  /** Largest upload the client will send, in bytes (default 50 MiB, the server's default limit). */
  maxUploadBytes?: number;
  /** Longest `Retry-After` the client waits for before giving up (seconds, default 60). */
  maxRetryAfter?: number;
  /** Environment to read `COMPRESSO_API_KEY` / `COMPRESSO_BASE_URL` from (default `process.env`). */
  env?: Record<string, string | undefined>;
}

/** Per-call controls, accepted by every method. */
export interface RequestOptions {
  /** Cancels the call, including any wait between retries. */
  signal?: AbortSignal;
  /** Overrides the client's per-attempt timeout (ms). */
  timeout?: number;
  /** Overrides the client's `maxRetries`. */
  maxRetries?: number;
  /**
   * The `Idempotency-Key` of a submission (compress, info, jobs.create); default: a new random one
   * per call, sent again on each of its retries. Give your own to make a retry across processes
   * (after a crash, say) safe too: within 24 h the server answers it with the first answer.
   */
  idempotencyKey?: string;
}

/** Compression options, camelCase (the server's fields are snake_case). */
export interface ImageOptions {
  /** Output format; default the input's (HEIC/TIFF become jpeg). */
  format?: OutputFormat | 'jpg' | Uppercase<OutputFormat | 'jpg'>;
  /** 1–100 on one visual scale for every format, or `'auto'`. Server default 80. */
  quality?: number | 'auto';
  /** Fit inside a square of this many pixels, keeping the aspect ratio; never enlarges. */
  maxDimension?: number;
  /** Remove EXIF/XMP/IPTC (GPS included) after applying the orientation. Server default true. */
  stripExif?: boolean;
  /** Write an opaque PNG as JPEG when that saves at least 20% more (only without `format`). */
  pngToJpeg?: boolean;
  /** Name sent with byte/stream inputs (paths and Files send their own); default `image`. */
  filename?: string;
}

export interface InfoOptions extends ImageOptions, RequestOptions {}

export interface CompressOptions extends ImageOptions, RequestOptions {
  /**
   * Where to write the result. A file path; or an existing directory (or a path ending in `/`), to
   * write `<input name>.<extension>` inside it; or `false` to write nothing. Default: for a path
   * input, `<name>.min.<extension>` beside the input; for other inputs, nothing is written.
   */
  output?: string | false;
  /** Allow `output` to be the input file itself (default false: refused with an error). */
  overwrite?: boolean;
}

/** The server's `/api/v1/info` JSON, as it comes (snake_case). */
export interface InfoResult {
  input_size: number;
  output_size: number;
  savings_percent: number;
  input_format: InputFormat;
  output_format: OutputFormat;
  input_width: number;
  input_height: number;
  width: number;
  height: number;
  quality: number;
  auto_quality: boolean;
  optimized: boolean;
  score?: number;
  /** JPEG, lossy AVIF: the chroma subsampling written (quality 'auto' picks 4:4:4 for text and graphics). */
  chroma_subsampling?: '4:2:0' | '4:4:4';
  /** WebP, AVIF, PNG: true for a lossless output. */
  lossless?: boolean;
  /** WebP: true when written near-lossless. */
  near_lossless?: boolean;
  /** Encoder effort, when the format has one. */
  effort?: number;
  /** Quality 'auto': candidate encodes scored. */
  auto_steps?: number;
  metadata_stripped: boolean;
  frames: number;
}

/** What `compress()` gives back: the bytes, where they were written, and the facts, camelCase. */
export interface CompressResult {
  /** The compressed image. */
  data: Buffer;
  /** The file written, or null when nothing was written. */
  outputPath: string | null;
  inputSize: number;
  outputSize: number;
  /** Share of the input saved, in percent (0 when the input came back unchanged). */
  savingsPercent: number;
  /** Output dimensions in pixels. */
  width: number;
  height: number;
  /** Input dimensions in pixels (orientation applied). */
  inputWidth: number;
  inputHeight: number;
  inputFormat: InputFormat;
  /** Output format. */
  format: OutputFormat;
  /** Quality used (the chosen one when `'auto'`). */
  quality: number;
  autoQuality: boolean;
  /** False when the input was already as small as it gets and came back unchanged. */
  optimized: boolean;
  metadataStripped: boolean;
  /** SSIMULACRA2 of the output, when the server computed one. */
  score?: number;
  /** JPEG, lossy AVIF: the chroma subsampling written (quality 'auto' picks 4:4:4 for text and graphics). */
  chromaSubsampling?: '4:2:0' | '4:4:4';
  /** WebP, AVIF, PNG: true for a lossless output. */
  lossless?: boolean;
  /** WebP: true when written near-lossless. */
  nearLossless?: boolean;
  /** Encoder effort, when the format has one. */
  effort?: number;
  /** Quality 'auto': candidate encodes scored. */
  autoSteps?: number;
  /** MIME type of `data`. */
  contentType: string;
  /** The file name the server suggests (`<input name>.<extension>`). */
  filename: string;
  /** The server's request id, to quote when reporting a problem. */
  requestId: string | undefined;
}

export interface CompressBatchOptions extends ImageOptions, RequestOptions {
  /**
   * Directory for the results, created when missing: `<input name>.<extension>` each (a name used
   * twice in one batch gets `-2`, `-3`…). Default: each beside its input as `compress()` does; byte
   * and stream inputs are then not written.
   */
  outputDir?: string;
  /** Requests in flight at once (default 2). */
  concurrency?: number;
  /** Called after each input finishes, in completion order. */
  onProgress?: (event: BatchProgress) => void;
  /**
   * With `via: 'job'`, the Idempotency-Key of the job's submission. Each compress request of the
   * fan-out always gets a key of its own (one key for several different requests would be refused).
   */
  idempotencyKey?: string;
  /**
   * How the batch reaches the server. `'requests'` (default): one compress request per input from
   * this process, `concurrency` at a time. `'job'`: one server-side job (POST /api/v1/jobs) with all
   * the inputs, run by the server's workers; each result is downloaded as it finishes and written
   * exactly as with `'requests'`. A server without a job queue (503) or a batch over its upload
   * limit (413) falls back to `'requests'`.
   */
  via?: 'requests' | 'job';
}

/**
 * One input's outcome; the array from `compressBatch()` is in input order. `input` is the path, a
 * File's or file stream's name, or `#<index>` for bytes and other streams.
 */
export type BatchItem =
  | { index: number; input: string; ok: true; result: CompressResult; error?: undefined }
  | { index: number; input: string; ok: false; result?: undefined; error: CompressoErrorLike };

export interface BatchProgress {
  /** Inputs finished so far (this one included). */
  completed: number;
  total: number;
  /** The item that just finished. */
  item: BatchItem;
}

/** Structural view of the error classes (see errors.ts), so types.ts has no runtime import. */
export interface CompressoErrorLike extends Error {
  readonly code: string;
  readonly status: number | undefined;
  readonly requestId: string | undefined;
  readonly details: unknown;
}

export interface ApiKey {
  id: string;
  name: string;
  /** The visible start of the key (`cmp_live_` + 8 characters). */
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface CreatedApiKey extends ApiKey {
  /** The secret: shown once, never again. */
  key: string;
}

export interface RevokedApiKey {
  id: string;
  revoked: true;
}

export interface Usage {
  plan: string;
  /** The quota day (UTC), `YYYY-MM-DD`. */
  day: string;
  used: number;
  limit: number;
  remaining: number;
  /** ISO time of the next reset (00:00 UTC). */
  resetsAt: string;
  resetsInSeconds: number;
}

export interface CreateKeyOptions extends RequestOptions {
  name?: string;
}

/**
 * A server-side batch job (POST /api/v1/jobs), camelCase. "Job" is the word for work the server
 * runs for you; `compressBatch()` is the client-side fan-out of single compress requests.
 */
export interface Job {
  id: string;
  /** `completed` once every item is done or failed. */
  status: 'queued' | 'running' | 'completed';
  createdAt: string;
  /** Where to poll it (`/api/v1/jobs/{id}`). */
  statusUrl: string;
  /** The compress options every item ran with, as the server parsed them (snake_case). */
  options: Record<string, unknown>;
  progress: JobProgress;
  items: JobItem[];
}

export interface JobProgress {
  total: number;
  done: number;
  failed: number;
  queued: number;
  percent: number;
}

export interface JobItem {
  index: number;
  /** The uploaded file's name, or the name taken from the URL. */
  name: string;
  /** The source URL, for jobs made from URLs. */
  url?: string;
  status: 'queued' | 'done' | 'failed';
  inputSize: number | null;
  outputSize: number | null;
  savingsPercent: number | null;
  format: OutputFormat | null;
  /** The server's file name for the result (`<name>.<extension>`). */
  outputName: string | null;
  width: number | null;
  height: number | null;
  /** Why the item failed: an error code of the table, a message, and the status a request would get. */
  error: { code: string; message: string; status?: number } | null;
  downloadUrl: string | null;
  finishedAt: string | null;
}

export interface CreateJobOptions extends RequestOptions {
  /** Images to upload (paths, bytes, Blobs, streams): one item each. Exactly one of files and urls. */
  files?: readonly ImageInput[];
  /** http(s) URLs for the server to fetch: one item each. */
  urls?: readonly string[];
  /** The compress options for every item (camelCase, as for compress()); `filename` is ignored. */
  options?: ImageOptions;
}

export interface WaitJobOptions extends RequestOptions {
  /** Called with the first state seen and after each change of progress. */
  onProgress?: (job: Job) => void;
  /** Milliseconds between polls when the server sends no Retry-After (default 1000). */
  pollInterval?: number;
}

export interface DownloadJobOptions extends RequestOptions {
  /** Directory for the results, created when missing. */
  outputDir: string;
  /** Downloads in flight at once (default 4). */
  concurrency?: number;
}

/** One item's download, in item order. */
export type JobDownload =
  | { index: number; name: string; ok: true; path: string; size: number; item: JobItem; error?: undefined }
  | { index: number; name: string; ok: false; path?: undefined; error: CompressoErrorLike; item: JobItem };

/** Our four generation models; the server maps each to a model of its provider. */
export type AiModel = 'fast' | 'photo' | 'design' | 'icon';

export interface GenerateOptions extends RequestOptions {
  /** Default `fast`. */
  model?: AiModel;
  /** `width:height`, e.g. `'16:9'` (default `'1:1'`); the nearest the model supports is made. */
  aspectRatio?: string;
  /** Output format; default the provider's (PNG, usually). */
  format?: ImageOptions['format'];
  /** 1–100 or `'auto'`, as for compress. */
  quality?: number | 'auto';
  /** Fit inside a square of this many pixels. */
  maxDimension?: number;
  /** Write the image here (a file, or an existing directory for `generated.<ext>`); default: nothing written. */
  outputPath?: string;
  /** Allow replacing an existing file at `outputPath` (default true: a generated image has no input to protect). */
  overwrite?: boolean;
}

export interface GenerateResult extends CompressResult {
  /** Who made it: `openai` or `replicate`. */
  provider: string;
  /** The provider's model id. */
  model: string;
  /** The ratio made (the model's nearest to the one asked for). */
  aspectRatio: string;
  /** The ratio asked for, when it differs from `aspectRatio`. */
  aspectRatioRequested?: string;
}

/** One operation an edit instruction was parsed into (the contract's EditOperation). */
export type EditOperation =
  | { op: 'resize'; width?: number; height?: number; scale?: number }
  | { op: 'crop'; aspect: string }
  | { op: 'rotate'; degrees: number }
  | { op: 'flip'; direction: 'horizontal' | 'vertical' }
  | { op: 'grayscale' }
  | { op: 'blur'; sigma: number }
  | { op: 'sharpen'; sigma: number }
  | { op: 'brightness'; factor: number }
  | { op: 'contrast'; factor: number }
  | { op: 'saturation'; factor: number }
  | { op: 'format'; format: OutputFormat }
  | { op: 'quality'; quality: number | 'auto' };

export interface EditOptions extends ImageOptions, RequestOptions {
  /** Where to write the result (a file, or a directory); default: nothing written. */
  output?: string | false;
  /** Allow `output` to be the input file itself. */
  overwrite?: boolean;
}

export interface EditResult extends CompressResult {
  /** The operations applied, in order. */
  operations: EditOperation[];
  /** Words of the instruction that were not understood (and not applied). */
  unrecognized: string[];
  /** Phrases a generative provider carried out, when any. */
  generated: string[];
  /** The provider and its model, when one did part of the edit. */
  provider?: string;
  model?: string;
}

export interface AltTextContext {
  productTitle?: string;
  vendor?: string;
  pageTitle?: string;
  /** BCP 47, default `en` (offline text is English; `language` in the result says which). */
  language?: string;
}

export interface AltTextOptions extends RequestOptions {
  /** Name sent with byte/stream inputs (a descriptive one helps offline alt text). */
  filename?: string;
}

export interface ImageFacts {
  width: number;
  height: number;
  orientation: 'landscape' | 'portrait' | 'square';
  dominantColor: string;
  colorName: string;
  transparent: boolean;
}

export interface AltTextResult {
  alt: string;
  /** `provider`: a vision model saw the image; `offline`: composed from the context and measured facts. */
  source: 'provider' | 'offline';
  language: string;
  basis: string[];
  provider?: string;
  model?: string;
  facts: ImageFacts;
}
