import type { AiProviderName } from '@compresso/schema';
import { CompressoError } from '@compresso/schema';

/** Retry-After we pass on when a provider rate-limits without saying how long. */
export const DEFAULT_PROVIDER_RETRY_S = 10;
/** Largest answer (JSON or image) read from a provider: a 4096² PNG in base64 is well under this. */
export const PROVIDER_ANSWER_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Provider failures as our codes. Messages name the provider and what happened, never a key; the
 * provider's own error message is passed on only for content refusals (the caller needs it to
 * change the prompt) and capped.
 */
export function providerError(
  provider: AiProviderName,
  reason: 'malformed' | 'status' | 'connection' | 'failed',
  detail: string,
  extra: Record<string, unknown> = {},
): CompressoError {
  return new CompressoError('PROVIDER_ERROR', `The AI provider (${provider}) ${detail}`, {
    details: { provider, reason, ...extra },
  });
}

export function rateLimited(provider: AiProviderName, retryAfter: string | null): CompressoError {
  const seconds = retryAfterSeconds(retryAfter) ?? DEFAULT_PROVIDER_RETRY_S;
  return new CompressoError(
    'PROVIDER_RATE_LIMITED',
    `The AI provider (${provider}) is rate-limiting this server; retry in ${seconds} s.`,
    { details: { provider, retry_after_seconds: seconds } },
  );
}

export function contentRefused(
  provider: AiProviderName,
  providerMessage: string | undefined,
): CompressoError {
  const said = providerMessage ? `: ${providerMessage.slice(0, 300)}` : '.';
  return new CompressoError(
    'CONTENT_POLICY_VIOLATION',
    `The AI provider (${provider}) refused the request under its content policy${said}`,
    { details: { provider } },
  );
}

export function timedOut(provider: AiProviderName, ms: number): CompressoError {
  return new CompressoError(
    'PROVIDER_TIMEOUT',
    `The AI provider (${provider}) did not finish within ${Math.round(ms / 1000)} s (COMPRESSO_AI_TIMEOUT_MS).`,
    { details: { provider, timeout_ms: ms } },
  );
}

/** Whole seconds from a Retry-After header (delta seconds or an HTTP date), at least 1. */
export function retryAfterSeconds(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.max(1, Math.ceil(Number(trimmed)));
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(1, Math.ceil((date - now) / 1000));
}

export interface ProviderCall {
  provider: AiProviderName;
  signal: AbortSignal;
  timeoutMs: number;
}

/**
 * fetch, with the provider's failures mapped: no answer within the timeout → PROVIDER_TIMEOUT, no
 * connection → PROVIDER_ERROR. The caller reads the status.
 */
export async function providerFetch(call: ProviderCall, url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: call.signal, redirect: 'follow' });
  } catch (error) {
    throw fetchFailure(call, error);
  }
}

function fetchFailure(call: ProviderCall, error: unknown): CompressoError {
  if (call.signal.aborted) return timedOut(call.provider, call.timeoutMs);
  const cause = (error as { cause?: { code?: string } }).cause?.code;
  return providerError(call.provider, 'connection', `could not be reached${cause ? ` (${cause})` : ''}.`);
}

/** The body, bounded; a body cut by the timeout is a timeout. */
export async function readBody(call: ProviderCall, res: Response): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length') ?? 0);
  if (declared > PROVIDER_ANSWER_MAX_BYTES)
    throw providerError(call.provider, 'malformed', `sent an answer of ${declared} bytes, over our limit.`);
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of res.body ?? []) {
      total += chunk.length;
      if (total > PROVIDER_ANSWER_MAX_BYTES)
        throw providerError(call.provider, 'malformed', 'sent an answer over our size limit.');
      chunks.push(Buffer.from(chunk));
    }
    return Buffer.concat(chunks);
  } catch (error) {
    if (error instanceof CompressoError) throw error;
    throw fetchFailure(call, error);
  }
}

export async function readJson(call: ProviderCall, res: Response): Promise<unknown> {
  const body = await readBody(call, res);
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw providerError(
      call.provider,
      'malformed',
      `answered HTTP ${res.status} with a body that is not JSON.`,
      {
        status: res.status,
      },
    );
  }
}

/** An image the provider points at (a CDN URL, or a data: URL). */
export async function fetchImage(call: ProviderCall, url: string): Promise<Buffer> {
  if (url.startsWith('data:')) {
    const match = /^data:[^;,]*;base64,(.*)$/s.exec(url);
    if (!match) throw providerError(call.provider, 'malformed', 'answered a data: URL that is not base64.');
    return Buffer.from(match[1]!, 'base64');
  }
  if (!/^https?:\/\//.test(url))
    throw providerError(call.provider, 'malformed', 'answered an image URL that is not http(s).');
  const res = await providerFetch(call, url, { method: 'GET' });
  if (!res.ok) {
    await res.body?.cancel();
    throw providerError(call.provider, 'status', `answered HTTP ${res.status} for the image it made.`, {
      status: res.status,
    });
  }
  return readBody(call, res);
}

/** A string member of a JSON object, or undefined. */
export function str(value: unknown, ...path: (string | number)[]): string | undefined {
  let at: unknown = value;
  for (const key of path) {
    if (at === null || typeof at !== 'object') return undefined;
    at = (at as Record<string | number, unknown>)[key];
  }
  return typeof at === 'string' ? at : undefined;
}
