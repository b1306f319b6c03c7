import { createHash } from 'node:crypto';
import type {
  BlobStore,
  IdempotencyRecord,
  IdempotencyStore,
  Logger,
  StoredAnswer,
} from '@compresso/runtime';
import { CompressoError } from '@compresso/schema';
import type { Request, Response } from 'express';
import { authOf } from './auth.ts';
import { idempotencyKeyOf } from './idempotency-key.ts';

/** How long a first answer is replayed: a day, long enough for any client's retries and a rerun. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/**
 * Answers up to this size are kept in the database row; larger ones (compressed images, mostly) in
 * the blob store, so a row stays small and a 40 MB answer never travels through SQL.
 */
export const INLINE_ANSWER_BYTES = 256 * 1024;
/**
 * How long the first request may hold its key without an answer before another request with the
 * key takes it over: the first one's process died (an answer cannot take this long: uploads and
 * encodes have far shorter limits).
 */
export const IDEMPOTENCY_LEASE_MS = 5 * 60_000;
/**
 * How long a duplicate that arrives while the first is still running waits for the first's answer
 * before it is answered 409 IDEMPOTENCY_KEY_IN_USE (with Retry-After): waiting gives a retrying
 * client the answer in one round trip; the limit keeps a stuck first request from holding duplicates.
 */
export const IDEMPOTENCY_WAIT_MS = 60_000;
/** The 409's Retry-After, in seconds. */
const IN_USE_RETRY_AFTER_S = 1;

/** Headers that describe this exchange rather than the answer; a replay sends its own. */
const NOT_REPLAYED = new Set([
  'x-request-id',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'retry-after',
  'connection',
  'keep-alive',
  'date',
  'transfer-encoding',
  'content-length',
]);

export interface IdempotencyDeps {
  store: IdempotencyStore;
  /** Where answers over INLINE_ANSWER_BYTES are kept; without one every answer stays in the row. */
  blobs?: BlobStore | undefined;
  logger: Logger;
  now: () => Date;
  waitMs?: number;
  leaseMs?: number;
}

export interface Idempotency {
  /**
   * Runs `work` (which answers the request) at most once per (API key, Idempotency-Key) in 24 h,
   * counting the request's quota only then. Without the header it just runs `work` (the request was
   * counted by auth). `fingerprint` identifies the request (see `fingerprintOf`): the same key with
   * another request is refused with 422 IDEMPOTENCY_KEY_REUSED.
   */
  run(req: Request, res: Response, fingerprint: string, work: () => Promise<void>): Promise<void>;
}

/** A stable hash of what a request asks: route, option fields (in any order), files (name, bytes). */
export function fingerprintOf(
  req: Request,
  content: {
    fields?: Record<string, string>;
    files?: { name: string | undefined; bytes: Uint8Array }[];
    json?: unknown;
  },
): string {
  const hash = createHash('sha256');
  hash.update(`${req.method} ${req.path}\n`);
  if (content.fields) {
    const entries = Object.entries(content.fields).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    hash.update(`fields ${JSON.stringify(entries)}\n`);
  }
  for (const file of content.files ?? []) {
    const digest = createHash('sha256').update(file.bytes).digest('hex');
    hash.update(`file ${JSON.stringify(file.name ?? '')} ${file.bytes.length} ${digest}\n`);
  }
  if (content.json !== undefined) hash.update(`json ${canonicalJson(content.json)}\n`);
  return hash.digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function createIdempotency(deps: IdempotencyDeps): Idempotency {
  const { store, blobs, logger, now } = deps;
  const waitMs = deps.waitMs ?? IDEMPOTENCY_WAIT_MS;
  const leaseMs = deps.leaseMs ?? IDEMPOTENCY_LEASE_MS;
  // Duplicates in this process wake as soon as the first answers; those in other processes poll.
  const wakers = new Map<string, Set<() => void>>();
  const wake = (id: string) => {
    for (const w of wakers.get(id) ?? []) w();
    wakers.delete(id);
  };
  const nap = (id: string, ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        wakers.get(id)?.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      const set = wakers.get(id) ?? new Set<() => void>();
      wakers.set(id, set);
      set.add(done);
    });

  let lastPurgeMs = 0;
  const purgeNow = (nowMs: number) => {
    // At most hourly, in the background: expired rows are already ignored by claim, so the purge
    // only bounds the table and the blob store's idempotency/ prefix.
    if (nowMs - lastPurgeMs < 60 * 60_000) return;
    lastPurgeMs = nowMs;
    store
      .purge(nowMs - IDEMPOTENCY_TTL_MS)
      .then(async ({ bodyKeys }) => {
        for (const key of bodyKeys) await blobs?.delete(key);
      })
      .catch((err) => logger.warn({ err }, 'idempotency purge failed'));
  };

  const replay = async (res: Response, answer: StoredAnswer) => {
    let body = answer.body;
    if (body === null && answer.bodyKey) {
      const stored = await blobs?.get(answer.bodyKey);
      if (!stored) throw new Error(`idempotent answer ${answer.bodyKey} is missing from the blob store`);
      body = stored.bytes;
    }
    res.locals.idempotencyAnswer = 'replayed';
    for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
    res.setHeader('Idempotent-Replayed', 'true');
    const bytes = Buffer.from(body ?? new Uint8Array());
    res.setHeader('Content-Length', String(bytes.length));
    res.status(answer.status).end(bytes);
  };

  return {
    async run(req, res, fingerprint, work) {
      const key = idempotencyKeyOf(req);
      if (key === undefined) return work();
      const auth = authOf(res);
      const scope = `key:${auth.key.id}`;
      const id = `${scope}\n${key}`;
      const deadline = Date.now() + waitMs;
      for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
        const nowMs = now().getTime();
        const claim = await store.claim({
          scope,
          key,
          fingerprint,
          nowMs,
          leaseMs,
          ttlMs: IDEMPOTENCY_TTL_MS,
        });
        if (claim.claimed) {
          purgeNow(nowMs);
          return own(res, scope, key, claim.token, work);
        }
        const record: IdempotencyRecord = claim.record;
        if (record.fingerprint !== fingerprint) {
          res.locals.idempotencyAnswer = 'mismatch';
          throw new CompressoError(
            'IDEMPOTENCY_KEY_REUSED',
            `Idempotency-Key ${JSON.stringify(key.slice(0, 60))} was used within the last 24 h for a different request (another route, file or option); use a new key for a new request.`,
            {
              details: [
                {
                  field: 'Idempotency-Key',
                  expected: 'a key not used for another request',
                  received: key.slice(0, 100),
                },
              ],
            },
          );
        }
        if (record.state === 'done' && record.answer) return replay(res, record.answer);
        if (Date.now() >= deadline) {
          res.locals.idempotencyAnswer = 'in-use';
          res.setHeader('Retry-After', String(IN_USE_RETRY_AFTER_S));
          throw new CompressoError(
            'IDEMPOTENCY_KEY_IN_USE',
            `A request with Idempotency-Key ${JSON.stringify(key.slice(0, 60))} is still running; retry in ${IN_USE_RETRY_AFTER_S} s to get its answer.`,
          );
        }
        await nap(id, pause);
      }
    },
  };

  async function own(res: Response, scope: string, key: string, token: string, work: () => Promise<void>) {
    const id = `${scope}\n${key}`;
    const auth = authOf(res);
    try {
      await auth.countNow?.();
    } catch (error) {
      await store.release(scope, key, token).finally(() => wake(id));
      throw error;
    }
    // The answer is taken as it is written, whichever way it is (res.end with bytes, res.json, the
    // error handler), and recorded once complete; errors thrown by `work` reach the error handler,
    // whose answer is recorded the same way.
    const chunks: Buffer[] = [];
    const write = res.write.bind(res) as (...args: unknown[]) => boolean;
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    const take = (chunk: unknown, encoding: unknown) => {
      if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
      chunks.push(
        typeof chunk === 'string'
          ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8')
          : Buffer.from(chunk as Uint8Array),
      );
    };
    (res as { write: unknown }).write = (chunk: unknown, encoding?: unknown, cb?: unknown) => {
      take(chunk, encoding);
      return write(chunk, encoding, cb);
    };
    (res as { end: unknown }).end = (chunk?: unknown, encoding?: unknown, cb?: unknown) => {
      (res as { write: unknown }).write = write;
      (res as { end: unknown }).end = end;
      take(chunk, encoding);
      record(res.statusCode, res.getHeaders(), Buffer.concat(chunks)).catch((err) =>
        logger.error({ err }, 'recording an idempotent answer failed'),
      );
      return end(chunk, encoding, cb);
    };

    async function record(status: number, headers: Record<string, unknown>, body: Buffer) {
      try {
        // Our faults and the quota are not answers to keep: a retry after them must run again.
        if (status >= 500 || status === 429) {
          await store.release(scope, key, token);
          return;
        }
        const kept: Record<string, string> = {};
        for (const [name, value] of Object.entries(headers)) {
          if (value === undefined || NOT_REPLAYED.has(name)) continue;
          kept[name] = Array.isArray(value) ? value.join(', ') : String(value);
        }
        let bodyKey: string | null = null;
        if (blobs && body.length > INLINE_ANSWER_BYTES) {
          const hashed = createHash('sha256').update(`${scope}\n${key}`).digest('hex');
          bodyKey = `idempotency/${hashed}/${token}`;
          await blobs.put(bodyKey, body);
        }
        const recorded = await store.complete(scope, key, token, {
          status,
          headers: kept,
          body: bodyKey ? null : body,
          bodyKey,
        });
        if (!recorded && bodyKey) await blobs?.delete(bodyKey);
      } finally {
        wake(id);
      }
    }
    await work();
  }
}
