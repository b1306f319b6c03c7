import { AbortError, CompressoError, ConnectionError, TimeoutError } from './errors.ts';

/** A request in the client's terms; bodies are bytes in memory so every retry sends the same thing. */
export interface WireRequest {
  method: 'GET' | 'POST' | 'DELETE';
  url: string;
  /**
   * The base URL `url` was built on (origin and path, never credentials): named in connection and
   * timeout errors, so a wrong or missing COMPRESSO_BASE_URL shows which address was tried.
   */
  server: string;
  headers: Record<string, string>;
  /** One `file` part (compress, info) or several (`files`, a job), after the option fields. */
  multipart?: {
    file?: WireFile;
    files?: readonly WireFile[];
    fields: Record<string, string>;
  };
  json?: unknown;
}

export interface WireFile {
  bytes: Uint8Array;
  filename: string;
  contentType: string;
}

export interface WireResponse {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: Uint8Array;
}

/** One attempt: send, read the whole answer, or throw a ConnectionError / TimeoutError / AbortError. */
export type Transport = (request: WireRequest, control: AttemptControl) => Promise<WireResponse>;

export interface AttemptControl {
  signal: AbortSignal;
  /** Tells a timeout (retryable) from the caller's abort (final) once `signal` fired. */
  reason(): 'timeout' | 'aborted';
  timeoutMs: number;
}

interface FormDataPackage {
  append(name: string, value: unknown, options?: { filename?: string; contentType?: string }): void;
  getBuffer(): Buffer;
  getHeaders(): Record<string, string>;
}

let formDataPackage: Promise<new () => FormDataPackage> | undefined;

/**
 * The optional `form-data` package, for runtimes without a global FormData (Node 16). Loaded only
 * there, so Node >= 18 needs no dependency at all.
 */
function loadFormData(): Promise<new () => FormDataPackage> {
  formDataPackage ??= import('form-data').then(
    (mod: { default?: unknown }) => (mod.default ?? mod) as new () => FormDataPackage,
    (cause: unknown) => {
      formDataPackage = undefined;
      throw new CompressoError(
        'MISSING_DEPENDENCY',
        'This Node.js has no global FormData (Node < 18): install the optional package with `npm install form-data`, or upgrade to Node 18 or later.',
        { cause },
      );
    },
  );
  return formDataPackage;
}

function filesOf(part: NonNullable<WireRequest['multipart']>): readonly WireFile[] {
  return [...(part.file ? [part.file] : []), ...(part.files ?? [])];
}

async function encodedBody(
  request: WireRequest,
  native: boolean,
): Promise<{ body: FormData | Uint8Array | string | undefined; headers: Record<string, string> }> {
  if (request.json !== undefined) {
    return { body: JSON.stringify(request.json), headers: { 'content-type': 'application/json' } };
  }
  const part = request.multipart;
  if (!part) return { body: undefined, headers: {} };
  if (native && typeof FormData === 'function' && typeof Blob === 'function') {
    const form = new FormData();
    for (const [name, value] of Object.entries(part.fields)) form.append(name, value);
    for (const { bytes, filename, contentType } of filesOf(part)) {
      form.append('file', new Blob([bytes as Uint8Array<ArrayBuffer>], { type: contentType }), filename);
    }
    return { body: form, headers: {} };
  }
  const FormDataClass = await loadFormData();
  const form = new FormDataClass();
  for (const [name, value] of Object.entries(part.fields)) form.append(name, value);
  for (const { bytes, filename, contentType } of filesOf(part)) {
    form.append('file', Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), {
      filename,
      contentType,
    });
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(form.getHeaders())) headers[name.toLowerCase()] = value;
  return { body: form.getBuffer(), headers };
}

function failure(
  control: AttemptControl,
  cause: unknown,
  request: WireRequest,
  what: string,
): CompressoError {
  if (control.signal.aborted) {
    return control.reason() === 'timeout'
      ? new TimeoutError(
          'TIMEOUT',
          `No complete answer from ${request.server} within ${control.timeoutMs} ms (${what}).`,
          { cause },
        )
      : new AbortError('ABORTED', `The request was aborted (${what}).`, {
          cause: control.signal.reason ?? cause,
        });
  }
  const code = networkCode(cause);
  return new ConnectionError(
    'CONNECTION_ERROR',
    `Could not reach the Compresso server at ${request.server} (${what}${code ? `: ${code}` : ''}).`,
    { cause, details: code ? { code } : undefined },
  );
}

/** The system error code (ECONNRESET, ECONNREFUSED, …) however deep the fetch implementation wraps it. */
export function networkCode(error: unknown): string | undefined {
  let current = error as { code?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; current && depth < 5; depth++) {
    if (typeof current.code === 'string' && /^E[A-Z]+$|^UND_ERR/.test(current.code)) return current.code;
    current = current.cause as typeof current;
  }
  return undefined;
}

/** Through a fetch implementation (the global one on Node >= 18, or the caller's). */
export function fetchTransport(fetchImpl: typeof fetch): Transport {
  return async (request, control) => {
    // Any fetch of this era takes the global FormData; form-data is only for runtimes without one.
    const { body, headers } = await encodedBody(request, true);
    let response: Response;
    try {
      response = await fetchImpl(request.url, {
        method: request.method,
        headers: { ...request.headers, ...headers },
        body: body as RequestInit['body'],
        signal: control.signal,
        redirect: 'error',
      });
    } catch (cause) {
      throw failure(control, cause, request, `${request.method} ${new URL(request.url).pathname}`);
    }
    let bytes: ArrayBuffer;
    try {
      bytes = await response.arrayBuffer();
    } catch (cause) {
      throw failure(control, cause, request, 'reading the answer');
    }
    const responseHeaders: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      responseHeaders[name.toLowerCase()] = value;
    });
    return { status: response.status, headers: responseHeaders, body: new Uint8Array(bytes) };
  };
}

/** node:http(s), for Node 16, which has no fetch. */
export function httpTransport(): Transport {
  return async (request, control) => {
    const { body, headers } = await encodedBody(request, false);
    const url = new URL(request.url);
    const http = url.protocol === 'https:' ? await import('node:https') : await import('node:http');
    const payload = typeof body === 'string' ? Buffer.from(body) : (body as Uint8Array | undefined);
    const what = `${request.method} ${url.pathname}`;
    return new Promise<WireResponse>((resolve, reject) => {
      if (control.signal.aborted) {
        reject(failure(control, control.signal.reason, request, what));
        return;
      }
      const req = http.request(url, {
        method: request.method,
        headers: {
          ...request.headers,
          ...headers,
          ...(payload ? { 'content-length': String(payload.byteLength) } : {}),
        },
      });
      const onAbort = () => req.destroy(failure(control, control.signal.reason, request, what));
      control.signal.addEventListener('abort', onAbort, { once: true });
      const done = () => control.signal.removeEventListener('abort', onAbort);
      req.on('error', (cause) => {
        done();
        reject(cause instanceof CompressoError ? cause : failure(control, cause, request, what));
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', (cause) => {
          done();
          reject(
            cause instanceof CompressoError ? cause : failure(control, cause, request, 'reading the answer'),
          );
        });
        res.on('aborted', () => {
          done();
          reject(failure(control, new Error('answer cut off'), request, 'reading the answer'));
        });
        res.on('end', () => {
          done();
          const responseHeaders: Record<string, string> = {};
          for (const [name, value] of Object.entries(res.headers)) {
            if (value !== undefined) responseHeaders[name] = Array.isArray(value) ? value.join(', ') : value;
          }
          resolve({ status: res.statusCode ?? 0, headers: responseHeaders, body: Buffer.concat(chunks) });
        });
      });
      req.end(payload);
    });
  };
}

/** A JSON answer's body, or INVALID_RESPONSE when the server sent something else. */
export function parseJson<T>(response: WireResponse): T {
  const text = Buffer.from(response.body.buffer, response.body.byteOffset, response.body.byteLength).toString(
    'utf8',
  );
  try {
    return JSON.parse(text) as T;
  } catch (cause) {
    throw new CompressoError(
      'INVALID_RESPONSE',
      `The server answered ${response.status} with something that is not JSON.`,
      {
        status: response.status,
        requestId: response.headers['x-request-id'],
        cause,
      },
    );
  }
}
