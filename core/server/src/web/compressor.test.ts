import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createEngine } from '@compresso/engine';
import { createAccount, createLogger, loadConfig, quotaDay, sqliteDatabase } from '@compresso/runtime';
import express from 'express';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorHandler } from '../errors.ts';
import { form, proAccount, smallJpeg, startTestServer, type TestServer } from '../test-helpers.ts';
import { createUploadBudget } from '../upload-budget.ts';
import { compressorRouter, visitorKey, visitorNetwork } from './compressor.ts';

/** What the page sends: the CSRF header (its value is only checked against a session's token). */
const SAME_ORIGIN = { 'x-csrf-token': 'same-origin', 'sec-fetch-site': 'same-origin' };

type ErrorBody = { error: { code: string; message: string; details?: unknown } };

/** POST a form from a chosen loopback address (127.0.0.0/8 all reach the server on Linux). */
async function postFrom(
  url: string,
  body: FormData,
  headers: Record<string, string>,
  localAddress: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  const encoded = new Response(body);
  const bytes = Buffer.from(await encoded.arrayBuffer());
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        localAddress,
        headers: {
          ...headers,
          'content-type': encoded.headers.get('content-type')!,
          'content-length': String(bytes.length),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
      },
    );
    req.on('error', reject);
    req.end(bytes);
  });
}

describe('visitorNetwork', () => {
  it('counts IPv4 by address and IPv6 by its /64', () => {
    expect(visitorNetwork('203.0.113.7')).toBe('203.0.113.7');
    expect(visitorNetwork('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(visitorNetwork('2001:db8:1:2:aaaa:bbbb:cccc:dddd')).toBe('2001:db8:1:2::/64');
    expect(visitorNetwork('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(visitorNetwork('2001:0db8:0001:0002::ffff%eth0')).toBe('2001:db8:1:2::/64');
    expect(visitorNetwork('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(visitorNetwork('::1')).toBe('0:0:0:0::/64');
    expect(visitorKey('2001:db8:1:2::1')).toBe(visitorKey('2001:db8:1:2:ffff::9'));
    expect(visitorKey('2001:db8:1:2::1')).not.toBe(visitorKey('2001:db8:1:3::1'));
    expect(visitorKey('203.0.113.7')).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe('POST /web/compress for visitors', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ dbPath: ':memory:', overrides: { visitorDailyLimit: 2 } });
  });
  afterAll(async () => {
    await server.close();
  });

  it('compresses through the engine, counts per network, and refuses past the allowance with the reset time', async () => {
    const jpeg = await smallJpeg();
    const send = (from: string) =>
      postFrom(`${server.url}/web/compress`, form(jpeg, { output_format: 'webp' }), SAME_ORIGIN, from);

    const first = await send('127.0.0.2');
    expect(first.status).toBe(200);
    expect(first.headers['content-type']).toBe('image/webp');
    expect(first.headers['x-allowance']).toBe('visitor');
    expect(first.headers['ratelimit-limit']).toBe('2');
    expect(first.headers['ratelimit-remaining']).toBe('1');
    expect(Number(first.headers['x-output-size'])).toBe(first.body.length);
    expect((await sharp(first.body).metadata()).format).toBe('webp');

    expect((await send('127.0.0.2')).headers['ratelimit-remaining']).toBe('0');
    const refused = await send('127.0.0.2');
    expect(refused.status).toBe(429);
    const error = JSON.parse(refused.body.toString()).error;
    expect(error.code).toBe('QUOTA_EXCEEDED');
    expect(error.message).toMatch(
      /free allowance of 2 images a day is used up; it resets at 00:00 UTC \(\d{4}-\d\d-\d\dT00:00:00\.000Z\)/,
    );
    expect(error.details).toMatchObject({ limit: 2, used: 2 });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(await server.db.visitorUsageOn(visitorKey('127.0.0.2'), quotaDay())).toBe(2);

    // Another network has its own allowance.
    const other = await send('127.0.0.3');
    expect(other.status).toBe(200);
    expect(other.headers['ratelimit-remaining']).toBe('1');
  });

  it('counts a refused image (a bad option) like the API does, and answers the refusal in the one error shape', async () => {
    const bad = await postFrom(
      `${server.url}/web/compress`,
      form(await smallJpeg(), { quality: 'best' }),
      SAME_ORIGIN,
      '127.0.0.4',
    );
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body.toString()).error).toMatchObject({ code: 'INVALID_OPTION' });
    expect(bad.headers['ratelimit-remaining']).toBe('1');
  });

  it('answers other methods with 405 and serves the page, its script and the zip library', async () => {
    const get = await fetch(`${server.url}/web/compress`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(((await get.json()) as ErrorBody).error.code).toBe('METHOD_NOT_ALLOWED');

    const page = await fetch(`${server.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toMatch(/script-src 'self';/);
    expect(page.headers.get('content-security-policy')).not.toMatch(/unsafe-inline/);
    const html = await page.text();
    expect(html).toContain('<input type="file" id="file-input"');
    expect(html).toContain('Free allowance: 2 of 2 images left today');

    const script = await fetch(`${server.url}/static/compressor.js`);
    expect(script.headers.get('content-type')).toMatch(/javascript/);
    expect(await script.text()).toContain("from '/static/vendor/fflate.js'");
    const fflate = await fetch(`${server.url}/static/vendor/fflate.js`);
    expect(fflate.headers.get('content-type')).toMatch(/javascript/);
    expect(await fflate.text()).toMatch(/export function zipSync\(/);
  });
});

describe('POST /web/compress refuses cross-site requests', () => {
  it('without the CSRF header, from another site or another origin: 403 FORBIDDEN naming the header, nothing counted', async () => {
    const server = await startTestServer({ dbPath: ':memory:' });
    try {
      const jpeg = await smallJpeg();
      const attempts: Record<string, string>[] = [
        {},
        { 'sec-fetch-site': 'same-origin' },
        { 'x-csrf-token': 'same-origin', 'sec-fetch-site': 'cross-site' },
        { 'x-csrf-token': 'same-origin', origin: 'https://evil.example' },
        { 'x-csrf-token': 'same-origin', origin: 'null' },
      ];
      for (const headers of attempts) {
        const res = await fetch(`${server.url}/web/compress`, { method: 'POST', headers, body: form(jpeg) });
        expect(res.status, JSON.stringify(headers)).toBe(403);
        const { error } = (await res.json()) as ErrorBody;
        expect(error.code).toBe('FORBIDDEN');
        expect(error.message).toMatch(/^X-CSRF-Token: /);
      }
      expect(await server.db.visitorUsageOn(visitorKey('127.0.0.1'), quotaDay())).toBe(0);
      // The page's own request: same origin, header present.
      const ok = await fetch(`${server.url}/web/compress`, {
        method: 'POST',
        headers: { ...SAME_ORIGIN, origin: server.url },
        body: form(jpeg),
      });
      expect(ok.status).toBe(200);
      const page = await (await fetch(`${server.url}/`)).text();
      expect(page).toContain('<meta name="csrf-token" content="same-origin">');
    } finally {
      await server.close();
    }
  });
});

describe('POST /web/compress with the allowance turned off', () => {
  it('answers 403 PLAN_REQUIRED and says what would work', async () => {
    const server = await startTestServer({ dbPath: ':memory:', overrides: { visitorDailyLimit: 0 } });
    try {
      const res = await fetch(`${server.url}/web/compress`, {
        method: 'POST',
        headers: SAME_ORIGIN,
        body: form(await smallJpeg()),
      });
      expect(res.status).toBe(403);
      const { error } = (await res.json()) as ErrorBody;
      expect(error.code).toBe('PLAN_REQUIRED');
      expect(error.message).toMatch(/Pro plan/);
    } finally {
      await server.close();
    }
  });
});

describe('POST /web/compress with a signed-in session', () => {
  /**
   * The session layer is not part of this router: it only reads `res.locals.session`
   * ({ account, csrfToken }). This stands in for that middleware, in front of the real router, engine
   * and database, so the router's use of it is tested on its own.
   */
  async function signedIn(email: string, pro: boolean) {
    const db = sqliteDatabase({ path: ':memory:' });
    await db.migrate();
    const accountId = pro ? (await proAccount(db, email)).accountId : (await createAccount(db, email)).id;
    const config = loadConfig({}, { logLevel: 'silent', proDailyLimit: 2, visitorDailyLimit: 5 });
    const logger = createLogger(config);
    const engine = createEngine({ concurrency: 1 });
    const app = express();
    app.use(async (_req, res, next) => {
      res.locals.session = { account: await db.findAccountById(accountId), csrfToken: 'session-token-123' };
      next();
    });
    app.use(
      compressorRouter({
        engine,
        db,
        logger,
        config,
        uploadLimits: {
          maxBytes: config.maxUploadBytes,
          idleTimeoutMs: config.idleTimeoutMs,
          budget: createUploadBudget(config.uploadMemoryBytes),
        },
      }),
    );
    app.use(errorHandler(logger));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const post = (token: string) =>
      smallJpeg().then((jpeg) =>
        fetch(`${url}/web/compress`, {
          method: 'POST',
          headers: { 'x-csrf-token': token, 'sec-fetch-site': 'same-origin' },
          body: form(jpeg, { output_format: 'webp' }),
        }),
      );
    return {
      db,
      url,
      accountId,
      post,
      async close() {
        await new Promise((resolve) => server.close(resolve));
        await engine.close();
        await db.close();
      },
    };
  }

  it("a Pro account draws on its API quota (the meter the API reports); the token must be the session's", async () => {
    const app = await signedIn('pro@example.com', true);
    try {
      const wrong = await app.post('same-origin');
      expect(wrong.status).toBe(403);
      expect(((await wrong.json()) as ErrorBody).error.message).toMatch(
        /does not match this session's token/,
      );
      expect(await app.db.usageOn(app.accountId, quotaDay())).toBe(0);

      const first = await app.post('session-token-123');
      expect(first.status).toBe(200);
      expect(first.headers.get('x-allowance')).toBe('account');
      expect(first.headers.get('ratelimit-limit')).toBe('2');
      expect(await app.db.usageOn(app.accountId, quotaDay())).toBe(1);
      expect((await app.post('session-token-123')).status).toBe(200);
      const over = await app.post('session-token-123');
      expect(over.status).toBe(429);
      expect(((await over.json()) as ErrorBody).error.message).toMatch(
        /daily quota of 2 requests \(shared with your API keys\) is used up; it resets at 00:00 UTC/,
      );
      expect(await app.db.visitorUsageOn(visitorKey('127.0.0.1'), quotaDay())).toBe(0);
      const page = await (await fetch(`${app.url}/`)).text();
      expect(page).toContain('Pro plan: 0 of 2 requests left today');
      expect(page).toContain('<meta name="csrf-token" content="session-token-123">');
    } finally {
      await app.close();
    }
  });

  it('a signed-in free account counts like a visitor, not against an account quota', async () => {
    const app = await signedIn('free@example.com', false);
    try {
      const res = await app.post('session-token-123');
      expect(res.status).toBe(200);
      expect(res.headers.get('x-allowance')).toBe('visitor');
      expect(res.headers.get('ratelimit-limit')).toBe('5');
      expect(await app.db.usageOn(app.accountId, quotaDay())).toBe(0);
      expect(await app.db.visitorUsageOn(visitorKey('127.0.0.1'), quotaDay())).toBe(1);
    } finally {
      await app.close();
    }
  });
});
