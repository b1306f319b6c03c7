import { readFileSync } from 'node:fs';
import { applyPromo, createPromoCode } from '@compresso/runtime';
import {
  type FakeProvider,
  fakeOpenAi,
  signupTokenFromLog,
  startTestServer,
  type TestServer,
} from '@compresso/server/testing';
import type { Browser } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { corpusFile, launchChromium, unexpected, watchedContext } from './harness.ts';

describe('the Pro panel of the compressor page in Chromium', () => {
  let browser: Browser;
  let server: TestServer;

  beforeAll(async () => {
    browser = await launchChromium();
    server = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 20 * 1024 * 1024 } });
    await createPromoCode(server.db, { code: 'PANEL-WEB', plan: 'pro', uses: 1 });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('edits an image by instruction: shows it, the operations and the words not understood, and downloads it', async () => {
    const { context, problems } = await watchedContext(browser);
    const page = await context.newPage();
    await page.goto(`${server.url}/signup`);
    await page.getByLabel('Email').fill('panel.user@example.com');
    await page.getByLabel('Password').fill('a long enough passphrase');
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.getByRole('heading', { name: 'Check your email' }).waitFor();
    await page.goto(`${server.url}/signup/${signupTokenFromLog(server.rawLog)}`);
    await page.getByRole('button', { name: 'Create my account' }).click();
    await page.waitForURL(/\/account/);

    // A free account's page has no panel.
    await page.goto(`${server.url}/`);
    await page.waitForSelector('html.compressor-ready');
    expect(await page.locator('#ai-panel').count()).toBe(0);

    await applyPromo(server.db, 'panel.user@example.com', 'PANEL-WEB');
    await page.goto(`${server.url}/`);
    await page.waitForSelector('html.ai-panel-ready');
    // No AI provider on this server: a note, not a form that would always fail.
    await expect.poll(() => page.locator('#generate-note').textContent()).toContain('not set up');
    expect(await page.locator('#generate-form').count()).toBe(0);

    const photo = corpusFile('photo-mate-LadyBird.jpg');
    await page.getByLabel('Image', { exact: true }).setInputFiles(photo);
    await page.getByLabel('Instruction').fill('make it 200 wide, black and white, groovy, convert to webp');
    await page.getByRole('button', { name: 'Edit', exact: true }).click();
    await page.locator('#ai-result').waitFor({ state: 'visible' });
    expect(await page.locator('#ai-operations').textContent()).toBe(
      'Applied: resize (width 200); grayscale; format (format webp)',
    );
    expect(await page.locator('#ai-unrecognized').textContent()).toBe('Not understood: groovy');
    await page.waitForFunction(
      () => (document.getElementById('ai-image') as HTMLImageElement).naturalWidth === 200,
    );

    const [file] = await Promise.all([page.waitForEvent('download'), page.locator('#ai-download').click()]);
    expect(file.suggestedFilename()).toBe('photo-mate-LadyBird.webp');
    const meta = await sharp(readFileSync(await file.path())).metadata();
    expect([meta.format, meta.width]).toEqual(['webp', 200]);
    expect(unexpected(problems)).toEqual([]);
  });
});

describe('the Pro panel with an AI provider (a loopback fake of the OpenAI API) in Chromium', () => {
  let browser: Browser;
  let server: TestServer;
  let fake: FakeProvider;

  beforeAll(async () => {
    browser = await launchChromium();
    fake = await fakeOpenAi({ apiKey: 'sk-browser-panel' });
    server = await startTestServer({
      dbPath: ':memory:',
      overrides: { openaiApiKey: 'sk-browser-panel', openaiBaseUrl: fake.url, aiTimeoutMs: 10_000 },
    });
    await createPromoCode(server.db, { code: 'PANEL-GEN', plan: 'pro', uses: 1 });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await fake?.close();
  });

  it('generates an image from a prompt in the format chosen', async () => {
    const { context, problems } = await watchedContext(browser);
    const page = await context.newPage();
    await page.goto(`${server.url}/signup`);
    await page.getByLabel('Email').fill('maker@example.com');
    await page.getByLabel('Password').fill('a long enough passphrase');
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.getByRole('heading', { name: 'Check your email' }).waitFor();
    await page.goto(`${server.url}/signup/${signupTokenFromLog(server.rawLog)}`);
    await page.getByRole('button', { name: 'Create my account' }).click();
    await page.waitForURL(/\/account/);
    await applyPromo(server.db, 'maker@example.com', 'PANEL-GEN');

    await page.goto(`${server.url}/`);
    await page.waitForSelector('html.ai-panel-ready');
    expect(await page.locator('#generate-note').count()).toBe(0);
    await page.getByLabel('Prompt').fill('a lighthouse at dusk');
    await page.getByLabel('Model').selectOption('photo');
    await page.locator('#gen-format').selectOption('webp');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await page.locator('#ai-result').waitFor({ state: 'visible' });
    expect(await page.locator('#ai-facts').textContent()).toMatch(/^\d+×\d+ webp, \d+ bytes$/);
    await page.waitForFunction(
      () => (document.getElementById('ai-image') as HTMLImageElement).naturalWidth > 0,
    );
    expect(fake.requests).toHaveLength(1);
    // The model chosen in the form reached the provider (photo is gpt-image-1 by default).
    expect(fake.requests[0]?.json).toMatchObject({ prompt: 'a lighthouse at dusk', model: 'gpt-image-1' });
    const [file] = await Promise.all([page.waitForEvent('download'), page.locator('#ai-download').click()]);
    expect(file.suggestedFilename()).toBe('generated.webp');
    expect((await sharp(readFileSync(await file.path())).metadata()).format).toBe('webp');
    expect(unexpected(problems)).toEqual([]);
  });
});
