import {
  bearer,
  type FakeStripe,
  form,
  signupTokenFromLog,
  smallJpeg,
  startFakeStripe,
  startTestServer,
  type TestServer,
} from '@compresso/server/testing';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, screenshotBoth, unexpected, watchedContext } from './harness.ts';

const SECRET_KEY = 'sk_test_browserFake0123456789';
const WEBHOOK_SECRET = 'whsec_browserFakeSigning0123456789';

describe('in Chromium: Subscribe to Pro → the (fake) Stripe Checkout → a working key → cancel in the portal', () => {
  let browser: Browser;
  let server: TestServer;
  let fake: FakeStripe;

  beforeAll(async () => {
    browser = await launchChromium();
    fake = await startFakeStripe({ secretKey: SECRET_KEY, webhookSecret: WEBHOOK_SECRET });
    server = await startTestServer({
      dbPath: ':memory:',
      overrides: {
        stripeSecretKey: SECRET_KEY,
        stripeWebhookSecret: WEBHOOK_SECRET,
        stripePricePro: 'price_BrowserPro',
      },
      // The fake serves the checkout and portal pages Stripe hosts, so the page's CSP names its origin.
      billing: { api: fake.api, redirectOrigins: [fake.url] },
    });
    fake.webhookUrl = `${server.url}/webhooks/stripe`;
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await fake?.close();
  });

  it('walks the whole path', async () => {
    const { context, problems } = await watchedContext(browser);
    const page = await context.newPage();

    await page.goto(`${server.url}/signup`);
    await page.getByLabel('Email').fill('subscriber@example.com');
    await page.getByLabel('Password').fill('a long enough passphrase');
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.getByRole('heading', { name: 'Check your email' }).waitFor();
    await page.goto(`${server.url}/signup/${signupTokenFromLog(server.rawLog)}`);
    await page.getByRole('button', { name: 'Create my account' }).click();
    await page.waitForURL(/\/account/);
    expect(await page.locator('#plan-name').textContent()).toBe('Free');
    expect(await page.locator('#subscription-state').textContent()).toBe('No subscription.');
    await screenshotBoth(page, 'billing-free');

    // Leave the checkout once: nothing is charged, the cancel page says so.
    await page.getByRole('button', { name: 'Subscribe to Pro' }).click();
    await page.waitForURL((url) => url.href.startsWith(`${fake.url}/c/pay/`));
    await page.getByRole('link', { name: 'Back' }).click();
    await page.waitForURL(/\/account\/billing\/cancel$/);
    await page.getByRole('heading', { name: 'No payment made' }).waitFor();
    expect(await page.locator('#plan-name').textContent()).toBe('Free');

    await page.goto(`${server.url}/account`);
    await page.getByRole('button', { name: 'Subscribe to Pro' }).click();
    await page.waitForURL((url) => url.href.startsWith(`${fake.url}/c/pay/`));
    await page.getByRole('button', { name: 'Pay and subscribe' }).click();
    await page.waitForURL(/\/account\/billing\/success\?session_id=cs_test_/);
    // The fake, like Stripe, sent its events before sending the buyer back: Pro already.
    expect(await page.locator('#plan-name').textContent()).toBe('Pro');
    await page.getByRole('link', { name: 'Go to your account' }).click();
    await page.waitForURL(/\/account$/);
    expect(await page.locator('#subscription-state').textContent()).toMatch(
      /^Active: renews on \d{4}-\d{2}-\d{2}\.$/,
    );
    expect(await page.locator('#plan-source').textContent()).toBe('Pro through your subscription.');
    expect(await page.getByRole('button', { name: 'Subscribe to Pro' }).count()).toBe(0);

    await page.getByRole('textbox', { name: 'Key name', exact: true }).fill('paid laptop');
    await page.getByRole('button', { name: 'Generate API Key' }).click();
    const key = await page.locator('#new-key-secret').inputValue();
    expect(key).toMatch(/^cmp_live_/);
    await screenshotBoth(page, 'billing-pro-key');

    const compressed = await fetch(`${server.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(key),
      body: form(await smallJpeg(), { output_format: 'webp' }),
    });
    expect(compressed.status).toBe(200);
    expect(compressed.headers.get('content-type')).toBe('image/webp');

    // Manage billing → the portal → cancel: Pro stays until the end of the paid period.
    await page.goto(`${server.url}/account`);
    await page.getByRole('button', { name: 'Manage billing' }).click();
    await page.waitForURL((url) => url.href.startsWith(`${fake.url}/p/session/`));
    await page.getByRole('button', { name: 'Cancel plan' }).click();
    await page.waitForURL(/\/account$/);
    // The webhook answers before it handles the event; once handled, the page shows it.
    await server.billing?.settled();
    await page.reload();
    expect(await page.locator('#subscription-state').textContent()).toMatch(
      /^Cancelled: Pro until \d{4}-\d{2}-\d{2}, then the free plan\.$/,
    );
    expect(await page.locator('#plan-name').textContent()).toBe('Pro');
    await screenshotBoth(page, 'billing-cancelled');
    const usage = await fetch(`${server.url}/api/v1/usage`, { headers: bearer(key) });
    expect(await usage.json()).toMatchObject({ plan: 'pro' });

    // No CSP violation (a blocked redirect to the checkout would be one), no script error.
    expect(unexpected(problems)).toEqual([]);
    await context.close();
  });
});
