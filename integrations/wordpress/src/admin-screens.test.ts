/// <reference lib="dom" />
// The settings screen in Chromium (Debian's chromium through playwright-core) on a real WordPress
// (Playground): screenshots at desktop and phone widths committed under screenshots/, keyboard use
// (Tab through every field to the save button, arrows in the delivery choice, Enter saves), no console
// or page errors.
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLUGIN_FILE, startWordPress, WORDPRESS_BUILD, type WordPress } from './testing/wordpress.ts';

const SCREENSHOTS = join(import.meta.dirname, '..', 'screenshots');
const SETTINGS = 'wp-admin/options-general.php?page=compresso';
const CHROMIUM = '/usr/bin/chromium';
// The builds package ships WordPress's static files (wp-admin/css, wp-includes/js, …) apart from the
// PHP zip the harness installs: the browser gets them from there.
const PUBLIC = join(
  dirname(createRequire(import.meta.url).resolve('@wp-playground/wordpress-builds/package.json')),
  'public',
  `wp-${WORDPRESS_BUILD}`,
);
const STATIC_TYPES: Record<string, string> = {
  js: 'text/javascript',
  css: 'text/css',
  png: 'image/png',
  gif: 'image/gif',
  svg: 'image/svg+xml',
  woff: 'font/woff',
  woff2: 'font/woff2',
  ttf: 'font/ttf',
};

let wp: WordPress;
let api: TestServer;

beforeAll(async () => {
  api = await startTestServer({ dbPath: ':memory:' });
  const key = (await proAccount(api.db, 'screens@example.com')).key;
  wp = await startWordPress();
  // The machine is offline: no WP-Cron (its update checks would hold a Playground worker), internet
  // requests refused at once, and no Gravatar images in the admin bar (secure.gravatar.com cannot be
  // reached by the browser; each failed image would be a console error that is not the plugin's).
  mkdirSync(wp.hostPath('/wordpress/wp-content/mu-plugins'), { recursive: true });
  writeFileSync(
    wp.hostPath('/wordpress/wp-content/mu-plugins/offline.php'),
    "<?php\ndefine( 'WP_HTTP_BLOCK_EXTERNAL', true );\ndefine( 'DISABLE_WP_CRON', true );\nadd_filter( 'pre_option_show_avatars', '__return_zero' );\n",
  );
  await wp.php(
    `require_once ABSPATH . 'wp-admin/includes/plugin.php';
    activate_plugin( '${PLUGIN_FILE}' );
    compresso_test_out( 1 );`,
    { asAdmin: true },
  );
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

  async function open(viewport: { width: number; height: number }): Promise<Page> {
    const { value } = await wp.php<Record<string, string>>(`
      $expires = time() + DAY_IN_SECONDS;
      compresso_test_out( array(
        AUTH_COOKIE => wp_generate_auth_cookie( 1, $expires, 'auth' ),
        LOGGED_IN_COOKIE => wp_generate_auth_cookie( 1, $expires, 'logged_in' ),
      ) );`);
    const context = await browser.newContext({ viewport });
    await context.addCookies(
      Object.entries(value).map(([name, cookie]) => ({
        name,
        value: encodeURIComponent(cookie),
        url: wp.url,
      })),
    );
    const page = await context.newPage();
    // wp-admin's styles and scripts are PHP requests (load-styles.php, load-scripts.php) on Playground,
    // seconds each on the shared machine.
    page.setDefaultTimeout(150_000);
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error')
        problems.push(`console error: ${message.text()} (${message.location().url})`);
    });
    // wp-admin's static files (scripts, styles, images of wp-includes/ and wp-admin/) are not in the
    // installed tree (see PUBLIC): Playground's server answers them slowly or not at all, so they are
    // served from disk, as a web server in front of PHP serves them. PHP pages go to WordPress.
    await page.route(`${wp.url}/**`, async (route) => {
      const path = new URL(route.request().url()).pathname.replace(/\/$/, '');
      const type = STATIC_TYPES[/\.(\w+)$/.exec(path)?.[1] ?? ''];
      const file = [
        join(PUBLIC, decodeURIComponent(path)),
        wp.hostPath(`/wordpress${decodeURIComponent(path)}`),
      ].find((candidate) => existsSync(candidate) && statSync(candidate).isFile());
      if (type && /^\/wp-(?:includes|admin)\//.test(path) && file)
        await route.fulfill({ path: file, contentType: type });
      else await route.continue();
    });
    // Requests still open when a load times out are named in the error.
    const pending = new Set<string>();
    page.on('request', (request) => pending.add(request.url()));
    page.on('requestfinished', (request) => pending.delete(request.url()));
    page.on('requestfailed', (request) => pending.delete(request.url()));
    try {
      await page.goto(`${wp.url}/${SETTINGS}`, { waitUntil: 'domcontentloaded' });
      await page.locator('#submit').waitFor();
      await page.waitForLoadState('load');
    } catch (error) {
      throw new Error(`${(error as Error).message}\nstill loading: ${[...pending].join(' ')}`);
    }
    return page;
  }

  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`Chromium is not installed at ${CHROMIUM}: apt-get install -y chromium (.ci/run does)`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking'],
    });
    mkdirSync(SCREENSHOTS, { recursive: true });
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
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
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
