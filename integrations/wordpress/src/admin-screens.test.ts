/// <reference lib="dom" />
// The settings screen in Chromium (Debian's chromium through playwright-core) on a real WordPress
// (Playground): screenshots at desktop and phone widths committed under screenshots/, keyboard use
// (Tab through every field to the save button, arrows in the delivery choice, Enter saves), no console
// or page errors.
import { join } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, makeOffline, openAdmin, overflow, SCREENSHOTS } from './testing/admin-browser.ts';
import { activatePlugin, startWordPress, type WordPress } from './testing/wordpress.ts';

const SETTINGS = 'wp-admin/options-general.php?page=compresso';

let wp: WordPress;
let api: TestServer;

beforeAll(async () => {
  api = await startTestServer({ dbPath: ':memory:' });
  const key = (await proAccount(api.db, 'screens@example.com')).key;
  wp = await startWordPress();
  makeOffline(wp);
  await activatePlugin(wp);
  await wp.php(`update_option( 'compresso_settings', array_merge( compresso_get_settings(), array(
      'server_url' => '${api.url}', 'api_key' => compresso_encrypt_secret( '${key}' ), 'avif' => true ) ) );
    compresso_test_out( 1 );`);
}, 300_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
});

describe('the settings screen in Chromium', { timeout: 300_000 }, () => {
  let browser: Browser;
  const problems: string[] = [];

  function open(viewport: { width: number; height: number }): Promise<Page> {
    return openAdmin(wp, browser, { path: SETTINGS, viewport, ready: '#submit', problems });
  }

  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('shows the delivery choice, where the check will appear, and the nginx snippet', async () => {
    const page = await open({ width: 1280, height: 800 });
    await expect.poll(() => page.locator('h1').first().textContent()).toBe('Compresso');
    expect(await page.locator('input[name="compresso[delivery]"]').count()).toBe(3);
    expect(await page.locator('#compresso-delivery-picture').isChecked()).toBe(true);
    expect(await page.locator('#compresso-delivery-check').textContent()).toBe('What browsers receive');
    const snippet = await page.locator('#compresso-nginx-snippet').inputValue();
    expect(snippet).toContain('try_files $uri$compresso_suffix $uri$compresso_webp $uri =404;');
    expect(snippet).toContain('location ~* ^/wp-content/uploads/');
    await page.screenshot({ path: join(SCREENSHOTS, 'settings-desktop.png'), fullPage: true });
    await page.context().close();
  });

  it('fits a phone: nothing wider than the screen but the scrollable table', async () => {
    const page = await open({ width: 375, height: 812 });
    await page.locator('#compresso-server-url').waitFor();
    expect(await overflow(page)).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(SCREENSHOTS, 'settings-phone.png'), fullPage: true });
    await page.context().close();
  });

  it('works from the keyboard: Tab reaches every field in order and the save button, arrows pick the delivery, Enter saves', async () => {
    const page = await open({ width: 1280, height: 800 });
    await page.locator('#compresso-server-url').focus();
    const order: string[] = [];
    for (let i = 0; i < 60; i++) {
      order.push(await page.evaluate(() => document.activeElement?.id ?? ''));
      if (order.at(-1) === 'submit') break;
      if (order.at(-1) === 'compresso-delivery-picture') {
        // Arrow keys move within the radio group (and select), as in any form.
        await page.keyboard.press('ArrowDown');
        order.push(await page.evaluate(() => document.activeElement?.id ?? ''));
      }
      await page.keyboard.press('Tab');
    }
    const expected = [
      'compresso-server-url',
      'compresso-api-key',
      'compresso-quality',
      'compresso-max-dimension',
      'compresso-webp',
      'compresso-avif',
      'compresso-png-to-jpeg',
      'compresso-lazy-load',
      'compresso-backups',
      'compresso-delivery-picture',
      'compresso-delivery-rewrite',
      'compresso-picture-content',
      'compresso-picture-attachment',
      'submit',
    ];
    const positions = expected.map((id) => order.indexOf(id));
    expect(
      positions.every((p) => p >= 0),
      `focus went through: ${order.join(' → ')}`,
    ).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    // Focus is visible where it is (WordPress draws a box-shadow ring on focused controls).
    const ring = await page.evaluate(() => getComputedStyle(document.activeElement as Element).boxShadow);
    expect(ring).not.toBe('none');
    expect(await page.locator('#compresso-delivery-rewrite').isChecked()).toBe(true);
    await Promise.all([page.waitForURL(/page=compresso/), page.keyboard.press('Enter')]);
    await page.locator('.compresso-notice').first().waitFor();
    const notices = await page.locator('.compresso-notice').allTextContents();
    expect(notices.join('\n')).toMatch(/Connected\. Plan pro/);
    // Saved from the keyboard: rewrite chosen; no optimized image yet, so the check says what to do.
    expect(notices.join('\n')).toContain('no optimized image with a WebP/AVIF copy yet');
    expect(await page.locator('#compresso-delivery-rewrite').isChecked()).toBe(true);
    await page.screenshot({ path: join(SCREENSHOTS, 'settings-after-save-desktop.png'), fullPage: true });
    await page.context().close();
    expect(problems).toEqual([]);
  });
});
