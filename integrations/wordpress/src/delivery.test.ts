// Delivery of the WebP/AVIF copies in a real WordPress (Playground), one image optimized for real by a
// Compresso server: the settings (picture | rewrite | off, <picture> per context), the Apache rules
// written into uploads/.htaccess and removed, and the delivery self-test that runs after each save —
// through Playground's own server (<picture> works; rewrite does not: it runs no .htaccess), through
// a Node front that applies the same rule as the Apache rules (rewrite that works), and through a
// caching proxy in front of that which keys on the URL alone (a CDN that ignores Vary: Accept).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fieldValue, sessionFor, type WpSession } from './testing/browser.ts';
import {
  activatePlugin,
  PLUGIN_FILE,
  sideloadPhp,
  startWordPress,
  type WordPress,
} from './testing/wordpress.ts';

const CORPUS = join(import.meta.dirname, '../../../../shared/corpus');
const SETTINGS = 'wp-admin/options-general.php?page=compresso';
let wp: WordPress;
let api: TestServer;
let key: string;
let admin: WpSession;
let image: { id: number; url: string; path: string; files: Record<string, string> };

interface Check {
  key: string;
  url: string;
  accept: string;
  expected: string;
  status: number;
  type: string;
  vary: string;
  cache: string;
  error: string;
}
interface Report {
  mode: string;
  url: string;
  verdict: string;
  ok: boolean | null;
  switched: boolean;
  failed: string[];
  checks: Check[];
  message: string;
}

/** A small HTTP server on loopback; `handler` answers each request. */
async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Server> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}
const urlOf = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

/** Forwards a GET to `upstream` (path rewritten to `path`), answering with its status, headers and body. */
async function forward(
  upstream: string,
  path: string,
  req: IncomingMessage,
): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> {
  const headers: Record<string, string> = {};
  for (const name of ['accept', 'user-agent', 'cookie']) {
    const value = req.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  const response = await fetch(`${upstream}${path}`, { headers, redirect: 'manual' });
  const out: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    if (!['content-encoding', 'transfer-encoding', 'connection', 'content-length'].includes(name))
      out[name] = value;
  });
  return { status: response.status, headers: out, body: Buffer.from(await response.arrayBuffer()) };
}

function send(
  res: ServerResponse,
  answer: { status: number; headers: Record<string, string>; body: Buffer },
) {
  res.writeHead(answer.status, { ...answer.headers, 'content-length': String(answer.body.length) });
  res.end(answer.body);
}

/**
 * What the Apache rules do, as a Node front of Playground's server (whose PHP server runs no
 * .htaccess): a request for an uploads .jpg/.png/.gif is answered with its .avif / .webp sibling when
 * the Accept header names that format and the sibling exists on disk (AVIF first), with the sibling's
 * type, and every such answer carries Vary: Accept. Everything else passes through unchanged.
 */
function rewriteFront(upstream: string, log: { path: string; accept: string; served: string }[]) {
  return listen((req, res) => {
    const url = new URL(req.url ?? '/', 'http://front');
    const accept = String(req.headers.accept ?? '');
    let path = url.pathname;
    const isImage = /^\/wp-content\/uploads\/.+\.(?:jpe?g|png|gif)$/i.test(url.pathname);
    let type: string | undefined;
    if (isImage) {
      for (const format of ['avif', 'webp']) {
        const file = wp.hostPath(`/wordpress${decodeURIComponent(url.pathname)}.${format}`);
        if (accept.includes(`image/${format}`) && existsSync(file)) {
          path = `${url.pathname}.${format}`;
          type = `image/${format}`;
          break;
        }
      }
    }
    forward(upstream, `${path}${url.search}`, req).then(
      (answer) => {
        if (type) answer.headers['content-type'] = type;
        if (isImage) answer.headers.vary = answer.headers.vary ? `${answer.headers.vary}, Accept` : 'Accept';
        log.push({ path: url.pathname, accept, served: answer.headers['content-type'] ?? '' });
        send(res, answer);
      },
      (error: Error) => {
        res.writeHead(502).end(error.message);
      },
    );
  });
}

/** A cache in front that keys on the URL alone and ignores Vary (as most CDN plans do). */
function urlKeyedCache(upstream: string) {
  const cache = new Map<string, { at: number; answer: Awaited<ReturnType<typeof forward>> }>();
  return listen((req, res) => {
    const key = req.url ?? '/';
    const hit = cache.get(key);
    if (hit) {
      send(res, {
        ...hit.answer,
        headers: {
          ...hit.answer.headers,
          'x-cache': 'HIT',
          age: String(Math.floor((Date.now() - hit.at) / 1000)),
        },
      });
      return;
    }
    forward(upstream, key, req).then(
      (answer) => {
        if (answer.status === 200) cache.set(key, { at: Date.now(), answer });
        send(res, { ...answer, headers: { ...answer.headers, 'x-cache': 'MISS' } });
      },
      (error: Error) => {
        res.writeHead(502).end(error.message);
      },
    );
  });
}

async function save(fields: Record<string, string>) {
  const page = await admin.request(SETTINGS);
  const nonce = fieldValue(page.text, '_wpnonce');
  if (!nonce) throw new Error(`no nonce on the settings screen:\n${page.text.slice(0, 2000)}`);
  const form: Record<string, string> = {
    action: 'compresso_save_settings',
    _wpnonce: nonce,
    _wp_http_referer: `/${SETTINGS}`,
  };
  const all = { server_url: api.url, quality: 'auto', webp: '1', avif: '1', backups: '1', ...fields };
  for (const [name, value] of Object.entries(all)) form[`compresso[${name}]`] = value;
  const response = await admin.request('wp-admin/admin-post.php', { form });
  expect(response.status, response.text.slice(0, 2000)).toBe(302);
}

async function state() {
  return (
    await wp.php<{ report: Report; settings: Record<string, unknown>; htaccess: string | null }>(`
      $h = Compresso_Rewrite::htaccess_path();
      compresso_test_out( array(
        'report' => get_option( Compresso_Self_Test::OPTION ),
        'settings' => compresso_get_settings(),
        'htaccess' => is_file( $h ) ? file_get_contents( $h ) : null,
      ) );`)
  ).value;
}

const byKey = (report: Report) => Object.fromEntries(report.checks.map((c) => [c.key, c]));

async function setUploadsUrl(base: string | null) {
  await wp.php(
    base === null
      ? `delete_option( 'upload_url_path' ); compresso_test_out( 1 );`
      : `update_option( 'upload_url_path', '${base}/wp-content/uploads' ); compresso_test_out( 1 );`,
  );
}

beforeAll(async () => {
  api = await startTestServer({ dbPath: ':memory:' });
  key = (await proAccount(api.db, 'delivery@example.com')).key;
  wp = await startWordPress({ mounts: [{ hostPath: CORPUS, vfsPath: '/corpus' }] });
  // Playground has two PHP workers. WordPress's own WP-Cron jobs (update checks that try the internet
  // this machine does not have, Site Health's loopback tests), started by a loopback request on page
  // loads, would hold one of them for their timeouts, and the self-test's requests to the site would
  // queue behind them (the first of them timed out after 20 s in two runs). This test site runs no WP-Cron (the test calls the
  // optimizer itself); like every test site (startWordPress) it refuses requests to the internet at
  // once, while 127.0.0.1 (the site, the Compresso server, the fronts) stays allowed.
  mkdirSync(wp.hostPath('/wordpress/wp-content/mu-plugins'), { recursive: true });
  writeFileSync(
    wp.hostPath('/wordpress/wp-content/mu-plugins/offline.php'),
    "<?php\ndefine( 'DISABLE_WP_CRON', true );\n",
  );
  await activatePlugin(wp);
  // Uploaded before the plugin is connected (so nothing is queued), then optimized here, for real,
  // by the Compresso server: the original and its sizes compressed, WebP and AVIF copies beside them.
  const uploaded = await wp.php<{ id: number; url: string; path: string; files: Record<string, string> }>(
    `${sideloadPhp('/corpus/photo-skimage-rocket.jpg', 'rocket.jpg')}
    update_option( 'compresso_settings', array_merge( compresso_get_settings(), array(
      'server_url' => '${api.url}', 'api_key' => compresso_encrypt_secret( '${key}' ),
      'webp' => true, 'avif' => true, 'quality' => 'auto',
    ) ) );
    $state = Compresso_Optimizer::optimize( $id );
    if ( 'done' !== $state['status'] ) { compresso_test_out( $state ); return; }
    compresso_test_out( array( 'id' => $id, 'url' => wp_get_attachment_url( $id ), 'path' => get_attached_file( $id ), 'files' => Compresso_Optimizer::files( $id ) ) );`,
    { asAdmin: true },
  );
  image = uploaded.value;
  expect(image.id, JSON.stringify(image)).toBeGreaterThan(0);
  admin = await sessionFor(wp, 'admin');
}, 400_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
});

describe('delivery: settings, rewrite rules and the self-test', { timeout: 300_000 }, () => {
  const servers: Server[] = [];
  const frontLog: { path: string; accept: string; served: string }[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });

  it('the optimized image has WebP and AVIF copies on disk', () => {
    const host = wp.hostPath(image.path);
    expect(readFileSync(`${host}.webp`).subarray(8, 12).toString()).toBe('WEBP');
    expect(readFileSync(`${host}.avif`).subarray(4, 12).toString()).toBe('ftypavif');
  });

  it('<picture>: the self-test fetches the original and each copy by its own URL and reports them as served', async () => {
    await save({ delivery: 'picture', picture_content: '1', picture_attachment: '1' });
    const { report, settings, htaccess } = await state();
    expect(report.mode).toBe('picture');
    expect(report.url).toBe(image.url);
    const checks = byKey(report);
    expect(Object.keys(checks)).toEqual(['original', 'sibling_avif', 'sibling_webp']);
    expect(checks.original).toMatchObject({ url: image.url, status: 200, type: 'image/jpeg' });
    expect(checks.sibling_avif).toMatchObject({ url: `${image.url}.avif`, status: 200, type: 'image/avif' });
    expect(checks.sibling_webp).toMatchObject({ url: `${image.url}.webp`, status: 200, type: 'image/webp' });
    expect(report).toMatchObject({ verdict: 'picture_ok', ok: true, switched: false });
    expect(settings.delivery).toBe('picture');
    expect(htaccess).toBeNull();
    // What the self-test saw is what a browser gets from the site.
    const webp = await fetch(`${image.url}.webp`, { headers: { accept: 'image/webp' } });
    expect(webp.headers.get('content-type')).toBe('image/webp');
  });

  it('rewrite on a server that does not run the rules (Playground’s, like nginx without the snippet): reported, switched to <picture>, rules removed', async () => {
    await save({ delivery: 'rewrite', picture_content: '1', picture_attachment: '1' });
    const { report, settings, htaccess } = await state();
    const checks = byKey(report);
    expect(Object.keys(checks)).toEqual(['legacy', 'webp', 'avif', 'legacy_again', 'origin']);
    for (const check of report.checks) expect(check.type, JSON.stringify(report, null, 1)).toBe('image/jpeg');
    expect(checks.origin?.url).toMatch(new RegExp(`^${image.url}\\?compresso-self-test=\\w+$`));
    expect(report).toMatchObject({ verdict: 'rewrite_not_active', ok: false, switched: true });
    expect(report.message).toContain('rewrite rules are not in effect');
    expect(report.message).toContain('switched delivery to <picture>');
    expect(settings.delivery).toBe('picture');
    expect(htaccess).toBeNull();
  });

  it('rewrite that works (a front applying the same rule): each browser gets its format with Vary: Accept; the Apache rules stay written', async () => {
    const front = await rewriteFront(wp.url, frontLog);
    servers.push(front);
    await setUploadsUrl(urlOf(front));
    writeFileSync(
      wp.hostPath('/wordpress/wp-content/uploads/.htaccess'),
      '# the host’s own line\nOptions -Indexes\n',
    );
    await save({ delivery: 'rewrite', picture_content: '1', picture_attachment: '1' });
    const { report, settings, htaccess } = await state();
    const checks = byKey(report);
    expect(report.url.startsWith(`${urlOf(front)}/wp-content/uploads/`)).toBe(true);
    expect(checks.legacy).toMatchObject({ type: 'image/jpeg', vary: 'Accept' });
    expect(checks.webp).toMatchObject({ type: 'image/webp', vary: 'Accept' });
    expect(checks.avif).toMatchObject({ type: 'image/avif', vary: 'Accept' });
    expect(checks.legacy_again).toMatchObject({ type: 'image/jpeg', vary: 'Accept' });
    expect(checks.origin).toMatchObject({ type: 'image/avif', vary: 'Accept' });
    expect(report).toMatchObject({ verdict: 'rewrite_ok', ok: true, switched: false, failed: [] });
    expect(settings.delivery).toBe('rewrite');
    // The requests really went through the front, with each browser's Accept.
    const seen = frontLog.filter((l) => l.path === new URL(image.url).pathname);
    expect(seen.map((l) => l.served)).toEqual([
      'image/jpeg',
      'image/webp',
      'image/avif',
      'image/jpeg',
      'image/avif',
    ]);
    // The Apache block, between markers, above the host's own lines, kept byte for byte.
    expect(htaccess).toMatch(
      /^# BEGIN Compresso\n[\s\S]+\n# END Compresso\n\n# the host’s own line\nOptions -Indexes\n$/,
    );
    expect(htaccess).toContain('RewriteCond %{REQUEST_FILENAME}.avif -f');
    expect(htaccess).toContain('RewriteRule ^(.+\\.(?:jpe?g|png|gif))$ $1.webp [NC,T=image/webp,L]');
    expect(htaccess).toContain('Header merge Vary Accept');
    // Rewrite delivery leaves the page's markup alone: no <picture>.
    const { value } = await wp.php<string>(
      `compresso_test_out( wp_get_attachment_image( ${image.id}, 'full' ) );`,
    );
    expect(value).toMatch(/^<img /);
  });

  it('a cache in front that ignores Vary: Accept: the origin is right, browsers are not; reported and switched to <picture>', async () => {
    const front = servers[0] as Server;
    const cache = await urlKeyedCache(urlOf(front));
    servers.push(cache);
    await setUploadsUrl(urlOf(cache));
    await save({ delivery: 'rewrite', picture_content: '1', picture_attachment: '1' });
    const { report, settings, htaccess } = await state();
    const checks = byKey(report);
    // The first browser (no WebP) filled the cache with the JPEG; WebP and AVIF browsers got it too.
    expect(checks.legacy).toMatchObject({ type: 'image/jpeg', cache: 'x-cache: MISS' });
    expect(checks.webp).toMatchObject({ type: 'image/jpeg', expected: 'image/webp' });
    expect(checks.webp?.cache).toMatch(/^x-cache: HIT; age: \d+$/);
    expect(checks.avif).toMatchObject({ type: 'image/jpeg', expected: 'image/avif' });
    expect(checks.origin).toMatchObject({ type: 'image/avif', cache: 'x-cache: MISS' });
    expect(report).toMatchObject({
      verdict: 'cache_ignores_vary',
      ok: false,
      switched: true,
      failed: ['webp', 'avif'],
    });
    expect(report.message).toContain('ignores "Vary: Accept"');
    expect(settings.delivery).toBe('picture');
    // Rules removed, the host's own lines left as they were.
    expect(htaccess).toBe('# the host’s own line\nOptions -Indexes\n');
  });

  it('<picture> per context: the settings turn it off for post content or for theme images, the filter per image', async () => {
    const { value } = await wp.php<Record<string, string>>(`
      $img = '<img src="' . wp_get_attachment_image_url( ${image.id}, 'medium' ) . '" class="wp-image-${image.id} is-style-rounded" style="border:1px solid red" data-builder="x" alt="Rocket">';
      $out = array();
      $set = function ( $changes ) { update_option( 'compresso_settings', array_merge( compresso_get_settings(), $changes ) ); };
      $set( array( 'delivery' => 'picture', 'picture_content' => true, 'picture_attachment' => true ) );
      $out['content_on'] = wp_filter_content_tags( $img );
      $out['theme_on'] = wp_get_attachment_image( ${image.id}, 'medium' );
      $set( array( 'picture_content' => false ) );
      $out['content_off'] = wp_filter_content_tags( $img );
      $out['theme_still_on'] = wp_get_attachment_image( ${image.id}, 'medium' );
      $set( array( 'picture_content' => true, 'picture_attachment' => false ) );
      $out['theme_off'] = wp_get_attachment_image( ${image.id}, 'medium' );
      $out['content_still_on'] = wp_filter_content_tags( $img );
      $set( array( 'picture_attachment' => true, 'delivery' => 'off' ) );
      $out['delivery_off'] = wp_get_attachment_image( ${image.id}, 'medium' );
      $set( array( 'delivery' => 'picture' ) );
      add_filter( 'compresso_picture_enabled', function ( $on, $context ) { return 'attachment' !== $context; }, 10, 2 );
      $out['filtered'] = wp_get_attachment_image( ${image.id}, 'medium' );
      compresso_test_out( $out );`);
    const wrapped =
      /^<picture class="compresso-picture"><source type="image\/avif" srcset="[^"]+\.jpg\.avif[^"]*"[^>]*><source type="image\/webp" srcset="[^"]+\.jpg\.webp[^"]*"[^>]*><img /;
    expect(value.content_on).toMatch(wrapped);
    // The <img> keeps every class, style and attribute.
    const img = /<img [^>]*>/.exec(value.content_on ?? '')?.[0] ?? '';
    for (const part of [
      'class="wp-image-',
      'is-style-rounded',
      'style="border:1px solid red"',
      'data-builder="x"',
      'alt="Rocket"',
    ])
      expect(img).toContain(part);
    expect(value.theme_on).toMatch(wrapped);
    expect(value.content_off).toMatch(/^<img /);
    expect(value.theme_still_on).toMatch(wrapped);
    expect(value.theme_off).toMatch(/^<img /);
    expect(value.content_still_on).toMatch(wrapped);
    expect(value.delivery_off).toMatch(/^<img /);
    expect(value.filtered).toMatch(/^<img /);
  });
});

describe('deactivation and uninstall', { timeout: 180_000 }, () => {
  it('deactivation removes the rules; uninstall removes them and the report', async () => {
    const { value } = await wp.php<Record<string, unknown>>(
      `require_once ABSPATH . 'wp-admin/includes/plugin.php';
      $h = Compresso_Rewrite::htaccess_path();
      $settings = array_merge( compresso_get_settings(), array( 'delivery' => 'rewrite' ) );
      Compresso_Rewrite::sync( $settings );
      $written = file_get_contents( $h );
      deactivate_plugins( '${PLUGIN_FILE}' );
      $after_deactivate = file_get_contents( $h );
      Compresso_Rewrite::sync( $settings );
      uninstall_plugin( '${PLUGIN_FILE}' );
      compresso_test_out( array(
        'written' => false !== strpos( $written, '# BEGIN Compresso' ),
        'after_deactivate' => $after_deactivate,
        'after_uninstall' => file_get_contents( $h ),
        'report' => get_option( 'compresso_delivery_report', 'gone' ),
      ) );`,
      { asAdmin: true },
    );
    expect(value).toEqual({
      written: true,
      after_deactivate: '# the host’s own line\nOptions -Indexes\n',
      after_uninstall: '# the host’s own line\nOptions -Indexes\n',
      report: 'gone',
    });
  });
});
