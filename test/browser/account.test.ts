import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createAccount, createPromoCode } from '@compresso/runtime';
import { signupTokenFromLog, startTestServer, type TestServer } from '@compresso/server/testing';
import type { Browser } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CORPUS,
  corpusFile,
  dropFiles,
  launchChromium,
  screenshotBoth,
  unexpected,
  watchedContext,
} from './harness.ts';

const run = promisify(execFile);

/** The real curl binary, as a user would run it from the account page's example. */
async function curlCompress(
  url: string,
  key: string,
  out: string,
): Promise<{ status: number; body: Buffer }> {
  const { stdout } = await run('curl', [
    '-sS',
    '-o',
    out,
    '-w',
    '%{http_code}',
    '-H',
    `Authorization: Bearer ${key}`,
    '-F',
    `file=@${join(CORPUS, 'photo-mate-Dune.jpg')}`,
    '-F',
    'output_format=webp',
    '-F',
    'max_dimension=1024',
    `${url}/api/v1/compress`,
  ]);
  return { status: Number(stdout), body: readFileSync(out) };
}

describe('a new user in Chromium: sign up, Pro by promo code, a key used with curl, revoked', () => {
  let browser: Browser;
  let server: TestServer;
  let dir: string;

  beforeAll(async () => {
    browser = await launchChromium();
    server = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 20 * 1024 * 1024 } });
    // The operator's part: a promo code, made beforehand with the runtime's operator function.
    await createPromoCode(server.db, { code: 'LAUNCH-WEB', plan: 'pro', uses: 1 });
    dir = mkdtempSync(join(tmpdir(), 'compresso-browser-'));
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('walks the whole path', async () => {
    const { context, problems } = await watchedContext(browser);
    const page = await context.newPage();

    await page.goto(`${server.url}/login`);
    await screenshotBoth(page, 'login');
    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.waitForURL(/\/signup$/);
    await screenshotBoth(page, 'signup');

    await page.getByLabel('Email').fill('new.user@example.com');
    await page.getByLabel('Password').fill('a long enough passphrase');
    await page.getByRole('button', { name: 'Sign up' }).click();
    // The sign-up answers the same for every address and mails a link (here: the server log).
    await page.getByRole('heading', { name: 'Check your email' }).waitFor();
    await page.goto(`${server.url}/signup/${signupTokenFromLog(server.rawLog)}`);
    await page.getByRole('button', { name: 'Create my account' }).click();
    await page.waitForURL(/\/account/);
    expect(await page.locator('#plan-name').textContent()).toBe('Free');

    // The session cookie is HTTP-only: scripts on the page cannot read it.
    expect(await page.evaluate(() => document.cookie)).not.toContain('cmp_session');
    const session = (await context.cookies()).find((c) => c.name === 'cmp_session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax' });

    await page.getByRole('textbox', { name: 'Promo code', exact: true }).fill('LAUNCH-WEB');
    await page.getByRole('button', { name: 'Activate' }).click();
    await page.waitForURL(/notice=pro/);
    expect(await page.locator('#plan-name').textContent()).toBe('Pro');
    expect(await page.locator('#usage-used').textContent()).toBe('0');

    await page.getByRole('textbox', { name: 'Key name', exact: true }).fill('laptop');
    await page.getByRole('button', { name: 'Generate API Key' }).click();
    const secretField = page.locator('#new-key-secret');
    await secretField.waitFor();
    const key = await secretField.inputValue();
    expect(key).toMatch(/^cmp_live_[A-Za-z0-9_-]{43}$/);
    await screenshotBoth(page, 'account-key-shown');

    // Shown once: the account page opened again lists the key by its prefix, never the secret.
    await page.goto(`${server.url}/account`);
    const html = await page.content();
    expect(html).not.toContain(key);
    expect(await page.locator('.keys-table').textContent()).toContain(key.slice(0, 17));
    await screenshotBoth(page, 'account');

    // The API reference is a page of the site: signed in, its navigation offers Log out, not Sign up.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API reference' }).click();
    await page.waitForURL(/\/api\/v1\/docs$/);
    const nav = page.getByRole('navigation', { name: 'Main' });
    expect(await nav.getByRole('button', { name: 'Log out' }).count()).toBe(1);
    expect(await nav.getByRole('link', { name: 'Sign up' }).count()).toBe(0);
    await page.goto(`${server.url}/account`);

    const first = await curlCompress(server.url, key, join(dir, 'dune.webp'));
    expect(first.status).toBe(200);
    const meta = await sharp(first.body).metadata();
    expect(meta.format).toBe('webp');
    expect(meta.width).toBe(1024);
    expect(first.body.length).toBeLessThan(readFileSync(join(CORPUS, 'photo-mate-Dune.jpg')).length);

    await page.reload();
    expect(await page.locator('#usage-used').textContent()).toBe('1');
    expect(await page.locator('#usage-meter').getAttribute('value')).toBe('1');

    // The compressor, signed in on Pro, draws on the same quota: the meter moves again.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Compressor' }).click();
    await page.waitForSelector('html.compressor-ready');
    expect(await page.locator('#allowance').textContent()).toMatch(
      /^Pro plan: 499 of 500 requests left today/,
    );
    await dropFiles(page, '#dropzone', [corpusFile('photo-heic-rocket.heic')]);
    await page.waitForSelector('.result.is-done', { timeout: 60_000 });
    await page.goto(`${server.url}/account`);
    expect(await page.locator('#usage-used').textContent()).toBe('2');

    // Revoke, through the confirmation step.
    await page.getByRole('link', { name: 'Revoke key laptop' }).click();
    await page.waitForURL(/\/revoke$/);
    expect(await page.locator('h1').textContent()).toMatch(/Revoke the key “laptop”\?/);
    await screenshotBoth(page, 'revoke-confirm');
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.waitForURL(/notice=revoked/);
    expect(await page.locator('#no-keys').count()).toBe(1);

    const after = await curlCompress(server.url, key, join(dir, 'refused.json'));
    expect(after.status).toBe(401);
    expect(JSON.parse(after.body.toString()).error.code).toBe('INVALID_API_KEY');

    expect(unexpected(problems)).toEqual([]);
    await context.close();
  });
  it('resets a forgotten password by the one-time link in the server log, then logs out and back in', async () => {
    await createAccount(server.db, 'forgetful@example.com');
    const { context, problems } = await watchedContext(browser);
    const page = await context.newPage();

    await page.goto(`${server.url}/login`);
    await page.getByRole('link', { name: /Forgot your password/ }).click();
    await page.waitForURL(/\/reset$/);
    await screenshotBoth(page, 'reset-request');
    await page.getByLabel('Email').fill('forgetful@example.com');
    await page.getByRole('button', { name: 'Send reset link' }).click();
    await page.locator('.notice[role=status]').waitFor();
    expect(await page.locator('.notice').textContent()).toContain('a reset link is on its way');
    await screenshotBoth(page, 'reset-sent');

    // No SMTP_URL in the embedded default: the operator reads the link from the server log.
    const line = server.logLines.findLast((l) => String(l.msg).startsWith('password reset link'));
    const link = /https?:\/\/\S+\/reset\/[A-Za-z0-9_-]{43}/.exec(String(line?.msg))?.[0];
    expect(link).toBeDefined();
    await page.goto(String(link));
    await screenshotBoth(page, 'reset-new-password');
    await page.getByLabel('New password').fill('a freshly chosen passphrase');
    await page.getByRole('button', { name: 'Set password and log in' }).click();
    await page.waitForURL(/\/account\?notice=password/);
    expect(await page.locator('#plan-name').textContent()).toBe('Free');

    // The link works once: opened again, it says so before asking for a password.
    await page.goto(String(link));
    expect(await page.locator('h1').textContent()).toBe('This reset link does not work');
    expect(await page.getByLabel('New password').count()).toBe(0);

    await page.goto(`${server.url}/account`);
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL((url) => !url.pathname.startsWith('/account'));
    await page.goto(`${server.url}/account`);
    await page.waitForURL(/\/login/);

    await page.getByLabel('Email').fill('forgetful@example.com');
    await page.getByLabel('Password').fill('a freshly chosen passphrase');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(/\/account/);
    expect(await page.locator('#plan-name').textContent()).toBe('Free');

    // The reset page's 400 for the used link is the one expected non-2xx answer.
    expect(unexpected(problems, [400])).toEqual([]);
    await context.close();
  });
});
