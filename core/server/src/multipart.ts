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
export function readUpload(req: IncomingMessage, res: ServerResponse, limits: UploadLimits): Promise<Upload> {
  const contentType = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\b/i.test(contentType)) {
    return Promise.reject(
      new CompressoError(
        'INVALID_REQUEST',
        `Expected a multipart/form-data body with a "file" part, received Content-Type ${JSON.stringify(contentType || 'none')}.`,
      ),
    );
  }
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limits.maxBytes + FRAMING_SLACK) {
    return Promise.reject(tooLarge(limits.maxBytes));
  }
  if (limits.budget) {
    // Reserve before the 100 Continue and before reading a byte. A declared length is what the body
    // may hold; a chunked body of unknown length may grow to the whole limit, so it reserves that.
    const reservation = limits.budget.tryReserve(
      Number.isFinite(declared) ? declared : limits.maxBytes,
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

  return new Promise<Upload>((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        limits: {
          fileSize: limits.maxBytes,
          files: 1,
          fields: MAX_FIELDS,
          parts: MAX_FIELDS + 1,
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
    const chunks: Buffer[] = [];
    const fields: Record<string, string> = {};
    let filename: string | undefined;
    let sawFile = false;
    let settled = false;
    let idle: NodeJS.Timeout | undefined;

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
        chunks.length = 0;
        req.resume();
        reject(error);
      } else {
        resolve({ file: sawFile ? Buffer.concat(chunks) : undefined, filename, fields });
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
            `Unexpected file part ${JSON.stringify(name)}: send the image as "file".`,
          ),
        );
        return;
      }
      sawFile = true;
      filename = info.filename;
      stream.on('data', (chunk: Buffer) => {
        if (!settled) chunks.push(chunk);
      });
      stream.on('limit', () => finish(tooLarge(limits.maxBytes)));
    });
    parser.on('field', (name, value, info) => {
      const problem = formFieldProblem(fields, name, value, info);
      if (problem) finish(problem);
      else fields[name] = value;
    });
    parser.on('filesLimit', () =>
      finish(new CompressoError('INVALID_REQUEST', 'Send exactly one file part ("file").')),
    );
    parser.on('fieldsLimit', () =>
      finish(new CompressoError('INVALID_REQUEST', `Too many form fields (at most ${MAX_FIELDS}).`)),
    );
    parser.on('partsLimit', () =>
      finish(new CompressoError('INVALID_REQUEST', `Too many form parts (at most ${MAX_FIELDS + 1}).`)),
    );
    parser.on('error', (error: Error) =>
      finish(new CompressoError('INVALID_REQUEST', `Malformed multipart body: ${error.message}`)),
    );
    parser.on('close', () => finish(undefined));
    req.pipe(parser);
  });
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
