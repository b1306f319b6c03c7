/// <reference lib="dom" />
/**
 * wp-admin screens in Chromium (Debian's chromium through playwright-core) on a booted WordPress: an
 * offline site, the browser, and pages opened as the administrator with their console and page errors
 * collected. Shared by the tests of the admin screens (admin-screens.test.ts, bulk-screen.test.ts).
 */
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Page } from 'playwright-core';
import { WORDPRESS_BUILD, type WordPress } from './wordpress.ts';

/**
 * Where the screenshots go: into the committed `screenshots/` only when asked
 * (`COMPRESSO_SCREENSHOTS=update`, to refresh the README's pictures), otherwise into a temporary
 * directory, so a test run leaves the working tree as it found it. They are taken either way.
 */
export const SCREENSHOTS =
  process.env.COMPRESSO_SCREENSHOTS === 'update'
    ? join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'screenshots')
    : join(tmpdir(), 'compresso-screenshots', 'wordpress');
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

/**
 * The machine is offline: no WP-Cron (its Site Health tests would hold a Playground worker), internet
 * requests refused at once (every test site, see startWordPress), and no Gravatar images in the admin bar (secure.gravatar.com cannot be
 * reached by the browser; each failed image would be a console error that is not the plugin's).
 * Requests to loopback (the Compresso server, the site itself) still go out.
 */
export function makeOffline(wp: WordPress): void {
  mkdirSync(wp.hostPath('/wordpress/wp-content/mu-plugins'), { recursive: true });
  writeFileSync(
    wp.hostPath('/wordpress/wp-content/mu-plugins/offline.php'),
    "<?php\ndefine( 'DISABLE_WP_CRON', true );\nadd_filter( 'pre_option_show_avatars', '__return_zero' );\n",
  );
}

/** Debian's Chromium, headless; a test that needs it fails (never skips) when it is not installed. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`Chromium is not installed at ${CHROMIUM}: apt-get install -y chromium (.ci/run does)`);
  mkdirSync(SCREENSHOTS, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking'],
  });
}

/**
 * Opens `path` (relative to the site, e.g. wp-admin/upload.php) as user 1 in a new browser context of
 * this viewport, and waits until `ready` is in the page and the page has loaded. Console errors and
 * page errors of every page opened go to `problems`. Close the page's context when done.
 */
export async function openAdmin(
  wp: WordPress,
  browser: Browser,
  options: { path: string; viewport: { width: number; height: number }; ready: string; problems: string[] },
): Promise<Page> {
  const { value } = await wp.php<Record<string, string>>(`
    $expires = time() + DAY_IN_SECONDS;
    compresso_test_out( array(
      AUTH_COOKIE => wp_generate_auth_cookie( 1, $expires, 'auth' ),
      LOGGED_IN_COOKIE => wp_generate_auth_cookie( 1, $expires, 'logged_in' ),
    ) );`);
  const context = await browser.newContext({ viewport: options.viewport });
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
  const { problems } = options;
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
    await page.goto(`${wp.url}/${options.path}`, { waitUntil: 'domcontentloaded' });
    await page.locator(options.ready).first().waitFor();
    await page.waitForLoadState('load');
  } catch (error) {
    throw new Error(`${(error as Error).message}\nstill loading: ${[...pending].join(' ')}`);
  }
  return page;
}

/** How many CSS pixels the page is wider than its viewport (0 or less: nothing sticks out). */
export function overflow(page: Page): Promise<number> {
  return page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
}
