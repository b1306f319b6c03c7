import type { IncomingMessage, ServerResponse } from 'node:http';
import { CompressoError } from '@compresso/schema';
import busboy from 'busboy';
import { sendContinue } from './expect-continue.ts';
import { BUSY_RETRY_AFTER_SECONDS, type UploadBudget } from './upload-budget.ts';

export interface Upload {
  file: Buffer | undefined;
  filename: string | undefined;
  fields: Record<string, string>;
}

export interface UploadLimits {
  maxBytes: number;
  /** Longest pause between chunks before the upload is dropped with REQUEST_TIMEOUT. */
  idleTimeoutMs: number;
  /** Shared by every request: the upload bytes all of them may hold at once. */
  budget?: UploadBudget;
  /** Whose upload this is (the account id), for the budget's per-account share. */
  owner?: string;
}

/** Room for the multipart framing and the option fields around a file of exactly maxBytes. */
const FRAMING_SLACK = 64 * 1024;
/** Option values are short words and numbers; a megabyte "quality" is an attack, not an option. */
export const MAX_FIELD_BYTES = 1024;
const MAX_FIELDS = 20;

/**
 * Read one multipart upload: the `file` part into memory (the engine needs the whole image), the
 * other parts as option fields. Memory is bounded while streaming: a declared Content-Length over the
 * limit is refused before reading a byte, and a chunked or lying body is cut off by busboy's fileSize
 * limit the moment it passes maxBytes; the partial file is dropped, never assembled.
 */
export async function readUpload(
  req: IncomingMessage,
  res: ServerResponse,
  limits: UploadLimits,
): Promise<Upload> {
  const { files, fields } = await readMultipart(req, res, {
    kind: 'image',
    maxFileBytes: limits.maxBytes,
    maxBodyBytes: limits.maxBytes + FRAMING_SLACK,
    maxFiles: 1,
    idleTimeoutMs: limits.idleTimeoutMs,
    ...(limits.budget ? { budget: limits.budget } : {}),
    ...(limits.owner ? { owner: limits.owner } : {}),
  });
  return { file: files[0]?.bytes, filename: files[0]?.filename, fields };
}

export interface MultipartFile {
  /** As the client sent it (may hold a path or nothing); callers clean it for their use. */
  filename: string | undefined;
  bytes: Buffer;
}

export interface MultipartLimits {
  /**
   * Whose words the errors use: `image` for the one-file routes (compress, info, the web page),
   * `batch` for POST /api/v1/jobs (many files, which may also be sent as JSON URLs).
   */
  kind: 'image' | 'batch';
  /** Largest single file. */
  maxFileBytes: number;
  /** Largest whole body: every file is held in memory until the caller is done with it. */
  maxBodyBytes: number;
  maxFiles: number;
  idleTimeoutMs: number;
  budget?: UploadBudget;
  owner?: string;
}

/**
 * The one multipart reader of the server (single images and batches alike): `file` parts into
 * memory, the other parts as option fields, within limits checked in this order — the Content-Type
 * before anything; a declared Content-Length over the body limit before reading a byte; the bytes
 * reserved in the shared upload budget (and the `100 Continue` sent) only then; while streaming, a
 * file past its limit or a body past its total is cut off and dropped, a body that stalls answers
 * 408, and a client that goes away (aborted, or closed before the end) ends the read at once so
 * nothing it sent is kept.
 */
export function readMultipart(
  req: IncomingMessage,
  res: ServerResponse,
  limits: MultipartLimits,
): Promise<{ files: MultipartFile[]; fields: Record<string, string> }> {
  const batch = limits.kind === 'batch';
  const contentType = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\b/i.test(contentType)) {
    const received = JSON.stringify(contentType || 'none');
    return Promise.reject(
      new CompressoError(
        'INVALID_REQUEST',
        batch
          ? `Expected multipart/form-data with "file" parts, or JSON {"urls": […]}; received Content-Type ${received}.`
          : `Expected a multipart/form-data body with a "file" part, received Content-Type ${received}.`,
      ),
    );
  }
  const bodyTooLarge = () => (batch ? batchTooLarge(limits.maxBodyBytes) : tooLarge(limits.maxFileBytes));
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limits.maxBodyBytes) {
    return Promise.reject(bodyTooLarge());
  }
  if (limits.budget) {
    // Reserve before the 100 Continue and before reading a byte. A declared length is what the body
    // may hold; a chunked body of unknown length may grow to the whole limit, so it reserves that.
    const reservation = limits.budget.tryReserve(
      Number.isFinite(declared)
        ? declared
        : limits.kind === 'image'
          ? limits.maxFileBytes
          : limits.maxBodyBytes,
      limits.owner,
    );
    if (!reservation.ok) {
      res.setHeader('Retry-After', String(BUSY_RETRY_AFTER_SECONDS));
      return Promise.reject(
        new CompressoError(
          'SERVICE_UNAVAILABLE',
          reservation.reason === 'account'
            ? `This account's uploads in flight already hold its share of the server's memory (${limits.budget.accountLimit} bytes); retry in ${BUSY_RETRY_AFTER_SECONDS} s, or send fewer at once.`
            : `The server is holding as many uploads as it can; retry in ${BUSY_RETRY_AFTER_SECONDS} s.`,
          { details: { retry_after_seconds: BUSY_RETRY_AFTER_SECONDS, limit: reservation.reason } },
        ),
      );
    }
    // Held until the answer is done, not just the upload: the buffered image lives through the engine.
    res.once('close', reservation.release);
  }
  sendContinue(req, res);

  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        limits: {
          fileSize: limits.maxFileBytes,
          files: limits.maxFiles,
          fields: MAX_FIELDS,
          parts: limits.maxFiles + MAX_FIELDS,
          fieldSize: MAX_FIELD_BYTES,
          fieldNameSize: 100,
        },
      });
    } catch (error) {
      reject(
        new CompressoError('INVALID_REQUEST', `Malformed multipart request: ${(error as Error).message}`),
      );
      return;
    }
    const files: MultipartFile[] = [];
    const fields: Record<string, string> = {};
    let total = 0;
    let settled = false;
    let idle: NodeJS.Timeout | undefined;
    // Files still streaming: the parser may close before the last file's stream has ended.
    let open = 0;
    let parserClosed = false;

    const finish = (error: CompressoError | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(idle);
      req.off('data', onData);
      req.off('aborted', onAborted);
      req.off('close', onClose);
      if (error) {
        // Stop parsing and let the rest of the body drain to nowhere, so nothing more is kept and the
        // client can read the error before the connection closes (see closeAfterResponse).
        req.unpipe(parser);
        parser.removeAllListeners();
        parser.on('error', () => {});
        files.length = 0;
        req.resume();
        reject(error);
      } else {
        resolve({ files, fields });
      }
    };
    const armIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => {
        finish(
          new CompressoError(
            'REQUEST_TIMEOUT',
            `The upload stalled: no data for ${limits.idleTimeoutMs} ms. Send the whole body without long pauses.`,
          ),
        );
      }, limits.idleTimeoutMs);
      idle.unref();
    };
    const onData = () => armIdle();
    const onAborted = () => finish(new CompressoError('INVALID_REQUEST', 'The client aborted the upload.'));
    const onClose = () => {
      if (!req.complete) onAborted();
    };
    req.on('data', onData);
    req.on('aborted', onAborted);
    req.on('close', onClose);
    armIdle();

    parser.on('file', (name, stream, info) => {
      // busboy destroys the file stream with the same error it emits on the parser (a truncated form,
      // say); the parser's handler answers it, and without a listener here it would crash the process.
      stream.on('error', () => {});
      if (name !== 'file') {
        stream.resume();
        finish(
          new CompressoError(
            'INVALID_REQUEST',
            `Unexpected file part ${JSON.stringify(name)}: send ${batch ? 'each image' : 'the image'} as "file".`,
          ),
        );
        return;
      }
      const index = files.length + open;
      const chunks: Buffer[] = [];
      open++;
      stream.on('data', (chunk: Buffer) => {
        total += chunk.length;
        if (total > limits.maxBodyBytes) finish(bodyTooLarge());
        if (!settled) chunks.push(chunk);
      });
      stream.on('limit', () =>
        finish(
          batch
            ? new CompressoError(
                'FILE_TOO_LARGE',
                `file ${index} (${JSON.stringify(info.filename ?? '')}): larger than the limit of ${limits.maxFileBytes} bytes.`,
                { details: { limit_bytes: limits.maxFileBytes, index } },
              )
            : tooLarge(limits.maxFileBytes),
        ),
      );
      stream.on('end', () => {
        open--;
        if (!settled) files.push({ filename: info.filename, bytes: Buffer.concat(chunks) });
        if (parserClosed && open === 0) finish(undefined);
      });
    });
    parser.on('field', (name, value, info) => {
      const problem = formFieldProblem(fields, name, value, info);
      if (problem) finish(problem);
      else fields[name] = value;
    });
    parser.on('filesLimit', () =>
      finish(
        batch
          ? new CompressoError(
              'INVALID_REQUEST',
              `Too many files: a batch holds at most ${limits.maxFiles}.`,
              {
                details: [
                  {
                    field: 'file',
                    expected: `at most ${limits.maxFiles} parts`,
                    received: `more than ${limits.maxFiles} parts`,
                  },
                ],
              },
            )
          : new CompressoError('INVALID_REQUEST', 'Send exactly one file part ("file").'),
      ),
    );
    parser.on('fieldsLimit', () =>
      finish(new CompressoError('INVALID_REQUEST', `Too many form fields (at most ${MAX_FIELDS}).`)),
    );
    parser.on('partsLimit', () =>
      finish(
        new CompressoError(
          'INVALID_REQUEST',
          `Too many form parts (at most ${limits.maxFiles + MAX_FIELDS}).`,
        ),
      ),
    );
    parser.on('error', (error: Error) =>
      finish(new CompressoError('INVALID_REQUEST', `Malformed multipart body: ${error.message}`)),
    );
    parser.on('close', () => {
      parserClosed = true;
      if (open === 0) finish(undefined);
    });
    req.pipe(parser);
  });
}

function batchTooLarge(maxBytes: number): CompressoError {
  return new CompressoError(
    'FILE_TOO_LARGE',
    `The batch is larger than the limit of ${maxBytes} bytes for all its files together; send it in smaller batches.`,
    { details: { limit_bytes: maxBytes } },
  );
}

function tooLarge(maxBytes: number): CompressoError {
  return new CompressoError(
    'FILE_TOO_LARGE',
    `file: larger than the limit of ${maxBytes} bytes (${(maxBytes / 1024 / 1024).toFixed(1)} MiB).`,
    { details: { limit_bytes: maxBytes } },
  );
}

/**
 * What is wrong with one text field of a multipart form, if anything: cut short by the size limit,
 * or sent twice (which value would be meant is a guess we do not make). Shared by the single-image
 * and batch parsers so both answer the same words.
 */
export function formFieldProblem(
  fields: Record<string, string>,
  name: string,
  value: string,
  info: { nameTruncated: boolean; valueTruncated: boolean },
): CompressoError | undefined {
  if (info.nameTruncated || info.valueTruncated) {
    return new CompressoError('INVALID_OPTION', `${name}: value longer than ${MAX_FIELD_BYTES} bytes.`, {
      details: [
        { field: name, expected: `at most ${MAX_FIELD_BYTES} bytes`, received: `${value.slice(0, 40)}...` },
      ],
    });
  }
  if (Object.hasOwn(fields, name)) {
    return new CompressoError('INVALID_OPTION', `${name}: sent more than once.`, {
      details: [{ field: name, expected: 'one value', received: 'several values' }],
    });
  }
  return undefined;
}
