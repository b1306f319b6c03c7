/// <reference lib="dom" />
// Media → Compresso bulk and the media library's Compresso column in Chromium (Debian's chromium
// through playwright-core), on a real WordPress (Playground) connected to a real Compresso server, with a
// small library made by sharp: the cost shown before a run; a run started, paused and resumed from the
// keyboard and followed to its end; the list view's column after it (saving, WebP/AVIF copies) and its
// row actions (restore, compress) from the keyboard; screenshots under screenshots/; no console or page
// errors. The screen's script is built by @wordpress/scripts into a temporary directory that Playground
// sees as the plugin's build/; plugin/build/ itself belongs to `npm run build` (zip.test.ts runs it,
// perhaps at the same time), and nothing here writes there.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, makeOffline, openAdmin, overflow, SCREENSHOTS } from './testing/admin-browser.ts';
import { rampJpeg } from './testing/images.ts';
import {
  backgroundDiagnostics,
  PLUGIN_DIR,
  PLUGIN_FILE,
  PLUGIN_SLUG,
  sideloadPhp,
  startWordPress,
  type WordPress,
} from './testing/wordpress.ts';

const PACKAGE_DIR = join(import.meta.dirname, '..');
const BULK = 'wp-admin/upload.php?page=compresso-bulk';
const LIBRARY = 'wp-admin/upload.php?mode=list';
/** Small enough to have no generated sizes: one file per image, three requests (JPEG, WebP, AVIF). */
const IMAGES = 6;
const FORMATS = ['webp', 'avif'];
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 375, height: 812 };

let wp: WordPress;
let api: TestServer;
let browser: Browser;
let dir: string;
let pluginRoot: string;
let buildDir: string;
let ids: number[] = [];
const originals = new Map<number, { path: string; hash: string; size: number }>();
const problems: string[] = [];
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const compressions = () =>
  api.logLines.filter((l) => l.path === '/api/v1/compress' && l.status === 200).length;

/**
 * Holds the server's compressions from the (after+1)th on until released, so the run is seen running
 * (and paused) with work left on any machine; `reached` settles when one is held.
 */
const hold = {
  after: Number.POSITIVE_INFINITY,
  calls: 0,
  reached: Promise.resolve(),
  onReach: () => {},
  released: Promise.resolve(),
  release: () => {},
};
function holdCompressionsAfter(after: number): void {
  hold.after = after;
  hold.calls = 0;
  hold.reached = new Promise<void>((resolve) => {
    hold.onReach = resolve;
  });
  hold.released = new Promise<void>((resolve) => {
    hold.release = () => {
      hold.after = Number.POSITIVE_INFINITY;
      resolve();
    };
  });
}

/** The screen's script, as `npm run build` makes it (production), into a directory of its own. */
async function buildScreen(into: string): Promise<number> {
  const started = performance.now();
  const wpScripts = createRequire(import.meta.url).resolve('@wordpress/scripts/bin/wp-scripts.js');
  // As from a shell: vitest sets NODE_ENV=test, which would make wp-scripts build unminified.
  await promisify(execFile)(
    process.execPath,
    [wpScripts, 'build', 'admin/bulk.js', `--output-path=${into}`],
    { cwd: PACKAGE_DIR, env: { ...process.env, NODE_ENV: 'production' } },
  );
  return Math.round(performance.now() - started);
}

/** Presses Tab until the focused element's text is `name`; the number of presses it took. */
async function tabTo(page: Page, name: string, limit = 200): Promise<number> {
  const seen: string[] = [];
  for (let presses = 0; presses <= limit; presses++) {
    const focused = await page.evaluate(() => document.activeElement?.textContent?.trim() ?? '');
    if (focused === name) return presses;
    seen.push(focused);
    await page.keyboard.press('Tab');
  }
  throw new Error(`Tab never reached "${name}"; focus went through: ${seen.join(' → ')}`);
}

const focusedText = (page: Page) => page.evaluate(() => document.activeElement?.textContent?.trim() ?? '');

beforeAll(async () => {
  api = await startTestServer({ dbPath: ':memory:' });
  const { key } = await proAccount(api.db, 'bulk-screen@example.com');
  const optimize = api.engine.optimize.bind(api.engine);
  api.engine.optimize = async (input, options) => {
    if (++hold.calls > hold.after) {
      hold.onReach();
      await hold.released;
    }
    return optimize(input, options);
  };
  dir = mkdtempSync(join(tmpdir(), 'compresso-bulk-screen-'));
  for (let i = 0; i < IMAGES; i++)
    writeFileSync(join(dir, `photo-${i}.jpg`), await rampJpeg(i, [40, 70, 17]));
  // The plugin as Playground sees it: a temporary directory holding the build, with each of the
  // checkout's plugin entries (compresso.php, includes/, …) mounted into it. Mounting the build inside
  // a mount of the checkout's plugin/ would make Playground create plugin/build/ there.
  pluginRoot = mkdtempSync(join(tmpdir(), 'compresso-bulk-plugin-'));
  buildDir = join(pluginRoot, 'build');
  mkdirSync(buildDir);
  const pluginVfs = `/wordpress/wp-content/plugins/${PLUGIN_SLUG}`;
  const entries = readdirSync(PLUGIN_DIR).filter((name) => name !== 'build');
  // The build and the boot at the same time: the mount shows the built files once they are written.
  const [buildMs] = await Promise.all([
    buildScreen(buildDir),
    startWordPress({
      plugin: false,
      assets: true,
      mounts: [
        { hostPath: pluginRoot, vfsPath: pluginVfs },
        ...entries.map((name) => ({ hostPath: join(PLUGIN_DIR, name), vfsPath: `${pluginVfs}/${name}` })),
        { hostPath: dir, vfsPath: '/library-src' },
      ],
    }).then((booted) => {
      wp = booted;
    }),
  ]);
  process.stdout.write(`wp-scripts build: ${buildMs} ms; WordPress boot: ${wp.bootMs} ms\n`);
  makeOffline(wp);
  // The library exists before the plugin is connected (nothing queued on upload), as on a site that
  // installs the plugin and then optimizes what it already has.
  const uploads = Array.from(
    { length: IMAGES },
    (_, i) => `${sideloadPhp(`/library-src/photo-${i}.jpg`, `photo-${i}.jpg`)}
    $ids[] = $id;
    $files[] = get_attached_file( $id );
    $sizes += count( wp_get_attachment_metadata( $id )['sizes'] );`,
  );
  const { value } = await wp.php<{ ids: number[]; files: string[]; sizes: number }>(
    `require_once ABSPATH . 'wp-admin/includes/plugin.php';
    activate_plugin( '${PLUGIN_FILE}' );
    $ids = array(); $files = array(); $sizes = 0;
    ${uploads.join('\n')}
    update_option( 'compresso_settings', array_merge( compresso_get_settings(), array(
      'server_url' => '${api.url}', 'api_key' => compresso_encrypt_secret( '${key}' ),
      'quality' => 75, 'webp' => true, 'avif' => true, 'backups' => true, 'max_dimension' => 0,
    ) ) );
    compresso_test_out( array( 'ids' => $ids, 'files' => $files, 'sizes' => $sizes ) );`,
    { asAdmin: true },
  );
  ids = value.ids;
  expect(value.sizes).toBe(0);
  value.files.forEach((path, i) => {
    const host = wp.hostPath(path);
    originals.set(ids[i] ?? 0, { path: host, hash: sha256(host), size: statSync(host).size });
  });
  browser = await launchChromium();
}, 600_000);

afterAll(async () => {
  hold.release();
  await browser?.close();
  await wp?.close();
  await api?.close();
  for (const tmp of [dir, pluginRoot]) if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('Media → Compresso bulk in Chromium', { timeout: 300_000 }, () => {
  it('shows what a run will cost before it starts, on a desktop and on a phone', async () => {
    expect(existsSync(join(buildDir, 'bulk.js'))).toBe(true);
    const page = await openAdmin(wp, browser, {
      path: BULK,
      viewport: DESKTOP,
      ready: '.compresso-bulk-cost',
      problems,
    });
    const root = page.locator('#compresso-bulk-root');
    // WordPress 6.5 registers 6 sizes: 7 files per upload, each compressed and made as WebP and AVIF.
    await expect
      .poll(() => root.locator('.compresso-bulk-cost').textContent())
      .toContain(
        'One upload costs up to 21 API requests: the original and its 6 generated sizes (WordPress makes only those smaller than the upload), each compressed and made as WEBP + AVIF.',
      );
    expect(await root.locator('.compresso-bulk-cost').textContent()).toContain(
      `Your library: ${IMAGES} images, 0 optimized, ${IMAGES} to do, which needs ${3 * IMAGES} API requests. That fits in what is left of today’s quota.`,
    );
    // Reading the quota from the server (/api/v1/usage) counted as one request of it.
    await root.getByText(/^Quota left today: 499 of 500 requests\. It resets .+\.$/).waitFor();
    await root.getByText('No bulk optimization has run yet.').waitFor();
    // Connected (without the settings form): no notice asking to connect.
    expect(await page.locator('.compresso-setup-notice').count()).toBe(0);
    expect(compressions()).toBe(0);
    await page.screenshot({ path: join(SCREENSHOTS, 'bulk-desktop.png'), fullPage: true });
    await page.context().close();

    const phone = await openAdmin(wp, browser, {
      path: BULK,
      viewport: PHONE,
      ready: '.compresso-bulk-quota',
      problems,
    });
    await phone.getByRole('button', { name: 'Optimize the whole library' }).waitFor();
    await phone.getByText('That fits in what is left of today’s quota.', { exact: false }).waitFor();
    expect(await overflow(phone)).toBeLessThanOrEqual(0);
    await phone.screenshot({ path: join(SCREENSHOTS, 'bulk-phone.png'), fullPage: true });
    await phone.context().close();
    expect(problems).toEqual([]);
  });

  it('starts, pauses and resumes from the keyboard, and the progress shown reaches done', async () => {
    const opening = performance.now();
    const page = await openAdmin(wp, browser, {
      path: BULK,
      viewport: DESKTOP,
      ready: '.compresso-bulk-quota',
      problems,
    });
    const root = page.locator('#compresso-bulk-root');
    // The second image's first compression waits at the server until the run is paused.
    holdCompressionsAfter(1 + FORMATS.length);
    // From the top of the page, through the admin menu, to the button.
    const presses = await tabTo(page, 'Optimize the whole library');
    process.stdout.write(`Tab presses from the top of the page to the start button: ${presses}\n`);
    const started = performance.now();
    await page.keyboard.press('Enter');
    await root.getByText('Optimizing in the background. You can close this page: the run goes on.').waitFor();
    await hold.reached;
    const held = performance.now();
    // The start button is gone; the focus is on what replaced it, not thrown back to the page's top.
    await expect.poll(() => focusedText(page), { timeout: 10_000 }).toBe('Pause');
    await page.keyboard.press('Enter');
    await root.getByText('Paused. Resume when you like: images already done stay done.').waitFor();
    hold.release();
    await expect.poll(() => focusedText(page), { timeout: 10_000 }).toBe('Resume');
    const progress = root.locator('progress');
    expect(Number(await progress.getAttribute('max'))).toBe(IMAGES);
    expect(Number(await progress.getAttribute('value'))).toBeLessThan(IMAGES);
    const resumed = performance.now();
    await page.keyboard.press('Enter');
    await root.getByText('Optimizing in the background. You can close this page: the run goes on.').waitFor();
    await expect.poll(() => focusedText(page), { timeout: 10_000 }).toBe('Pause');
    // The screen reads the run every few seconds while it is active.
    await root.getByText('Finished.').waitFor({ timeout: 240_000 });
    await root.getByText(`${IMAGES} of ${IMAGES} images (100%).`, { exact: false }).waitFor();
    const finished = performance.now();
    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    process.stdout.write(
      `bulk screen: opened and Start reached by Tab in ${s(started - opening)}; Start to the held compression ${s(held - started)}; Resume to "Finished." shown ${s(finished - resumed)}\n`,
    );
    expect(Number(await progress.getAttribute('value'))).toBe(IMAGES);
    const counts = await root.locator('[aria-live="polite"]').textContent();
    expect(counts).toMatch(
      new RegExp(
        `${IMAGES} optimized, 0 already optimized, 0 failed; [0-9.]+ KB saved with ${3 * IMAGES} API requests\\.`,
      ),
    );
    expect(compressions()).toBe(3 * IMAGES);
    // Done: the cost is read again, and the focus went to the button that replaced Pause.
    await root
      .getByText('Every image is already optimized: a run would send nothing.', { exact: false })
      .waitFor();
    await expect.poll(() => focusedText(page), { timeout: 10_000 }).toBe('Start a new run');
    await page.screenshot({ path: join(SCREENSHOTS, 'bulk-done-desktop.png'), fullPage: true });
    await page.context().close();
    expect(problems).toEqual([]);
  });
});

describe('the media library list view in Chromium', { timeout: 300_000 }, () => {
  it('shows each image’s saving and WebP/AVIF copies in the Compresso column', async () => {
    const page = await openAdmin(wp, browser, {
      path: LIBRARY,
      viewport: DESKTOP,
      ready: '#the-list',
      problems,
    });
    expect(await page.locator('th#compresso').textContent()).toBe('Compresso');
    for (const id of ids) {
      const original = originals.get(id);
      if (!original) throw new Error(`no original for ${id}`);
      const after = statSync(original.path).size;
      const percent = (Math.round((1 - after / original.size) * 1000) / 10).toFixed(1);
      const copies = FORMATS.filter((format) => existsSync(`${original.path}.${format}`));
      // Both copies are smaller than these JPEGs, so both were kept.
      expect(copies).toEqual(FORMATS);
      const cell = page.locator(`#post-${id} td.column-compresso`);
      expect(await cell.locator('.compresso-saving').textContent()).toMatch(
        new RegExp(`^Saved ${percent.replace('.', '\\.')}% \\([0-9.]+ KB → [0-9.]+ KB\\), 1 file\\.$`),
      );
      expect(await cell.locator('.compresso-formats').textContent()).toBe(
        'WEBP: 1 of 1 file · AVIF: 1 of 1 file',
      );
    }
    await page.screenshot({ path: join(SCREENSHOTS, 'media-library-desktop.png'), fullPage: true });
    await page.context().close();
    expect(problems).toEqual([]);
  });

  it('reaches Restore original and Compress now by keyboard; each does what it says', async () => {
    const id = ids[0] ?? 0;
    const original = originals.get(id);
    if (!original) throw new Error(`no original for ${id}`);
    const page = await openAdmin(wp, browser, {
      path: LIBRARY,
      viewport: DESKTOP,
      ready: '#the-list',
      problems,
    });
    const row = page.locator(`#post-${id}`);
    // The row actions are hidden until the row is hovered or has the focus: Tab from the title.
    await row.locator('.column-title strong a').first().focus();
    await tabTo(page, 'Restore original', 20);
    // Shown where the focus is (WordPress moves the row actions on screen for a focused link).
    const box = await page.evaluate(() => {
      const r = (document.activeElement as Element).getBoundingClientRect();
      return { x: r.x, width: r.width };
    });
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.width).toBeGreaterThan(0);
    await Promise.all([page.waitForURL(/compresso_result=restored/), page.keyboard.press('Enter')]);
    await page.locator('.compresso-result').waitFor();
    expect(await page.locator('.compresso-result').textContent()).toContain(
      'The original image was restored, byte for byte; its WebP/AVIF copies were removed.',
    );
    expect(sha256(original.path)).toBe(original.hash);
    for (const format of FORMATS) expect(existsSync(`${original.path}.${format}`)).toBe(false);
    expect(await page.locator(`#post-${id} td.column-compresso`).textContent()).toBe('Not compressed yet.');

    const before = compressions();
    await page.locator(`#post-${id} .column-title strong a`).first().focus();
    await tabTo(page, 'Compress now', 20);
    await Promise.all([page.waitForURL(/compresso_result=queued/), page.keyboard.press('Enter')]);
    await page.locator('.compresso-result').waitFor();
    expect(await page.locator('.compresso-result').textContent()).toContain(
      'The image is being compressed in the background.',
    );
    await page.context().close();
    // The background job (started at the end of that request) compresses it again. Its start is a
    // non-blocking loopback request; one lost under load leaves the event to WP-Cron, whose own spawn
    // is tried again once its 60-s lock has passed: up to four such periods, then the failure says
    // what the schedule and the locks held.
    await expect
      .poll(
        async () =>
          (await wp.php<string>(`compresso_test_out( Compresso_Optimizer::state( ${id} )['status'] );`))
            .value,
        { timeout: 240_000, interval: 500 },
      )
      .toBe('done')
      .catch(async (error: Error) => {
        throw new Error(`${error.message}\n${await backgroundDiagnostics(wp, id)}`);
      });
    expect(compressions()).toBe(before + 3);
    expect(statSync(original.path).size).toBeLessThan(original.size);
    for (const format of FORMATS) expect(existsSync(`${original.path}.${format}`)).toBe(true);
    expect(problems).toEqual([]);
  });
});
