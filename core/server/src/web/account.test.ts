import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { createAccount, createApiKey, createPromoCode } from '@compresso/runtime';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  form,
  signupTokenFromLog,
  smallJpeg,
  startTestServer,
  type TestServer,
  tempDir,
} from '../testing.ts';
import { PROMO_REFUSED } from './account.ts';
import { Browser } from './test-browser.ts';

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

const PASSWORD = 'correct horse battery';

/** Sign up through the form, then finish through the link the server "mailed" (logged). */
async function signUp(server: TestServer, email: string): Promise<Browser> {
  const browser = new Browser(server.url);
  const res = await browser.submit('/signup', '/signup', { email, password: PASSWORD });
  expect(res.status).toBe(200);
  expect(await res.text()).toContain('Check your email');
  const token = signupTokenFromLog(server.rawLog);
  const done = await browser.submit(`/signup/${token}`, `/signup/${token}`, {});
  expect(done.status).toBe(303);
  expect(done.headers.get('location')).toBe('/account?notice=welcome');
  return browser;
}

function resetLinkFromLog(server: TestServer): string | undefined {
  const line = server.logLines.findLast((l) => String(l.msg).startsWith('password reset link'));
  return line ? /\/reset\/([A-Za-z0-9_-]{43})/.exec(String(line.msg))?.[1] : undefined;
}

describe('web account pages over real HTTP', () => {
  let server: TestServer;
  // A database file, so a second server process-alike can share it (the lock-out must hold across processes).
  const dir = tempDir();
  const dbPath = `${dir.dir}/compresso.sqlite`;
  beforeAll(async () => {
    server = await startTestServer({ dbPath, overrides: { proDailyLimit: 500 } });
    await createPromoCode(server.db, { code: 'LAUNCH-PRO', plan: 'pro', uses: 100 });
  });
  afterAll(async () => {
    await server.close();
    dir.cleanup();
  });

  it('walks sign-up → promo → key shown once → the key compresses → usage moves → revoke → 401', async () => {
    const browser = await signUp(server, 'walker@example.com');
    const sessionCookie = browser.setCookieLines.find((l) => l.startsWith('cmp_session='));
    expect(sessionCookie).toMatch(/HttpOnly/i);
    expect(sessionCookie).toMatch(/SameSite=Lax/i);
    expect(sessionCookie).toMatch(/Path=\//);
    const sessionId = browser.cookies.get('cmp_session') ?? '';
    expect(sessionId).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Stored hashed: the raw id finds nothing, its SHA-256 finds the session.
    const now = new Date().toISOString();
    expect(await server.db.findWebSession(sessionId, now)).toBeUndefined();
    expect((await server.db.findWebSession(sha256(sessionId), now))?.account.email).toBe(
      'walker@example.com',
    );
    const account = await server.db.findAccountByEmail('walker@example.com');
    const stored = await server.db.findPasswordHash(account?.id ?? '');
    expect(stored).toMatch(/^scrypt\$ln=15,r=8,p=1\$/);
    expect(stored).not.toContain(PASSWORD);

    let html = await (await browser.get('/account')).text();
    expect(html).toContain('<span id="plan-name">Free</span>');
    expect(html).toMatch(/<button type="submit" disabled>Generate API Key<\/button>/);

    // A wrong code is answered beside the field, in words that do not say why (see throttle.test.ts).
    let res = await browser.submit('/account', '/account/promo', { code: 'NOPE-NOPE' });
    expect(res.status).toBe(400);
    html = await res.text();
    expect(html).toMatch(/aria-invalid="true"/);
    expect(html).toContain(`<p class="field-error" id="field-code-error">${PROMO_REFUSED}</p>`);

    res = await browser.submit('/account', '/account/promo', { code: 'LAUNCH-PRO' });
    expect(res.status).toBe(303);
    html = await (await browser.get('/account?notice=pro')).text();
    expect(html).toContain('<span id="plan-name">Pro</span>');
    expect(html).toContain('<meter id="usage-meter" min="0" max="500"');
    expect(html).toMatch(
      /<strong id="usage-used">0<\/strong> used of <strong id="usage-limit">500<\/strong>/,
    );
    expect(html).toMatch(/Resets at 00:00 UTC/);

    res = await browser.submit('/account', '/account/keys', { name: 'laptop' });
    expect(res.status).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    html = await res.text();
    const secret = /id="new-key-secret" type="text" readonly value="([^"]+)"/.exec(html)?.[1] ?? '';
    expect(secret).toMatch(/^cmp_/);
    expect(html).toContain('<button type="button" id="copy-key" data-copy="new-key-secret">Copy</button>');
    // Shown once: the next look at the account lists the key by name and prefix, never the secret.
    html = await (await browser.get('/account')).text();
    expect(html).not.toContain(secret);
    expect(html).toContain('<td>laptop</td>');
    expect(html).toMatch(/<td>never<\/td>/);

    // The key works like any API key (curl -F file=@… -H "Authorization: Bearer …").
    const jpeg = await smallJpeg();
    const compressed = await fetch(`${server.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(secret),
      body: form(jpeg, { output_format: 'webp' }),
    });
    expect(compressed.status).toBe(200);
    expect(compressed.headers.get('content-type')).toBe('image/webp');
    expect((await compressed.arrayBuffer()).byteLength).toBeGreaterThan(0);

    html = await (await browser.get('/account')).text();
    expect(html).toMatch(/<strong id="usage-used">1<\/strong> used of/);
    expect(html).toMatch(/value="1"/);
    expect(html).not.toMatch(/<td>never<\/td>/);

    const keyId = /href="\/account\/keys\/([^/"]+)\/revoke"/.exec(html)?.[1] ?? '';
    // Revoke asks first: the link opens a confirmation with its own form.
    const confirm = await browser.get(`/account/keys/${keyId}/revoke`);
    expect(confirm.status).toBe(200);
    const confirmHtml = await confirm.text();
    expect(confirmHtml).toContain('Revoke the key “laptop”?');
    const token = /name="_csrf" value="([^"]+)"/.exec(confirmHtml)?.[1] ?? '';
    res = await browser.post(`/account/keys/${keyId}/revoke`, { _csrf: token });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/account?notice=revoked');
    const after = await fetch(`${server.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(secret),
      body: form(jpeg),
    });
    expect(after.status).toBe(401);
    expect(((await after.json()) as { error: { code: string } }).error.code).toBe('INVALID_API_KEY');
    expect(await (await browser.get('/account')).text()).toContain('id="no-keys"');

    // Neither the password nor the key ever reaches the log.
    const log = server.rawLog.join('');
    expect(log).not.toContain(PASSWORD);
    expect(log).not.toContain(secret);
    expect(log).not.toContain(sessionId);
  });

  it('logs out (the session row goes) and rotates the session id at log-in', async () => {
    const browser = await signUp(server, 'rotate@example.com');
    const first = browser.cookies.get('cmp_session') ?? '';
    let res = await browser.submit('/account', '/logout', {});
    expect(res.status).toBe(303);
    expect(browser.cookies.has('cmp_session')).toBe(false);
    expect(await server.db.findWebSession(sha256(first), new Date().toISOString())).toBeUndefined();
    // The old cookie is dead even if a copy survived.
    const stale = new Browser(server.url);
    stale.cookies.set('cmp_session', first);
    expect((await stale.get('/account')).status).toBe(303);

    // A session id planted before log-in is replaced at log-in.
    browser.cookies.set('cmp_session', first);
    res = await browser.submit('/login', '/login', { email: 'ROTATE@example.com', password: PASSWORD });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/account');
    const second = browser.cookies.get('cmp_session') ?? '';
    expect(second).not.toBe(first);
    expect((await browser.get('/account')).status).toBe(200);
  });

  it('refuses state-changing forms without the right CSRF token (403, nothing changes)', async () => {
    const browser = await signUp(server, 'csrf@example.com');
    const missing = await browser.post('/account/promo', { code: 'LAUNCH-PRO' });
    expect(missing.status).toBe(403);
    expect(await missing.text()).toContain('security token is missing or does not match');
    const wrong = await browser.post('/account/promo', { code: 'LAUNCH-PRO', _csrf: 'x'.repeat(43) });
    expect(wrong.status).toBe(403);
    const json = await browser.post('/account/promo', { code: 'LAUNCH-PRO' }, { accept: 'application/json' });
    expect(json.status).toBe(403);
    expect(await json.json()).toMatchObject({ error: { code: 'FORBIDDEN', details: { reason: 'csrf' } } });
    expect((await server.db.findAccountByEmail('csrf@example.com'))?.plan).toBe('free');

    // Another browser's token (another session) does not fit this session.
    const other = await signUp(server, 'csrf-other@example.com');
    const foreign = await other.token('/account');
    expect((await browser.post('/account/promo', { code: 'LAUNCH-PRO', _csrf: foreign })).status).toBe(403);

    // Signed-out forms too: a log-in or log-out posted from elsewhere is refused.
    const stranger = new Browser(server.url);
    expect((await stranger.post('/login', { email: 'csrf@example.com', password: PASSWORD })).status).toBe(
      403,
    );
    expect((await stranger.post('/signup', { email: 'new@example.com', password: PASSWORD })).status).toBe(
      403,
    );
    expect((await browser.post('/logout', {})).status).toBe(403);
    expect((await browser.get('/account')).status).toBe(200);
  });

  it("never revokes another account's key (404, the key keeps working)", async () => {
    const owner = await createAccount(server.db, 'owner@example.com');
    const { key } = await createApiKey(server.db, owner.id, 'theirs');
    const browser = await signUp(server, 'attacker@example.com');
    expect((await browser.get(`/account/keys/${key.id}/revoke`)).status).toBe(404);
    const res = await browser.submit('/account', `/account/keys/${key.id}/revoke`, {});
    expect(res.status).toBe(404);
    expect(await res.text()).toContain('This account has no active key with that id.');
    expect((await server.db.findApiKey(key.id))?.revokedAt).toBeNull();
  });

  it('refuses log-ins after five wrong passwords, in this server and another on the same database', async () => {
    const email = 'slow@example.com';
    const browser = await signUp(server, email);
    await browser.submit('/account', '/logout', {});
    // From the sign-up's own network the (email, network) pair backs off after five; other networks
    // meet the email's lock (throttle.test.ts has both sides).
    const statuses: number[] = [];
    const bodies: string[] = [];
    for (let i = 0; i < 5; i++) {
      const token = await browser.token('/login');
      const res = await browser.post('/login', { _csrf: token, email, password: `wrong password ${i}` });
      statuses.push(res.status);
      bodies.push(await res.text());
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    expect(bodies[0]).toContain('The email or the password is not right.');

    // Locked now, even with the right password; the answer says when to retry.
    const locked = await browser.submit('/login', '/login', { email, password: PASSWORD });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await locked.text()).toContain('Too many failed log-ins');
    // The count is in the database: another server on the same database refuses too.
    const second = await startTestServer({ dbPath });
    try {
      const elsewhere = new Browser(second.url);
      const res = await elsewhere.submit('/login', '/login', { email, password: PASSWORD });
      expect(res.status).toBe(429);
    } finally {
      await second.close();
    }

    // An unknown email gets the same words as a wrong password.
    const unknown = await browser.submit('/login', '/login', {
      email: 'nobody@example.com',
      password: PASSWORD,
    });
    expect(unknown.status).toBe(401);
    expect(await unknown.text()).toContain('The email or the password is not right.');
  });

  it('resets a password with a one-time link from the log, also for a CLI-made account without one', async () => {
    const account = await createAccount(server.db, 'cli-made@example.com');
    const browser = new Browser(server.url);
    let res = await browser.submit('/login', '/login', { email: account.email, password: PASSWORD });
    expect(res.status).toBe(401);

    res = await browser.submit('/reset', '/reset', { email: account.email });
    expect(res.status).toBe(200);
    const answer = await res.text();
    expect(answer).toContain('a reset link is on its way');
    const token = resetLinkFromLog(server) ?? '';
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Logged in exactly one line: the reset line.
    expect(server.rawLog.join('').split(token).length - 1).toBe(1);
    // An unknown email gets the same answer and no link.
    const linesBefore = server.logLines.length;
    res = await browser.submit('/reset', '/reset', { email: 'ghost@example.com' });
    expect(await res.text()).toContain('If ghost@example.com has an account, a reset link is on its way');
    expect(
      server.logLines.slice(linesBefore).some((l) => String(l.msg).startsWith('password reset link')),
    ).toBe(false);

    const page = await browser.get(`/reset/${token}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    const pageHtml = await page.text();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(pageHtml)?.[1] ?? '';
    // Too short: said beside the field, and the token is not used up.
    res = await browser.post(`/reset/${token}`, { _csrf: csrf, password: 'short' });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('Use at least 10 characters');
    res = await browser.post(`/reset/${token}`, { _csrf: csrf, password: 'a brand new passphrase' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/account?notice=password');
    expect((await browser.get('/account')).status).toBe(200);

    // Single use: the link's page says so at once, and a form posted to it anyway is refused.
    res = await browser.get(`/reset/${token}`);
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('This reset link does not work');
    res = await browser.submit('/reset', `/reset/${token}`, { password: 'another new passphrase' });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('This reset link does not work');

    const fresh = new Browser(server.url);
    res = await fresh.submit('/login', '/login', {
      email: account.email,
      password: 'a brand new passphrase',
    });
    expect(res.status).toBe(303);
  });

  it('refuses an expired reset token', async () => {
    const account = await createAccount(server.db, 'expired@example.com');
    const token = randomBytes(32).toString('base64url');
    const created = new Date(Date.now() - 31 * 60 * 1000);
    await server.db.insertResetToken(
      sha256(token),
      account.id,
      created.toISOString(),
      new Date(created.getTime() + 30 * 60 * 1000).toISOString(),
    );
    const browser = new Browser(server.url);
    expect((await browser.get(`/reset/${token}`)).status).toBe(400);
    const res = await browser.submit('/reset', `/reset/${token}`, {
      password: 'a brand new passphrase',
    });
    expect(res.status).toBe(400);
    expect(await server.db.findPasswordHash(account.id)).toBeUndefined();
  });

  it('serves pages with a strict CSP, labels on every input, and the copy script as a file', async () => {
    const browser = new Browser(server.url);
    for (const path of ['/signup', '/login', '/reset']) {
      const res = await browser.get(path);
      expect(res.status).toBe(200);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      const html = await res.text();
      expect(html).not.toMatch(/<script(?![^>]*\bsrc=)/);
      for (const [, id] of html.matchAll(/<input id="([^"]+)"/g))
        expect(html).toContain(`<label for="${id}">`);
    }
    const js = await browser.get('/static/account.js');
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/javascript/);
    expect((await browser.get('/account')).headers.get('location')).toBe('/login');
  });
});

describe('password reset mail through SMTP', () => {
  it('delivers the link over a real SMTP exchange and keeps it out of the log', async () => {
    const received: { to: string[]; body: string }[] = [];
    const smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      onData(stream, session, done) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          received.push({
            to: session.envelope.rcptTo.map((r) => r.address),
            body: Buffer.concat(chunks).toString('utf8'),
          });
          done();
        });
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
    const { port } = smtp.server.address() as AddressInfo;
    const server = await startTestServer({
      dbPath: ':memory:',
      overrides: { smtpUrl: `smtp://127.0.0.1:${port}`, publicUrl: 'https://img.example.test' },
    });
    try {
      await createAccount(server.db, 'mailme@example.com');
      const browser = new Browser(server.url);
      const res = await browser.submit('/reset', '/reset', { email: 'mailme@example.com' });
      expect(res.status).toBe(200);
      expect(received).toHaveLength(1);
      expect(received[0]?.to).toEqual(['mailme@example.com']);
      const body = (received[0]?.body ?? '').replace(/=\r?\n/g, '');
      expect(body).toMatch(/Subject: Reset your Compresso password/);
      const token = /https:\/\/img\.example\.test\/reset\/([A-Za-z0-9_-]{43})/.exec(body)?.[1] ?? '';
      expect(token).not.toBe('');
      expect(server.rawLog.join('')).not.toContain(token);
      expect(resetLinkFromLog(server)).toBeUndefined();
      // The mailed link works.
      const done = await browser.submit(`/reset/${token}`, `/reset/${token}`, {
        password: 'mailed passphrase 1',
      });
      expect(done.status).toBe(303);
      // Secure cookies with the __Host- prefix: the public address is https.
      expect(browser.setCookieLines.find((l) => l.startsWith('__Host-cmp_session='))).toMatch(/Secure/);
    } finally {
      await server.close();
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
    }
  });
});
