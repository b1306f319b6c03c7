import type { AddressInfo } from 'node:net';
import { createAccount } from '@compresso/runtime';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signupTokenFromLog, startTestServer, type TestServer } from '../testing.ts';
import { hashPassword } from './passwords.ts';
import { Browser } from './test-browser.ts';

/**
 * Sign-up that does not tell who has an account: the form always answers "check your email"; the
 * mailbox's owner gets either a link that finishes the sign-up or a note that the address already has
 * an account. Nothing is stored before the link is used.
 */

const PASSWORD = 'correct horse battery';

interface Mail {
  to: string[];
  body: string;
}

describe('sign-up by mailed link', () => {
  const mails: Mail[] = [];
  let smtp: SMTPServer;
  let server: TestServer;
  let now = new Date('2026-04-01T09:00:00.000Z');

  beforeAll(async () => {
    smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      onData(stream, session, done) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          mails.push({
            to: session.envelope.rcptTo.map((r) => r.address),
            body: Buffer.concat(chunks)
              .toString('utf8')
              .replace(/=\r?\n/g, ''),
          });
          done();
        });
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
    const { port } = smtp.server.address() as AddressInfo;
    server = await startTestServer({
      dbPath: ':memory:',
      now: () => now,
      overrides: { smtpUrl: `smtp://127.0.0.1:${port}`, publicUrl: 'http://img.example.test' },
    });
  });
  afterAll(async () => {
    await server.close();
    await new Promise<void>((resolve) => smtp.close(() => resolve()));
  });

  const mailTo = (address: string) => mails.filter((m) => m.to.includes(address)).at(-1);
  const linkIn = (mail: Mail | undefined) =>
    /http:\/\/img\.example\.test\/signup\/([A-Za-z0-9_-]+)/.exec(mail?.body ?? '')?.[1];

  it('answers a taken email exactly as a new one, and tells only the mailbox', async () => {
    const owner = await createAccount(server.db, 'taken@example.com');
    await server.db.setPasswordHash(owner.id, await hashPassword('the owner passphrase'), now.toISOString());
    const before = await server.db.findPasswordHash(owner.id);

    const signUp = async (email: string) => {
      const browser = new Browser(server.url);
      const res = await browser.submit('/signup', '/signup', { email, password: PASSWORD });
      return {
        status: res.status,
        body: (await res.text()).replaceAll(email, 'EMAIL'),
        cookies: browser.setCookieLines.map((l) => l.split('=')[0]).sort(),
      };
    };
    const taken = await signUp('taken@example.com');
    const fresh = await signUp('fresh@example.com');
    // Before: 409 "An account with this email already exists" for the taken one, a session for the new.
    expect(taken.status).toBe(200);
    expect(taken).toEqual(fresh);
    expect(taken.body).toContain('Check your email');

    // Nothing changed for the taken account, nothing exists yet for the new one.
    expect(await server.db.findPasswordHash(owner.id)).toBe(before);
    expect(await server.db.findAccountByEmail('fresh@example.com')).toBeUndefined();

    // The owner of the taken address is told, with the way in; no sign-up link.
    const note = mailTo('taken@example.com');
    expect(note?.body).toMatch(/Subject: You already have a Compresso account/);
    expect(note?.body).toContain('http://img.example.test/login');
    expect(note?.body).toContain('http://img.example.test/reset');
    expect(linkIn(note)).toBeUndefined();

    // The new address gets the link; the mailed link finishes the sign-up with the password chosen.
    const token = linkIn(mailTo('fresh@example.com')) ?? '';
    expect(token).not.toBe('');
    // The password hash travels sealed: neither it nor the password can be read from the mail.
    expect(mailTo('fresh@example.com')?.body).not.toContain('scrypt');
    const browser = new Browser(server.url);
    // Opening the link (a mail scanner does) makes nothing.
    expect((await browser.get(`/signup/${token}`)).status).toBe(200);
    expect(await server.db.findAccountByEmail('fresh@example.com')).toBeUndefined();
    const done = await browser.submit(`/signup/${token}`, `/signup/${token}`, {});
    expect(done.status).toBe(303);
    expect(done.headers.get('location')).toBe('/account?notice=welcome');
    expect((await browser.get('/account')).status).toBe(200);
    const login = new Browser(server.url);
    expect(
      (await login.submit('/login', '/login', { email: 'fresh@example.com', password: PASSWORD })).status,
    ).toBe(303);

    // Used once: the account exists, so the link now says so and changes nothing.
    const again = await new Browser(server.url).submit(`/signup/${token}`, `/signup/${token}`, {});
    expect(again.status).toBe(400);
    expect(await again.text()).toContain('The account it was for exists already');
    // Secrets never reach the log with mail set up.
    expect(server.rawLog.join('')).not.toContain(token);
    expect(server.rawLog.join('')).not.toContain(PASSWORD);
  });

  it('refuses a link after 30 minutes and a tampered one', async () => {
    const browser = new Browser(server.url);
    await browser.submit('/signup', '/signup', { email: 'late@example.com', password: PASSWORD });
    const token = linkIn(mailTo('late@example.com')) ?? '';
    expect(token).not.toBe('');
    const flipped = `${token.slice(0, 20)}${token[20] === 'A' ? 'B' : 'A'}${token.slice(21)}`;
    expect((await browser.get(`/signup/${flipped}`)).status).toBe(400);
    expect((await browser.submit(`/signup/${token}`, `/signup/${flipped}`, {})).status).toBe(400);
    now = new Date(now.getTime() + 30 * 60 * 1000);
    expect((await browser.get(`/signup/${token}`)).status).toBe(400);
    expect(await server.db.findAccountByEmail('late@example.com')).toBeUndefined();
  });
});

describe('sign-up without mail set up', () => {
  it('logs the link for the operator, and throttles a burst of sign-ups from one network at ten', async () => {
    const server = await startTestServer({ dbPath: ':memory:' });
    try {
      const browser = new Browser(server.url);
      const token = await browser.token('/signup');
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          browser
            .post('/signup', { _csrf: token, email: `burst${i}@example.com`, password: PASSWORD })
            .then((r) => r.status),
        ),
      );
      expect(results.filter((s) => s === 200)).toHaveLength(10);
      expect(results.filter((s) => s === 429)).toHaveLength(2);
      expect(signupTokenFromLog(server.rawLog)).toMatch(/^[A-Za-z0-9_-]+$/);
    } finally {
      await server.close();
    }
  });
});
