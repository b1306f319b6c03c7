import { request } from 'node:http';
import { createAccount, createPromoCode, type Database } from '@compresso/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../testing.ts';
import { PROMO_REFUSED } from './account.ts';
import { hashPassword } from './passwords.ts';
import { Browser } from './test-browser.ts';

/**
 * The web pages' doors under attack, over real HTTP: bursts in parallel, attacks from one network
 * while the owner uses another, and clients behind a proxy. The clock is injected (`now`), so a
 * throttle's window is crossed by moving it, never by waiting.
 */

const PASSWORD = 'correct horse battery';

let servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

async function serve(options: Parameters<typeof startTestServer>[0]): Promise<TestServer> {
  const server = await startTestServer(options);
  servers.push(server);
  return server;
}

async function accountWithPassword(db: Database, email: string): Promise<void> {
  const account = await createAccount(db, email);
  await db.setPasswordHash(account.id, await hashPassword(PASSWORD), new Date().toISOString());
}

/** A form POST from a chosen loopback address (127.0.0.0/8 all reach the server on Linux). */
function postFrom(
  url: string,
  fields: Record<string, string>,
  cookie: string,
  localAddress: string,
  extra: Record<string, string> = {},
): Promise<{ status: number; body: string; location: string | undefined }> {
  const body = new URLSearchParams(fields).toString();
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        localAddress,
        headers: {
          accept: 'text/html',
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': String(Buffer.byteLength(body)),
          cookie,
          ...extra,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            location: res.headers.location,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A signed-out browser's log-in form: its cookie and token. */
async function loginForm(server: TestServer): Promise<{ cookie: string; token: string }> {
  const browser = new Browser(server.url);
  const token = await browser.token('/login');
  return { cookie: [...browser.cookies].map(([k, v]) => `${k}=${v}`).join('; '), token };
}

const statuses = (results: { status: number }[]) =>
  results.reduce<Record<number, number>>((counts, r) => {
    counts[r.status] = (counts[r.status] ?? 0) + 1;
    return counts;
  }, {});

describe('log-in throttling', () => {
  it('a parallel burst of 25 wrong passwords: five are checked, twenty refused, then the right one waits too', async () => {
    const server = await serve({ dbPath: ':memory:' });
    await accountWithPassword(server.db, 'burst@example.com');
    const { cookie, token } = await loginForm(server);
    const results = await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        postFrom(
          `${server.url}/login`,
          { _csrf: token, email: 'burst@example.com', password: `wrong guess ${i}` },
          cookie,
          '127.0.0.1',
        ),
      ),
    );
    // Counted before scrypt: the old check-then-record let all 25 through (25 × 401).
    expect(statuses(results)).toEqual({ 401: 5, 429: 20 });
    for (const r of results.filter((r) => r.status === 429))
      expect(r.body).toContain('Too many failed log-ins');
    const right = await postFrom(
      `${server.url}/login`,
      { _csrf: token, email: 'burst@example.com', password: PASSWORD },
      cookie,
      '127.0.0.1',
    );
    expect(right.status).toBe(429);
  });

  it('the owner signs in from their own network during an attack from another; a new network waits', async () => {
    let now = new Date('2026-03-01T10:00:00.000Z');
    const server = await serve({ dbPath: ':memory:', now: () => now });
    await accountWithPassword(server.db, 'owner@example.com');
    const { cookie, token } = await loginForm(server);
    const login = (password: string, from: string) =>
      postFrom(`${server.url}/login`, { _csrf: token, email: 'owner@example.com', password }, cookie, from);

    // The owner has signed in from home (127.0.0.2) before: that network is known to the account.
    expect((await login(PASSWORD, '127.0.0.2')).status).toBe(303);

    // An attacker on another network (127.0.0.66) bursts wrong passwords: refused after the fifth.
    const attack = await Promise.all(Array.from({ length: 25 }, (_, i) => login(`guess ${i}`, '127.0.0.66')));
    expect(statuses(attack)).toEqual({ 401: 5, 429: 20 });
    // Even with the right password, the attacker's network (and any new one) is locked out ...
    expect((await login(PASSWORD, '127.0.0.66')).status).toBe(429);
    expect((await login(PASSWORD, '127.0.0.77')).status).toBe(429);
    // ... but the owner at home is not.
    const home = await login(PASSWORD, '127.0.0.2');
    expect(home.status).toBe(303);
    expect(home.location).toBe('/account');

    // The owner's own network backs off rather than locks: after five typos, 30 s; then one more
    // try; then 60 s. The lock never depends on what others do.
    for (let i = 0; i < 5; i++) expect((await login(`typo ${i}`, '127.0.0.2')).status).toBe(401);
    expect((await login(PASSWORD, '127.0.0.2')).status).toBe(429);
    now = new Date(now.getTime() + 30_000);
    expect((await login(`typo again`, '127.0.0.2')).status).toBe(401);
    now = new Date(now.getTime() + 59_000);
    expect((await login(PASSWORD, '127.0.0.2')).status).toBe(429);
    now = new Date(now.getTime() + 1_000);
    expect((await login(PASSWORD, '127.0.0.2')).status).toBe(303);

    // The attacker's lock runs out with time, too: 30 s after the burst (moved well past here).
    now = new Date(now.getTime() + 60 * 60 * 1000 + 1);
    expect((await login(PASSWORD, '127.0.0.77')).status).toBe(303);
  });

  it('an unknown email is rationed exactly like a real one, with the same words', async () => {
    const server = await serve({ dbPath: ':memory:' });
    await accountWithPassword(server.db, 'real@example.com');
    const { cookie, token } = await loginForm(server);
    const run = (email: string, from: string) =>
      Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          postFrom(`${server.url}/login`, { _csrf: token, email, password: `nope ${i}` }, cookie, from),
        ),
      );
    const real = await run('real@example.com', '127.0.0.3');
    const ghost = await run('ghost@example.com', '127.0.0.4');
    expect(statuses(real)).toEqual({ 401: 5, 429: 3 });
    expect(statuses(ghost)).toEqual({ 401: 5, 429: 3 });
    const words = (r: { body: string }) => /<p class="alert"[^>]*>([^<]*)<\/p>/.exec(r.body)?.[1];
    expect(new Set(real.map(words))).toEqual(new Set(ghost.map(words)));
  });
});

describe('CSRF token bound to the session', () => {
  it('refuses a signed-out token on a signed-in session (the planted-cookie attack)', async () => {
    const server = await serve({ dbPath: ':memory:' });
    await accountWithPassword(server.db, 'victim@example.com');
    await createPromoCode(server.db, { code: 'ATTACKER-PLAN', plan: 'pro', uses: 10 });
    const victim = new Browser(server.url);
    expect(
      (await victim.submit('/login', '/login', { email: 'victim@example.com', password: PASSWORD })).status,
    ).toBe(303);
    // The attacker fetches a signed-out cookie/token pair for themselves ...
    const attacker = new Browser(server.url);
    const anonToken = await attacker.token('/login');
    const anonCookie = attacker.cookies.get('cmp_csrf') ?? '';
    expect(anonCookie).not.toBe('');
    // ... plants the cookie in the victim's browser and makes it post with the matching token.
    victim.cookies.set('cmp_csrf', anonCookie);
    const forged = await victim.post('/account/promo', { _csrf: anonToken, code: 'ATTACKER-PLAN' });
    expect(forged.status).toBe(403);
    expect((await server.db.findAccountByEmail('victim@example.com'))?.plan).toBe('free');
    // The session's own token still works.
    const own = await victim.submit('/account', '/account/promo', { code: 'ATTACKER-PLAN' });
    expect(own.status).toBe(303);
  });

  it('uses __Host- cookies over https (here: a trusted proxy saying X-Forwarded-Proto: https)', async () => {
    const server = await serve({ dbPath: ':memory:', overrides: { trustProxy: ['loopback'] } });
    await accountWithPassword(server.db, 'https@example.com');
    const browser = new Browser(server.url);
    const https = { 'x-forwarded-proto': 'https' };
    const page = await browser.get('/login', https);
    const token = /name="_csrf" value="([^"]+)"/.exec(await page.text())?.[1] ?? '';
    expect(browser.setCookieLines.find((l) => l.startsWith('__Host-cmp_csrf='))).toMatch(/; Secure/);
    const res = await browser.post(
      '/login',
      { _csrf: token, email: 'https@example.com', password: PASSWORD },
      https,
    );
    expect(res.status).toBe(303);
    const session = browser.setCookieLines.find((l) => l.startsWith('__Host-cmp_session=')) ?? '';
    expect(session).toMatch(/; Secure/);
    expect(session).toMatch(/; Path=\//);
    expect(session).not.toMatch(/Domain=/i);
    expect((await browser.get('/account', https)).status).toBe(200);
    // The plain-named cookie is not read on https: a planted cmp_session is worth nothing there.
    const planted = new Browser(server.url);
    planted.cookies.set('cmp_session', browser.cookies.get('__Host-cmp_session') ?? '');
    expect((await planted.get('/account', https)).status).toBe(303);
    // Without a trusted proxy the same header is a client's word: no Secure, no prefix.
    const direct = await serve({ dbPath: ':memory:' });
    const plain = new Browser(direct.url);
    await plain.get('/login', https);
    expect(plain.setCookieLines.find((l) => l.startsWith('cmp_csrf='))).not.toMatch(/Secure/);
  });
});

describe('promo codes', () => {
  it('answer one message for every code that does not work, and are throttled per account and per network', async () => {
    let now = new Date('2026-03-01T10:00:00.000Z');
    const server = await serve({ dbPath: ':memory:', now: () => now });
    const other = await createAccount(server.db, 'spent@example.com');
    await createPromoCode(server.db, { code: 'OLD-CODE', plan: 'pro', uses: 5, expiresAt: '2020-01-01' });
    await createPromoCode(server.db, { code: 'ONE-USE', plan: 'pro', uses: 1 });
    await createPromoCode(server.db, { code: 'GOOD-CODE', plan: 'pro', uses: 100 });
    await server.db.redeemPromo('ONE-USE', other.id, now.toISOString());
    const signIn = async (email: string) => {
      await accountWithPassword(server.db, email);
      const b = new Browser(server.url);
      expect((await b.submit('/login', '/login', { email, password: PASSWORD })).status).toBe(303);
      return b;
    };
    const guesser = await signIn('guesser@example.com');
    const error = (html: string) => /id="field-code-error">([^<]*)</.exec(html)?.[1];
    const answers: { status: number; message: string | undefined }[] = [];
    for (const code of ['NO-SUCH-CODE', 'OLD-CODE', 'ONE-USE', 'ANOTHER-GUESS', 'YET-ANOTHER']) {
      const res = await guesser.submit('/account', '/account/promo', { code });
      answers.push({ status: res.status, message: error(await res.text()) });
    }
    // Unknown, expired and used up: one status, one message (it named the code and the reason before).
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([400]));
    expect(new Set(answers.map((a) => a.message))).toEqual(new Set([PROMO_REFUSED]));
    // The sixth try within the hour is refused before the code is looked at, even a good code.
    const sixth = await guesser.submit('/account', '/account/promo', { code: 'GOOD-CODE' });
    expect(sixth.status).toBe(429);
    expect(await sixth.text()).toContain('Too many codes tried');
    expect((await server.db.findAccountByEmail('guesser@example.com'))?.plan).toBe('free');
    // Per network too: fresh accounts on the same network share 20 tries an hour.
    let refused = 0;
    for (let a = 0; a < 4; a++) {
      const b = await signIn(`helper${a}@example.com`);
      for (let i = 0; i < 5; i++) {
        const res = await b.submit('/account', '/account/promo', { code: `GUESS-${a}-${i}` });
        if (res.status === 429) refused++;
      }
    }
    // 5 from the guesser + 15 more reach the limit of 20; the last account's 5 are refused.
    expect(refused).toBe(5);
    // With time the account may try again, and a good code works.
    now = new Date(now.getTime() + 60 * 60 * 1000 + 1);
    const later = await guesser.submit('/account', '/account/promo', { code: 'GOOD-CODE' });
    expect(later.status).toBe(303);
  });
});

describe('TRUST_PROXY', () => {
  /** Five wrong passwords for one email from the address the server believes; then is the right one refused? */
  async function lockedAfterFive(
    server: TestServer,
    first: string,
    then: string,
    xff: (i: number) => string,
  ) {
    await accountWithPassword(server.db, `${first}-${then}@example.com`);
    const { cookie, token } = await loginForm(server);
    const email = `${first}-${then}@example.com`;
    // Known network first (a successful sign-in), so only the (email, network) pair's backoff applies.
    const home = await postFrom(
      `${server.url}/login`,
      { _csrf: token, email, password: PASSWORD },
      cookie,
      '127.0.0.1',
      {
        'x-forwarded-for': first,
      },
    );
    expect(home.status).toBe(303);
    for (let i = 0; i < 5; i++) {
      const res = await postFrom(
        `${server.url}/login`,
        { _csrf: token, email, password: `no ${i}` },
        cookie,
        '127.0.0.1',
        {
          'x-forwarded-for': xff(i),
        },
      );
      expect(res.status).toBe(401);
    }
    const next = await postFrom(
      `${server.url}/login`,
      { _csrf: token, email, password: PASSWORD },
      cookie,
      '127.0.0.1',
      {
        'x-forwarded-for': then,
      },
    );
    return next.status === 429;
  }

  it('with one trusted hop, the client is the address that hop wrote; what the client wrote before it is ignored', async () => {
    const server = await serve({ dbPath: ':memory:', overrides: { trustProxy: 1 } });
    // Each request spoofs a different first entry; the proxy's entry (the last) is the same client.
    expect(
      await lockedAfterFive(server, '198.51.100.7', '198.51.100.7', (i) => `10.9.9.${i}, 198.51.100.7`),
    ).toBe(true);
    // Another client behind the same proxy is another network: its own backoff, not the first one's.
    expect(await lockedAfterFive(server, '198.51.100.8', '198.51.100.9', () => '198.51.100.8')).toBe(false);
  });

  it('without TRUST_PROXY (the default) X-Forwarded-For is ignored: every spoofed address is the socket', async () => {
    const server = await serve({ dbPath: ':memory:' });
    // The "other client" claims another address, but the server counts the socket (127.0.0.1).
    expect(await lockedAfterFive(server, '198.51.100.8', '198.51.100.9', () => '198.51.100.8')).toBe(true);
  });

  it('an address list trusts only those proxies: a spoofed header from elsewhere is the sender itself', async () => {
    const server = await serve({ dbPath: ':memory:', overrides: { trustProxy: ['127.0.0.1'] } });
    await accountWithPassword(server.db, 'list@example.com');
    const { cookie, token } = await loginForm(server);
    const email = 'list@example.com';
    const attempt = (from: string, xff: string, password = 'wrong one') =>
      postFrom(`${server.url}/login`, { _csrf: token, email, password }, cookie, from, {
        'x-forwarded-for': xff,
      });
    // Through the trusted proxy (127.0.0.1), the owner at 198.51.100.20 signs in: a known network.
    expect((await attempt('127.0.0.1', '198.51.100.20', PASSWORD)).status).toBe(303);
    // An untrusted sender (127.0.0.5) claiming to be the owner's network is counted as itself:
    // its wrong passwords lock the email for unknown networks, including its own.
    for (let i = 0; i < 5; i++) expect((await attempt('127.0.0.5', '198.51.100.20')).status).toBe(401);
    expect((await attempt('127.0.0.5', '198.51.100.20', PASSWORD)).status).toBe(429);
    // The owner, through the trusted proxy, is still let in.
    expect((await attempt('127.0.0.1', '198.51.100.20', PASSWORD)).status).toBe(303);
  });
});
