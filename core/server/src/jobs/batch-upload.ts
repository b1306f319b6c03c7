import type { IncomingMessage, ServerResponse } from 'node:http';
import { CompressoError } from '@compresso/schema';
import busboy from 'busboy';
import { sendContinue } from '../expect-continue.ts';
import { formFieldProblem, MAX_FIELD_BYTES } from '../multipart.ts';
import { BUSY_RETRY_AFTER_SECONDS, type UploadBudget } from '../upload-budget.ts';

export interface BatchFile {
  name: string;
  bytes: Buffer;
}

export interface BatchUpload {
  files: BatchFile[];
  fields: Record<string, string>;
}

export interface BatchUploadLimits {
  /** Largest single file. */
  maxFileBytes: number;
  /** Largest whole body: every file of the batch is held in memory until stored. */
  maxBodyBytes: number;
  maxFiles: number;
  idleTimeoutMs: number;
  budget?: UploadBudget;
  owner?: string;
}

const MAX_FIELDS = 20;

/**
 * A batch upload: many `file` parts and the compress option fields, read within the same kind of
 * limits as a single upload (see multipart.ts): a declared length over the body limit is refused
 * before a byte is read, a file past its limit is cut off while streaming, the body's bytes are
 * reserved in the shared upload budget first, and a stalled body answers 408.
 */
export function readBatchUpload(
  req: IncomingMessage,
  res: ServerResponse,
  limits: BatchUploadLimits,
): Promise<BatchUpload> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limits.maxBodyBytes) {
    return Promise.reject(bodyTooLarge(limits.maxBodyBytes));
  }
  if (limits.budget) {
    const reservation = limits.budget.tryReserve(
      Number.isFinite(declared) ? declared : limits.maxBodyBytes,
      limits.owner,
    );
    if (!reservation.ok) {
      res.setHeader('Retry-After', String(BUSY_RETRY_AFTER_SECONDS));
      return Promise.reject(
        new CompressoError(
          'SERVICE_UNAVAILABLE',
          `The server is holding as many uploads as it can; retry in ${BUSY_RETRY_AFTER_SECONDS} s.`,
          { details: { retry_after_seconds: BUSY_RETRY_AFTER_SECONDS, limit: reservation.reason } },
        ),
      );
    }
    res.once('close', reservation.release);
  }
  sendContinue(req, res);

  return new Promise<BatchUpload>((resolve, reject) => {
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
    const files: BatchFile[] = [];
    const fields: Record<string, string> = {};
    let total = 0;
    let settled = false;
    let idle: NodeJS.Timeout | undefined;
    let open = 0;
    let parserClosed = false;

    const finish = (error: CompressoError | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(idle);
      req.off('data', armIdle);
      req.off('close', onClose);
      if (error) {
        req.unpipe(parser);
        parser.removeAllListeners();
        parser.on('error', () => {});
        files.length = 0;
        req.resume();
        reject(error);
      } else resolve({ files, fields });
    };
    function armIdle() {
      clearTimeout(idle);
      idle = setTimeout(
        () =>
          finish(
            new CompressoError(
              'REQUEST_TIMEOUT',
              `The upload stalled: no data for ${limits.idleTimeoutMs} ms. Send the whole body without long pauses.`,
            ),
          ),
        limits.idleTimeoutMs,
      );
      idle.unref();
    }
    const onClose = () => {
      if (!req.complete) finish(new CompressoError('INVALID_REQUEST', 'The client aborted the upload.'));
    };
    req.on('data', armIdle);
    req.on('close', onClose);
    armIdle();

    parser.on('file', (name, stream, info) => {
      stream.on('error', () => {});
      if (name !== 'file') {
        stream.resume();
        finish(
          new CompressoError(
            'INVALID_REQUEST',
            `Unexpected file part ${JSON.stringify(name)}: send each image as "file".`,
          ),
        );
        return;
      }
      const chunks: Buffer[] = [];
      open++;
      stream.on('data', (chunk: Buffer) => {
        total += chunk.length;
        if (total > limits.maxBodyBytes) finish(bodyTooLarge(limits.maxBodyBytes));
        if (!settled) chunks.push(chunk);
      });
      stream.on('limit', () =>
        finish(
          new CompressoError(
            'FILE_TOO_LARGE',
            `file ${files.length} (${JSON.stringify(info.filename ?? '')}): larger than the limit of ${limits.maxFileBytes} bytes.`,
            { details: { limit_bytes: limits.maxFileBytes, index: files.length } },
          ),
        ),
      );
      stream.on('end', () => {
        open--;
        if (!settled) {
          // The name is only shown back (and sanitised for downloads); a long one is cut, not refused.
          const name = (info.filename ?? '').replace(/^.*[\\/]/, '').slice(0, 200);
          files.push({ name: name || `image-${files.length}`, bytes: Buffer.concat(chunks) });
        }
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
        new CompressoError('INVALID_REQUEST', `Too many files: a batch holds at most ${limits.maxFiles}.`, {
          details: [
            {
              field: 'file',
              expected: `at most ${limits.maxFiles} parts`,
              received: `more than ${limits.maxFiles} parts`,
            },
          ],
        }),
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

function bodyTooLarge(maxBytes: number): CompressoError {
  return new CompressoError(
    'FILE_TOO_LARGE',
    `The batch is larger than the limit of ${maxBytes} bytes for all its files together; send it in smaller batches.`,
    { details: { limit_bytes: maxBytes } },
  );
}
