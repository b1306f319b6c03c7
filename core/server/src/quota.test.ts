import { join } from 'node:path';
import { createEngine, type Engine } from '@compresso/engine';
import { quotaDay } from '@compresso/runtime';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { bearer, form, proAccount, smallJpeg, startTestServer, tempDir } from './testing.ts';

const tmp = tempDir();
afterAll(() => tmp.cleanup());

/**
 * The quota's clock, fixed: a run that crosses 00:00 UTC between two requests would otherwise see the
 * count start again (and a `quotaDay()` read after the requests name another day).
 */
const NOON = new Date('2026-11-22T12:00:00.000Z');
const fixed = () => NOON;

describe('daily quota', () => {
  it('600 parallel requests on a fresh Pro account: exactly 500 answered, 100 refused with 429', async () => {
    const srv = await startTestServer({ dbPath: join(tmp.dir, 'quota.sqlite'), now: fixed });
    try {
      const { key, keyId } = await proAccount(srv.db, 'burst@example.com');
      // GET /usage is the cheapest authenticated request; it counts exactly like a compression.
      const answers = await Promise.all(
        Array.from({ length: 600 }, () =>
          fetch(`${srv.url}/api/v1/usage`, { headers: bearer(key) }).then(async (res) => ({
            status: res.status,
            headers: res.headers,
            body: (await res.json()) as { used?: number; error?: { code: string } },
          })),
        ),
      );
      const ok = answers.filter((a) => a.status === 200);
      const refused = answers.filter((a) => a.status === 429);
      expect(ok).toHaveLength(500);
      expect(refused).toHaveLength(100);
      // Each of the 500 saw a different count: no two requests were given the same slot.
      expect(new Set(ok.map((a) => a.body.used)).size).toBe(500);
      for (const a of refused) {
        expect(a.body.error?.code).toBe('QUOTA_EXCEEDED');
        const retry = Number(a.headers.get('retry-after'));
        expect(retry).toBeGreaterThan(0);
        expect(retry).toBeLessThanOrEqual(86_400);
        expect(a.headers.get('x-should-retry')).toBe('false');
        expect(a.headers.get('ratelimit-remaining')).toBe('0');
      }
      for (const a of answers) {
        expect(a.headers.get('ratelimit-limit')).toBe('500');
        expect(a.headers.get('ratelimit-reset')).toMatch(/^\d+$/);
      }
      expect(await srv.db.usageOn((await srv.db.findApiKey(keyId))!.accountId, quotaDay(NOON))).toBe(500);

      // Over the quota, a key can still be revoked (a leaked key must not lock its owner out of revoking it).
      const spare = await fetch(`${srv.url}/api/v1/key`, { method: 'POST', headers: bearer(key) });
      expect(spare.status).toBe(429);
      const revoke = await fetch(`${srv.url}/api/v1/keys/${keyId}`, {
        method: 'DELETE',
        headers: bearer(key),
      });
      expect(revoke.status).toBe(200);
    } finally {
      await srv.close();
    }
  });

  it('all keys of one account share the quota', async () => {
    const srv = await startTestServer({
      dbPath: join(tmp.dir, 'shared.sqlite'),
      overrides: { proDailyLimit: 3 },
      now: fixed,
    });
    try {
      const first = await proAccount(srv.db, 'shared@example.com');
      const made = (await (
        await fetch(`${srv.url}/api/v1/key`, { method: 'POST', headers: bearer(first.key) })
      ).json()) as {
        key: string;
      };
      expect((await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(made.key) })).status).toBe(200);
      expect((await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(first.key) })).status).toBe(200);
      expect((await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(made.key) })).status).toBe(429);
    } finally {
      await srv.close();
    }
  });
});

describe('the quota day', () => {
  it('turns at 00:00 UTC: a used-up quota is whole again, and yesterday keeps its count', async () => {
    let now = new Date('2026-11-22T23:59:59.000Z');
    const srv = await startTestServer({
      dbPath: join(tmp.dir, 'midnight.sqlite'),
      overrides: { proDailyLimit: 2 },
      now: () => now,
    });
    try {
      const { key, accountId } = await proAccount(srv.db, 'midnight@example.com');
      const usage = () => fetch(`${srv.url}/api/v1/usage`, { headers: bearer(key) });
      for (const used of [1, 2]) {
        const res = await usage();
        expect(await res.json()).toMatchObject({ used, day: '2026-11-22', resets_in_seconds: 1 });
      }
      const refused = await usage();
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.headers.get('ratelimit-reset')).toBe('1');
      expect(((await refused.json()) as { error: { details: unknown } }).error.details).toMatchObject({
        resets_at: '2026-11-23T00:00:00.000Z',
      });

      // Half a second before midnight it is still the same day, and at least 1 s to wait.
      now = new Date('2026-11-22T23:59:59.500Z');
      expect((await usage()).headers.get('retry-after')).toBe('1');

      now = new Date('2026-11-23T00:00:00.000Z');
      const fresh = await usage();
      expect(fresh.status).toBe(200);
      expect(await fresh.json()).toMatchObject({
        used: 1,
        remaining: 1,
        day: '2026-11-23',
        resets_at: '2026-11-24T00:00:00.000Z',
        resets_in_seconds: 86_400,
      });
      expect(await srv.db.usageOn(accountId, '2026-11-22')).toBe(2);
      expect(await srv.db.usageOn(accountId, '2026-11-23')).toBe(1);
    } finally {
      await srv.close();
    }
  });
});

describe('restart', () => {
  it('accounts, keys and today’s usage survive closing and reopening the SQLite file', async () => {
    const path = join(tmp.dir, 'restart.sqlite');
    const first = await startTestServer({ dbPath: path, now: fixed });
    const dave = await proAccount(first.db, 'dave@example.com');
    for (let i = 0; i < 3; i++) {
      expect((await fetch(`${first.url}/api/v1/usage`, { headers: bearer(dave.key) })).status).toBe(200);
    }
    await first.close();

    const second = await startTestServer({ dbPath: path, now: fixed });
    try {
      const res = await fetch(`${second.url}/api/v1/usage`, { headers: bearer(dave.key) });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ used: 4, remaining: 496, plan: 'pro' });
      const keys = (await (
        await fetch(`${second.url}/api/v1/keys`, { headers: bearer(dave.key) })
      ).json()) as {
        keys: { id: string }[];
      };
      expect(keys.keys.map((k) => k.id)).toEqual([dave.keyId]);
    } finally {
      await second.close();
    }
  });
});

describe('our own failures', () => {
  it('a bug answers 500 INTERNAL_ERROR with a generic message, logs the cause, and gives the request back', async () => {
    const real = createEngine({ concurrency: 1 });
    // A fault injected into the engine boundary: the server's handling of an unexpected throw is what is tested.
    const broken: Engine = {
      ...real,
      limits: real.limits,
      stats: () => real.stats(),
      inspect: (b) => real.inspect(b),
      optimize: async () => {
        throw new TypeError('internal detail: cannot read property of undefined');
      },
    };
    const srv = await startTestServer({ dbPath: join(tmp.dir, 'bug.sqlite'), engine: broken, now: fixed });
    try {
      const erin = await proAccount(srv.db, 'erin@example.com');
      const res = await fetch(`${srv.url}/api/v1/compress`, {
        method: 'POST',
        headers: bearer(erin.key),
        body: form(await smallJpeg()),
      });
      expect(res.status).toBe(500);
      const body = (await res.json()) as { error: { code: string; message: string; request_id: string } };
      expect(body.error.code).toBe('INTERNAL_ERROR');
      expect(body.error.message).not.toContain('internal detail');
      await vi.waitFor(() => expect(srv.logLines.some((l) => l.msg === 'unhandled error')).toBe(true), {
        timeout: 5000,
        interval: 10,
      });
      const logged = srv.logLines.find((l) => l.msg === 'unhandled error');
      expect(logged?.request_id).toBe(body.error.request_id);
      expect(JSON.stringify(logged)).toContain('internal detail');
      expect(await srv.db.usageOn(erin.accountId, quotaDay(NOON))).toBe(0);
      expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
    } finally {
      await srv.close();
    }
  });
});

describe('readiness', () => {
  it('/readyz answers 503 SERVICE_UNAVAILABLE when the database is gone, /healthz still 200', async () => {
    const srv = await startTestServer({ dbPath: join(tmp.dir, 'ready.sqlite'), now: fixed });
    try {
      await srv.db.close();
      const res = await fetch(`${srv.url}/readyz`);
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('SERVICE_UNAVAILABLE');
      expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
    } finally {
      await srv.close();
    }
  });
});
