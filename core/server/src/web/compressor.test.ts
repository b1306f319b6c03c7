import { request } from 'node:http';
import { applyPromo, createPromoCode, quotaDay } from '@compresso/runtime';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { form, signupTokenFromLog, smallJpeg, startTestServer, type TestServer } from '../testing.ts';
import { visitorKey, visitorNetwork } from './compressor.ts';
import { Browser } from './test-browser.ts';

type ErrorBody = { error: { code: string; message: string; details?: unknown } };

/** The cookie part ("name=value") of each Set-Cookie of an answer. */
function cookiesOf(res: Response): string {
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
}

/**
 * What the page gives a browser: its CSRF token (the meta tag) and the cookie it is bound to, as the
 * headers of an upload from that page.
 */
async function pageCredentials(url: string, cookie = ''): Promise<Record<string, string>> {
  const res = await fetch(`${url}/`, { headers: cookie ? { cookie } : {} });
  const html = await res.text();
  const token = /<meta name="csrf-token" content="([^"]+)">/.exec(html)?.[1];
  if (!token) throw new Error('the compressor page carries no CSRF token');
  const cookies = [cookie, cookiesOf(res)].filter(Boolean).join('; ');
  // The page's script asks for images or JSON, so even a refusal comes back in the API's error shape.
  return {
    'x-csrf-token': token,
    cookie: cookies,
    'sec-fetch-site': 'same-origin',
    accept: 'image/*, application/json',
  };
}

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
  // The app's clock, so a run that crosses 00:00 UTC counts on the day the test reads.
  let clock = new Date('2026-11-22T12:00:00.000Z');
  beforeAll(async () => {
    server = await startTestServer({
      dbPath: ':memory:',
      overrides: { visitorDailyLimit: 2 },
      now: () => clock,
    });
  });
  afterAll(async () => {
    await server.close();
  });

  it('compresses through the engine, counts per network, and refuses past the allowance with the reset time', async () => {
    const jpeg = await smallJpeg();
    const credentials = await pageCredentials(server.url);
    const send = (from: string) =>
      postFrom(`${server.url}/web/compress`, form(jpeg, { output_format: 'webp' }), credentials, from);

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
    expect(refused.headers['retry-after']).toBe('43200');
    expect(error.details).toMatchObject({ resets_at: '2026-11-23T00:00:00.000Z' });
    expect(await server.db.visitorUsageOn(visitorKey('127.0.0.2'), quotaDay(clock))).toBe(2);

    // Another network has its own allowance.
    const other = await send('127.0.0.3');
    expect(other.status).toBe(200);
    expect(other.headers['ratelimit-remaining']).toBe('1');
  });

  it('turns at 00:00 UTC on the app clock: a used-up allowance is whole again', async () => {
    const jpeg = await smallJpeg();
    const credentials = await pageCredentials(server.url);
    const send = () => postFrom(`${server.url}/web/compress`, form(jpeg), credentials, '127.0.0.9');
    clock = new Date('2026-11-22T23:59:59.000Z');
    try {
      expect((await send()).status).toBe(200);
      expect((await send()).status).toBe(200);
      const refused = await send();
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBe('1');

      clock = new Date('2026-11-23T00:00:00.000Z');
      const fresh = await send();
      expect(fresh.status).toBe(200);
      expect(fresh.headers['ratelimit-remaining']).toBe('1');
      expect(await server.db.visitorUsageOn(visitorKey('127.0.0.9'), '2026-11-23')).toBe(1);
    } finally {
      clock = new Date('2026-11-22T12:00:00.000Z');
    }
  });

  it('counts a refused image (a bad option) like the API does, and answers the refusal in the one error shape', async () => {
    const bad = await postFrom(
      `${server.url}/web/compress`,
      form(await smallJpeg(), { quality: 'best' }),
      await pageCredentials(server.url),
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
  it('without the CSRF token, with a token for another cookie, from another site or origin: 403 FORBIDDEN, nothing counted', async () => {
    // A stopped clock: the day counted and the day read are the same even across 00:00 UTC.
    const at = new Date();
    const server = await startTestServer({ dbPath: ':memory:', now: () => at });
    try {
      const jpeg = await smallJpeg();
      const mine = await pageCredentials(server.url);
      const theirs = await pageCredentials(server.url);
      const attempts: Record<string, string>[] = [
        { accept: 'application/json' },
        { cookie: mine.cookie!, accept: 'application/json' },
        { ...mine, 'x-csrf-token': theirs['x-csrf-token']! },
        { ...mine, 'sec-fetch-site': 'cross-site' },
        { ...mine, origin: 'https://evil.example' },
        { ...mine, origin: 'null' },
      ];
      for (const headers of attempts) {
        const res = await fetch(`${server.url}/web/compress`, { method: 'POST', headers, body: form(jpeg) });
        expect(res.status, JSON.stringify(headers)).toBe(403);
        const { error } = (await res.json()) as ErrorBody;
        expect(error.code).toBe('FORBIDDEN');
        expect(error.message).toMatch(/CSRF|another (site|origin)/);
      }
      expect(await server.db.visitorUsageOn(visitorKey('127.0.0.1'), quotaDay(at))).toBe(0);
      // The page's own request: same origin, its token and cookie.
      const ok = await fetch(`${server.url}/web/compress`, {
        method: 'POST',
        headers: { ...mine, origin: server.url },
        body: form(jpeg),
      });
      expect(ok.status).toBe(200);
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
        headers: await pageCredentials(server.url),
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

describe('POST /web/compress signed in', () => {
  let server: TestServer;
  // A stopped clock (today's date, so cookies are not born expired): the day the quota counts and
  // the day the test reads stay the same even when the run crosses 00:00 UTC.
  const at = new Date();
  beforeAll(async () => {
    server = await startTestServer({
      dbPath: ':memory:',
      overrides: { proDailyLimit: 2, visitorDailyLimit: 5 },
      now: () => at,
    });
  });
  afterAll(async () => {
    await server.close();
  });

  /** Sign up through the real form and its (logged) link; the session cookie that comes back. */
  async function signUp(email: string): Promise<string> {
    const browser = new Browser(server.url);
    const res = await browser.submit('/signup', '/signup', {
      email,
      password: 'correct horse battery staple',
    });
    expect(res.status).toBe(200);
    const token = signupTokenFromLog(server.rawLog);
    const done = await browser.submit(`/signup/${token}`, `/signup/${token}`, {});
    expect(done.status).toBe(303);
    const session = browser.cookies.get('cmp_session');
    if (!session) throw new Error('sign-up set no session cookie');
    return `cmp_session=${session}`;
  }

  const upload = (credentials: Record<string, string>) =>
    smallJpeg().then((jpeg) =>
      fetch(`${server.url}/web/compress`, {
        method: 'POST',
        headers: credentials,
        body: form(jpeg, { output_format: 'webp' }),
      }),
    );

  it("a Pro account draws on its API quota (the account page's meter), with its session's token only", async () => {
    const cookie = await signUp('pro@example.com');
    await createPromoCode(server.db, { code: 'WEB-PRO', plan: 'pro', uses: 1 });
    await applyPromo(server.db, 'pro@example.com', 'WEB-PRO');
    const account = (await server.db.findAccountByEmail('pro@example.com'))!;
    const credentials = await pageCredentials(server.url, cookie);

    // A signed-out page's token does not work for the session.
    const anonymous = await pageCredentials(server.url);
    const wrong = await upload({ ...credentials, 'x-csrf-token': anonymous['x-csrf-token']! });
    expect(wrong.status).toBe(403);
    expect(await server.db.usageOn(account.id, quotaDay(at))).toBe(0);

    const first = await upload(credentials);
    expect(first.status).toBe(200);
    expect(first.headers.get('x-allowance')).toBe('account');
    expect(first.headers.get('ratelimit-limit')).toBe('2');
    expect(await server.db.usageOn(account.id, quotaDay(at))).toBe(1);
    expect((await upload(credentials)).status).toBe(200);
    const over = await upload(credentials);
    expect(over.status).toBe(429);
    expect(((await over.json()) as ErrorBody).error.message).toMatch(
      /daily quota of 2 requests \(shared with your API keys\) is used up; it resets at 00:00 UTC/,
    );
    expect(await server.db.visitorUsageOn(visitorKey('127.0.0.1'), quotaDay(at))).toBe(0);
    const page = await (await fetch(`${server.url}/`, { headers: { cookie } })).text();
    expect(page).toContain('Pro plan: 0 of 2 requests left today');
    const accountPage = await (await fetch(`${server.url}/account`, { headers: { cookie } })).text();
    expect(accountPage).toMatch(
      /<strong id="usage-used">2<\/strong> used of <strong id="usage-limit">2<\/strong>/,
    );
  });

  it('a signed-in free account counts like a visitor, not against an account quota', async () => {
    const cookie = await signUp('free@example.com');
    const account = (await server.db.findAccountByEmail('free@example.com'))!;
    const res = await upload(await pageCredentials(server.url, cookie));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-allowance')).toBe('visitor');
    expect(res.headers.get('ratelimit-limit')).toBe('5');
    expect(await server.db.usageOn(account.id, quotaDay(at))).toBe(0);
    expect(await server.db.visitorUsageOn(visitorKey('127.0.0.1'), quotaDay(at))).toBe(1);
  });
});
