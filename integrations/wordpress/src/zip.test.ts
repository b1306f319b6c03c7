// `npm run build` in this package: the bulk screen built by @wordpress/scripts into plugin/build/, and
// compresso.zip — what a site owner uploads under Plugins → Add New → Upload. The zip is checked file by
// file, then installed into a real WordPress by core's own Plugin_Upgrader (as the upload screen does),
// activated, and its Media → Compresso bulk screen loaded with the built script, then used in Chromium
// (Debian's, through playwright-core) against a real Compresso server.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { unzipSync } from 'fflate';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionFor } from './testing/browser.ts';
import { PLUGIN_DIR, PLUGIN_FILE, startWordPress, type WordPress } from './testing/wordpress.ts';

const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');
const ZIP = join(PACKAGE_DIR, 'compresso.zip');

let wp: WordPress;
let api: TestServer;
let entries: Record<string, Uint8Array>;
let buildMs = 0;
let mounted: string;

beforeAll(async () => {
  const started = performance.now();
  // As from a shell: vitest sets NODE_ENV=test, which would make wp-scripts build unminified.
  execFileSync('npm', ['run', 'build'], {
    cwd: PACKAGE_DIR,
    stdio: 'pipe',
    env: { ...process.env, NODE_ENV: 'production' },
  });
  buildMs = Math.round(performance.now() - started);
  process.stdout.write(`npm run build (wp-scripts + zip): ${buildMs} ms\n`);
  entries = unzipSync(new Uint8Array(readFileSync(ZIP)));
  mounted = mkdtempSync(join(tmpdir(), 'compresso-zip-'));
  execFileSync('cp', [ZIP, join(mounted, 'compresso.zip')]);
  wp = await startWordPress({
    plugin: false,
    assets: true,
    mounts: [{ hostPath: mounted, vfsPath: '/zips' }],
  });
}, 600_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
  if (mounted) rmSync(mounted, { recursive: true, force: true });
});

describe('compresso.zip', { timeout: 300_000 }, () => {
  it('holds the plugin under compresso/, the built screen included, nothing for developers', () => {
    const names = Object.keys(entries);
    for (const name of names) expect(name).toMatch(/^compresso\//);
    // Every PHP file of the plugin is there, byte for byte.
    const php = readdirSync(PLUGIN_DIR, { recursive: true, encoding: 'utf8' }).filter(
      (name) => name.endsWith('.php') && !/(^|\/)tests?\//.test(name),
    );
    expect(php.length).toBeGreaterThanOrEqual(10);
    for (const file of php) {
      expect(names, file).toContain(`compresso/${file}`);
      expect(
        Buffer.from(entries[`compresso/${file}`] ?? []).equals(readFileSync(join(PLUGIN_DIR, file))),
        file,
      ).toBe(true);
    }
    expect(names).toContain('compresso/build/bulk.js');
    // The production build: minified, no webpack bootstrap comments.
    expect(new TextDecoder().decode(entries['compresso/build/bulk.js'])).not.toContain('webpackBootstrap');
    const asset = new TextDecoder().decode(entries['compresso/build/bulk.asset.php']);
    expect(asset).toContain("'wp-api-fetch'");
    expect(asset).toContain("'wp-components'");
    expect(asset).toContain("'wp-element'");
    // No JSX runtime: WordPress only has that script from 6.6, the plugin supports 6.2+.
    expect(asset).not.toContain('react-jsx-runtime');
    for (const name of names) {
      expect(name).not.toMatch(/(^|\/)(tests?|node_modules|admin|src)\//);
      expect(name).not.toMatch(/(^|\/)\.|\.map$|\.ts$|phpunit|composer\.json/);
    }
    process.stdout.write(`compresso.zip: ${names.length} files, ${readFileSync(ZIP).length} bytes\n`);
  });

  it('installs through WordPress’s own upgrader, activates, and shows Media → Compresso bulk with its script', async () => {
    const { value } = await wp.php<{ installed: unknown; active: boolean; version: string; files: string[] }>(
      `require_once ABSPATH . 'wp-admin/includes/class-wp-upgrader.php';
      require_once ABSPATH . 'wp-admin/includes/plugin.php';
      require_once ABSPATH . 'wp-admin/includes/file.php';
      $upgrader = new Plugin_Upgrader( new Automatic_Upgrader_Skin() );
      $installed = $upgrader->install( '/zips/compresso.zip' );
      $activated = activate_plugin( '${PLUGIN_FILE}' );
      $data = get_plugin_data( WP_PLUGIN_DIR . '/${PLUGIN_FILE}', false, false );
      compresso_test_out( array(
        'installed' => is_wp_error( $installed ) ? $installed->get_error_message() : $installed,
        'active' => ! is_wp_error( $activated ) && is_plugin_active( '${PLUGIN_FILE}' ),
        'version' => $data['Version'],
        'files' => array_map( 'basename', glob( WP_PLUGIN_DIR . '/compresso/build/*' ) ),
      ) );`,
      { asAdmin: true },
    );
    expect(value).toEqual({
      installed: true,
      active: true,
      version: '0.1.0',
      files: ['bulk.asset.php', 'bulk.js'],
    });

    const admin = await sessionFor(wp, 'admin');
    const page = await admin.request('wp-admin/upload.php?page=compresso-bulk');
    expect(page.status, `redirected through ${page.redirects.join(' ')}`).toBe(200);
    expect(page.redirects.join(' ')).not.toContain('wp-login.php');
    const html = page.text;
    expect(html).toContain('<h1>Compresso bulk optimization</h1>');
    expect(html).toContain('id="compresso-bulk-root"');
    expect(html).toMatch(
      /<script[^>]+src="[^"]+\/wp-content\/plugins\/compresso\/build\/bulk\.js\?ver=[0-9a-f]+"/,
    );
    expect(html).toContain('window.compressoBulk = {"canManage":true,"connected":false');
    // api-fetch comes with the REST nonce WordPress gives it for the logged-in user.
    expect(html).toMatch(/createNonceMiddleware\( "[0-9a-f]{10}" \)/);
    expect(html).toMatch(/id=['"]wp-components-css['"]/);
    expect(html).not.toContain('missing its built screen');
    // The menu entry under Media.
    expect(html).toMatch(/href=['"](upload|admin)\.php\?page=compresso-bulk['"][^>]*>Compresso bulk</);
    // The built script itself is served.
    const script = await fetch(`${wp.url}/wp-content/plugins/compresso/build/bulk.js`);
    expect(script.status).toBe(200);
    expect(await script.text()).toContain('compresso-bulk-root');
  });

  it('the bulk screen in Chromium: cost and quota shown, a run started from the keyboard, no console error', async () => {
    api = await startTestServer();
    const { key } = await proAccount(api.db, 'zip@example.com');
    const { value: cookies } = await wp.php<Record<string, string>>(`
      update_option( 'compresso_settings', array_merge( compresso_get_settings(), array(
        'server_url' => '${api.url}', 'api_key' => compresso_encrypt_secret( '${key}' ), 'webp' => true,
      ) ) );
      // No Gravatar: the avatar in the admin bar would be a request to the internet.
      update_option( 'show_avatars', 0 );
      $expires = time() + DAY_IN_SECONDS;
      compresso_test_out( array(
        AUTH_COOKIE => wp_generate_auth_cookie( 1, $expires, 'auth' ),
        LOGGED_IN_COOKIE => wp_generate_auth_cookie( 1, $expires, 'logged_in' ),
      ) );`);
    if (!existsSync('/usr/bin/chromium'))
      throw new Error(
        'Chromium is not installed at /usr/bin/chromium (apt-get install -y chromium); this test does not skip.',
      );
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking'],
    });
    try {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      await context.addCookies(
        Object.entries(cookies).map(([name, value]) => ({
          name,
          value: encodeURIComponent(value),
          url: wp.url,
        })),
      );
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
      });
      // Nothing leaves the machine (avatars, fonts): only the site itself answers.
      await context.route(
        (url) => !url.href.startsWith(wp.url),
        (route) => route.abort(),
      );
      await page.goto(`${wp.url}/wp-admin/upload.php?page=compresso-bulk`, {
        timeout: 300_000,
        waitUntil: 'domcontentloaded',
      });
      const root = page.locator('#compresso-bulk-root');
      // WordPress 6.5 registers 6 sizes: 7 files, each compressed and made as WebP.
      await root.getByText('One upload costs up to 14 API requests').waitFor({ timeout: 180_000 });
      await root.getByText('Your library: 0 images').waitFor();
      await root.getByText(/Quota left today: \d+ of 500 requests\. It resets/).waitFor();
      await root.getByText('No bulk optimization has run yet.').waitFor();
      const start = root.getByRole('button', { name: 'Optimize the whole library' });
      await start.focus();
      await page.keyboard.press('Enter');
      await root.getByText('Finished.').waitFor({ timeout: 180_000 });
      await root.getByRole('button', { name: 'Start a new run' }).waitFor();
      const shots = join(PACKAGE_DIR, 'artifacts');
      mkdirSync(shots, { recursive: true });
      await page.screenshot({ path: join(shots, 'bulk-screen.png'), fullPage: true });
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
