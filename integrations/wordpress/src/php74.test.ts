// The plugin end to end on PHP 7.4, the oldest PHP it supports (the other files run on PHP 8.3): one
// boot of WordPress 6.5 on Playground's PHP 7.4 build against a real Compresso server. Activation and
// its notice, the settings form saved over HTTP with the key checked live, an upload compressed in the
// background (runner) with WebP and AVIF siblings, a rendered post with <picture>, smart PNG-to-JPEG, a
// bulk run through the REST routes, restore byte for byte — and no PHP notice, warning or deprecation
// printed on the way.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fieldValue, sessionFor, type WpSession } from './testing/browser.ts';
import {
  backgroundDiagnostics,
  PLUGIN_FILE,
  sideloadPhp,
  startWordPress,
  type WordPress,
} from './testing/wordpress.ts';

const CORPUS = join(import.meta.dirname, '../../../../shared/corpus');
const PHOTO = 'photo-mate-Dune.jpg';
const SETTINGS = 'wp-admin/options-general.php?page=compresso';
/**
 * What PHP prints for a notice, warning, deprecation or error (display_errors is on in Playground):
 * `<b>Warning</b>:  … in <b>/path</b> on line <b>12</b>` in HTML, `Warning: … in /path on line 12` in text.
 */
const PHP_COMPLAINT =
  /<b>(Notice|Warning|Deprecated|Fatal error|Parse error)<\/b>:|(Notice|Warning|Deprecated|Fatal error|Parse error): .* on line \d+/;

let wp: WordPress;
let api: TestServer;
let key: string;
let admin: WpSession;
let dir: string;

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** Runs PHP in the site and fails on anything PHP printed besides the result. */
async function php<T>(code: string, options: { asAdmin?: boolean } = {}): Promise<T> {
  const { value, output } = await wp.php<T>(code, options);
  expect(output).not.toMatch(PHP_COMPLAINT);
  return value;
}

interface Uploaded {
  id: number;
  files: Record<string, string>;
  /** Each file's SHA-256 as the upload request left it (read in that request: the runner it starts may
   * have compressed the files by the time the test could read them). */
  written: Record<string, string>;
}

async function upload(source: string, name: string): Promise<Uploaded> {
  return php<Uploaded>(
    `${sideloadPhp(source, name)}
    compresso_test_out( array( 'id' => $id, 'files' => Compresso_Optimizer::files( $id ),
      'written' => array_map( function ( $path ) { return hash_file( 'sha256', $path ); }, Compresso_Optimizer::files( $id ) ) ) );`,
    { asAdmin: true },
  );
}

/**
 * Reads the attachment's record until the background job has finished with it; after eight minutes,
 * fails with the plugin's WP-Cron events and locks (backgroundDiagnostics), so a hang says where it hung.
 */
async function optimized(id: number) {
  const started = performance.now();
  for (;;) {
    if (performance.now() - started > 480_000) {
      throw new Error(`attachment ${id} still queued after 480 s: ${await backgroundDiagnostics(wp, id)}`);
    }
    const state = await php<{
      status: string;
      error: { code: string; message: string } | null;
      files: Record<string, { size_before: number; size_after: number; siblings: Record<string, unknown> }>;
      mime: string;
      file: string;
    }>(`$s = Compresso_Optimizer::state( ${id} ); $s['mime'] = get_post_mime_type( ${id} );
      $s['file'] = get_attached_file( ${id} ); compresso_test_out( $s );`);
    if (state.status !== 'queued') return state;
  }
}

beforeAll(async () => {
  api = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 20 * 1024 * 1024 } });
  key = (await proAccount(api.db, 'php74@example.com')).key;
  dir = mkdtempSync(join(tmpdir(), 'compresso-php74-'));
  // An opaque PNG of a photo: the kind smart PNG-to-JPEG is for (a JPEG of it is far smaller).
  await sharp(join(CORPUS, PHOTO)).resize(800).png().toFile(join(dir, 'screenshot.png'));
  writeFileSync(join(dir, '.keep'), '');
  wp = await startWordPress({
    php: '7.4',
    mounts: [
      { hostPath: CORPUS, vfsPath: '/corpus' },
      { hostPath: dir, vfsPath: '/made' },
    ],
  });
  await php(
    `require_once ABSPATH . 'wp-admin/includes/plugin.php';
    $r = activate_plugin( '${PLUGIN_FILE}' );
    compresso_test_out( is_wp_error( $r ) ? $r->get_error_message() : 'ok' );`,
    { asAdmin: true },
  );
  admin = await sessionFor(wp, 'admin');
}, 300_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the plugin on PHP 7.4', { timeout: 600_000 }, () => {
  it('runs on PHP 7.4, activated, with the notice that leads to the settings', async () => {
    expect(await php<string>('compresso_test_out( PHP_VERSION );')).toMatch(/^7\.4\./);
    const plugins = await admin.request('wp-admin/plugins.php');
    expect(plugins.status).toBe(200);
    expect(plugins.text).toContain('compresso-setup-notice');
    expect(plugins.text).not.toMatch(PHP_COMPLAINT);
  });

  it('saves the settings over HTTP with the key checked live against the server', async () => {
    const page = await admin.request(SETTINGS);
    expect(page.status).toBe(200);
    expect(page.text).not.toMatch(PHP_COMPLAINT);
    const nonce = fieldValue(page.text, '_wpnonce') ?? '';
    const fields: Record<string, string> = {
      server_url: api.url,
      api_key: key,
      quality: '75',
      max_dimension: '0',
      webp: '1',
      avif: '1',
      png_to_jpeg: '1',
      lazy_load: '1',
      backups: '1',
      delivery: 'picture',
      picture_content: '1',
      picture_attachment: '1',
    };
    const form: Record<string, string> = {
      action: 'compresso_save_settings',
      _wp_http_referer: `/${SETTINGS}`,
      _wpnonce: nonce,
    };
    for (const [name, value] of Object.entries(fields)) form[`compresso[${name}]`] = value;
    const saved = await admin.request('wp-admin/admin-post.php', { form });
    expect(saved.status).toBe(302);
    expect(saved.location).toContain('page=compresso');
    const after = await admin.request(saved.location ?? SETTINGS);
    expect(after.text).not.toMatch(PHP_COMPLAINT);
    const stored = await php<{ connected: boolean; key: string; raw: string }>(`
      compresso_test_out( array( 'connected' => compresso_is_connected(), 'key' => compresso_get_api_key(),
        'raw' => (string) get_option( 'compresso_settings' )['api_key'] ) );`);
    expect(stored.connected).toBe(true);
    expect(stored.key).toBe(key);
    expect(stored.raw).not.toContain(key);
    // The live check reached the server's /usage with the key.
    expect(api.logLines.some((l) => l.path === '/api/v1/usage' && l.status === 200)).toBe(true);
  });

  let photo: Uploaded;
  const before: Record<string, string> = {};

  it('compresses an upload and every size in the background, with WebP and AVIF copies', async () => {
    photo = await upload(`/corpus/${PHOTO}`, 'dune.jpg');
    for (const name of Object.keys(photo.files)) before[name] = photo.written[name] ?? `${name} not read`;
    const state = await optimized(photo.id);
    expect(state.error).toBeNull();
    expect(state.status).toBe('done');
    expect(Object.keys(state.files).sort()).toEqual(Object.keys(photo.files).sort());
    for (const [name, record] of Object.entries(state.files)) {
      expect(record.size_after, name).toBeLessThan(record.size_before);
      for (const format of ['webp', 'avif']) {
        const sibling = record.siblings[format];
        const path = `${wp.hostPath(photo.files[name] ?? '')}.${format}`;
        if (sibling === false) expect(existsSync(path), `${name}.${format}`).toBe(false);
        else expect(statSync(path).size, `${name}.${format}`).toBe((sibling as { size: number }).size);
      }
    }
  });

  it('delivers the copies as <picture> in a rendered post', async () => {
    const link = await php<string>(`
      $large = wp_get_attachment_image_url( ${photo.id}, 'large' );
      $post = wp_insert_post( array(
        'post_title' => 'Dune', 'post_status' => 'publish', 'post_author' => 1,
        'post_content' => '<!-- wp:image {"id":${photo.id},"sizeSlug":"large"} --><figure class="wp-block-image size-large"><img src="' . $large . '" alt="Dunes" class="wp-image-${photo.id}"/></figure><!-- /wp:image -->',
      ) );
      compresso_test_out( get_permalink( $post ) );`);
    const html = await (await fetch(link)).text();
    expect(html).not.toMatch(PHP_COMPLAINT);
    const picture = /<picture class="compresso-picture">(.*?)<\/picture>/s.exec(html)?.[1] ?? '';
    expect(picture).toMatch(/<source type="image\/(avif|webp)" srcset="[^"]+\.jpg\.(avif|webp)/);
    expect(picture).toMatch(/<img [^>]*class="wp-image-\d+"/);
  });

  it('turns an opaque PNG into a JPEG when that saves enough', async () => {
    const png = await upload('/made/screenshot.png', 'screenshot.png');
    const state = await optimized(png.id);
    expect(state.error).toBeNull();
    expect(state.status).toBe('done');
    expect(state.mime).toBe('image/jpeg');
    expect(state.file).toMatch(/\.jpg$/);
  });

  it('runs a bulk run through the REST routes to its end', async () => {
    const run = await php<{ start: number; status: string; processed: number; total: number }>(
      `$start = rest_do_request( new WP_REST_Request( 'POST', '/compresso/v1/bulk/start' ) );
      Compresso_Bulk::tick( 60 );
      $status = rest_do_request( new WP_REST_Request( 'GET', '/compresso/v1/bulk' ) )->get_data();
      compresso_test_out( array( 'start' => $start->get_status(), 'status' => $status['status'],
        'processed' => $status['processed'], 'total' => $status['total'] ) );`,
      { asAdmin: true },
    );
    expect(run).toMatchObject({ start: 200, status: 'done', processed: 2, total: 2 });
  });

  it('restores the photo and every size byte for byte', async () => {
    const restored = await php<unknown>(`
      $r = Compresso_Optimizer::restore( ${photo.id} );
      compresso_test_out( is_wp_error( $r ) ? $r->get_error_message() : $r );`);
    expect(restored).toBe(true);
    for (const [name, path] of Object.entries(photo.files)) {
      expect(sha256(wp.hostPath(path)), name).toBe(before[name]);
      expect(existsSync(`${wp.hostPath(path)}.webp`)).toBe(false);
    }
  });
});
