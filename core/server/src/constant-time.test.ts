// "Keys compared in constant time" (README, API keys; /metrics' token) is shown by the shape of the
// lookup path, never by timing it: the database is asked for the key's SHA-256 (an index lookup, no
// secret in any query), the stored hash is compared with crypto.timingSafeEqual, and a near-miss and a
// far-miss take the same steps. A stopwatch could not tell these apart on a shared machine anyway.
import * as crypto from 'node:crypto';
import { hashKey } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, proAccount, startTestServer, type TestServer } from './testing.ts';

vi.mock('node:crypto', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:crypto')>();
  return { ...actual, timingSafeEqual: vi.fn(actual.timingSafeEqual) };
});
const timingSafeEqual = vi.mocked(crypto.timingSafeEqual);

const METRICS_TOKEN = 'metrics-token-of-some-length';
let srv: TestServer;
let key: string;

beforeAll(async () => {
  srv = await startTestServer({ dbPath: ':memory:', overrides: { metricsToken: METRICS_TOKEN } });
  ({ key } = await proAccount(srv.db, 'timing@example.com'));
});
afterAll(async () => {
  await srv?.close();
});

/** One authenticated request, with what the key lookup was asked and what was compared. */
async function attempt(secret: string) {
  const lookup = vi.spyOn(srv.db, 'findActiveKeyByHash');
  timingSafeEqual.mockClear();
  try {
    const res = await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(secret) });
    const body = (await res.json()) as { error?: { code: string; message: string } };
    return {
      status: res.status,
      error: body.error && { code: body.error.code, message: body.error.message },
      lookups: lookup.mock.calls.map((c) => c[0]),
      compared: timingSafeEqual.mock.calls.map(([a, b]) => [
        Buffer.from(a as Uint8Array),
        Buffer.from(b as Uint8Array),
      ]),
    };
  } finally {
    lookup.mockRestore();
  }
}

describe('API keys are looked up by hash and compared in constant time', () => {
  it('the database is asked for the SHA-256 of the key, never the key, and the match is checked with timingSafeEqual', async () => {
    const ok = await attempt(key);
    expect(ok.status).toBe(200);
    expect(ok.lookups).toEqual([hashKey(key)]);
    expect(ok.lookups[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(ok.lookups.join()).not.toContain(key.slice('cmp_live_'.length));
    // The stored hash against the presented one: 32 bytes each, equal.
    const digest = Buffer.from(hashKey(key), 'hex');
    expect(ok.compared).toEqual([[digest, digest]]);
  });

  it('a key differing only in its last character takes the same steps as one differing everywhere', async () => {
    const last = key.at(-1) === 'A' ? 'B' : 'A';
    const near = `${key.slice(0, -1)}${last}`;
    const far = `cmp_live_${'Z'.repeat(43)}`;
    const [a, b] = [await attempt(near), await attempt(far)];
    for (const [miss, secret] of [
      [a, near],
      [b, far],
    ] as const) {
      // One indexed lookup by hash, which finds nothing; nothing left to compare; the same answer.
      expect(miss.lookups).toEqual([hashKey(secret)]);
      expect(miss.compared).toEqual([]);
      expect(miss.status).toBe(401);
    }
    expect(a.error).toEqual(b.error);
    expect(a.error?.code).toBe('INVALID_API_KEY');
  });
});

describe('/metrics token', () => {
  it('is compared as SHA-256 digests with timingSafeEqual, so the lengths match whatever is sent', async () => {
    for (const sent of [METRICS_TOKEN, 'm', `${METRICS_TOKEN}-and-a-much-longer-tail-than-the-real-one`]) {
      timingSafeEqual.mockClear();
      const res = await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${sent}` } });
      await res.arrayBuffer();
      expect(res.status).toBe(sent === METRICS_TOKEN ? 200 : 401);
      const calls = timingSafeEqual.mock.calls;
      expect(calls).toHaveLength(1);
      const [given, expected] = calls[0]! as [Uint8Array, Uint8Array];
      expect(Buffer.from(given)).toEqual(crypto.createHash('sha256').update(sent).digest());
      expect(Buffer.from(expected)).toEqual(crypto.createHash('sha256').update(METRICS_TOKEN).digest());
    }
  });
});
