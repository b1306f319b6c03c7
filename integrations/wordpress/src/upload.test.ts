// Auto-compress on upload, in a real WordPress against a real Compresso server: the upload only queues;
// the plugin's runner (a signed loopback request; WP-Cron when loopbacks are blocked) compresses the original and every generated size
// and writes WebP siblings, delivered as <picture> in a rendered post; backups are kept outside uploads/; a second run sends nothing; restore is
// byte-identical; a server that cannot be reached leaves every file as it was.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  activatePlugin,
  backgroundDiagnostics,
  PLUGIN_FILE,
  sideloadPhp,
  startWordPress,
  type WordPress,
} from './testing/wordpress.ts';

const CORPUS = join(import.meta.dirname, '../../../../shared/corpus');
const PHOTO = 'photo-mate-Dune.jpg';

let wp: WordPress;
let api: TestServer;
let key: string;

interface Upload {
  id: number;
  files: Record<string, string>;
  status: string;
  scheduled: boolean;
  sizes: string[];
  /** Each file's size and SHA-256 as the upload request left it, read in that request (the runner it
   * starts at its end may have compressed them by the time the test could read them). */
  written: Record<string, { size: number; hash: string }>;
}

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const compressCalls = () => api.logLines.filter((l) => l.path === '/api/v1/compress').length;

function configure(serverUrl: string): string {
  return `update_option( 'compresso_settings', array_merge( compresso_get_settings(), array(
    'server_url' => '${serverUrl}', 'api_key' => compresso_encrypt_secret( '${key}' ),
    'quality' => 75, 'webp' => true, 'avif' => false, 'backups' => true, 'max_dimension' => 0,
  ) ) );`;
}

async function upload(name: string): Promise<Upload> {
  const { value } = await wp.php<Upload>(
    `${sideloadPhp(`/corpus/${PHOTO}`, name)}
    $state = Compresso_Optimizer::state( $id );
    compresso_test_out( array(
      'id' => $id,
      'files' => Compresso_Optimizer::files( $id ),
      'status' => $state['status'],
      'scheduled' => (bool) wp_next_scheduled( Compresso_Optimizer::CRON_HOOK, array( $id ) ),
      'sizes' => array_keys( wp_get_attachment_metadata( $id )['sizes'] ),
      'written' => array_map( function ( $path ) { return array( 'size' => filesize( $path ), 'hash' => hash_file( 'sha256', $path ) ); }, Compresso_Optimizer::files( $id ) ),
    ) );`,
    { asAdmin: true },
  );
  return value;
}

async function stateOf(id: number) {
  return (
    await wp.php<{
      status: string;
      requests: number;
      error: { code: string } | null;
      files: Record<string, Record<string, unknown>>;
      meta: Record<string, unknown>;
    }>(
      `$s = Compresso_Optimizer::state( ${id} ); $s['meta'] = wp_get_attachment_metadata( ${id} ); compresso_test_out( $s );`,
    )
  ).value;
}

beforeAll(async () => {
  api = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 20 * 1024 * 1024 } });
  key = (await proAccount(api.db, 'upload@example.com')).key;
  wp = await startWordPress({ mounts: [{ hostPath: CORPUS, vfsPath: '/corpus' }] });
  await activatePlugin(wp);
  // activate_plugin() loads the plugin inside that request; the settings are written by the next one.
  await wp.php(`${configure(api.url)} compresso_test_out( compresso_is_connected() );`);
}, 300_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
});

describe('auto-compress on upload', { timeout: 600_000 }, () => {
  let first: Upload;
  const before: Record<string, { size: number; hash: string }> = {};

  it('queues the upload without compressing anything during it', async () => {
    const started = performance.now();
    first = await upload('dune.jpg');
    process.stdout.write(`upload request: ${Math.round(performance.now() - started)} ms\n`);
    expect(first.sizes.length).toBeGreaterThanOrEqual(4);
    expect(Object.keys(first.files)).toHaveLength(first.sizes.length + 1);
    expect(first.status).toBe('queued');
    for (const [name, path] of Object.entries(first.files)) {
      before[name] = first.written[name] ?? { size: -1, hash: `${path} not read` };
    }
    expect(before['dune.jpg']).toEqual({
      size: statSync(join(CORPUS, PHOTO)).size,
      hash: sha256(join(CORPUS, PHOTO)),
    });
    expect(first.scheduled).toBe(true);
  });

  it('compresses the original and every size in the background (the runner, started by a loopback request), with WebP siblings', async () => {
    const started = performance.now();
    let state = await stateOf(first.id);
    // The loopback request the upload's shutdown fired runs the cron job in another worker: wait for
    // its record to say it finished (each look is a PHP request of a few seconds).
    while (state.status === 'queued' && performance.now() - started < 480_000)
      state = await stateOf(first.id);
    if (state.status === 'queued')
      throw new Error(`still queued: ${await backgroundDiagnostics(wp, first.id)}`);
    process.stdout.write(
      `upload to optimized: ${Math.round(performance.now() - started)} ms after the upload returned\n`,
    );
    expect(state.error).toBeNull();
    expect(state.status).toBe('done');
    const names = Object.keys(first.files);
    expect(state.requests).toBe(names.length * 2);
    for (const [name, path] of Object.entries(first.files)) {
      const host = wp.hostPath(path);
      const after = statSync(host).size;
      expect(after, name).toBeLessThan(before[name]?.size ?? 0);
      expect(state.files[name]).toMatchObject({
        size_before: before[name]?.size,
        size_after: after,
        original_sha256: before[name]?.hash,
      });
      // A WebP sibling is written when it is smaller than the compressed file, else recorded as false.
      const webp = ((state.files[name]?.siblings ?? {}) as Record<string, unknown>).webp;
      if (webp === false) {
        expect(existsSync(`${host}.webp`), `${name}.webp`).toBe(false);
      } else {
        expect(readFileSync(`${host}.webp`).subarray(8, 12).toString(), `${name}.webp`).toBe('WEBP');
        expect(statSync(`${host}.webp`).size).toBe((webp as { size: number }).size);
        expect(statSync(`${host}.webp`).size).toBeLessThan(after);
      }
      // The backup is outside uploads/ and is the original, byte for byte.
      const backup = host.replace('/wp-content/uploads/', '/wp-content/compresso-backups/');
      expect(sha256(backup)).toBe(before[name]?.hash);
    }
    expect(existsSync(`${wp.hostPath(first.files['dune.jpg'] ?? '')}.webp`)).toBe(true);
    expect(state.meta.filesize).toBe(statSync(wp.hostPath(first.files['dune.jpg'] ?? '')).size);
  });

  it('delivers the siblings as <picture> in a rendered post and through wp_get_attachment_image, the <img> kept whole', async () => {
    const { value } = await wp.php<{ link: string; attachment: string; off: string }>(`
      $large = wp_get_attachment_image_url( ${first.id}, 'large' );
      $post = wp_insert_post( array(
        'post_title' => 'Dune', 'post_status' => 'publish', 'post_author' => 1,
        'post_content' => '<!-- wp:image {"id":${first.id},"sizeSlug":"large"} --><figure class="wp-block-image size-large"><img src="' . $large . '" alt="Dunes" class="wp-image-${first.id}" style="border-radius:4px"/></figure><!-- /wp:image -->',
      ) );
      $attachment = wp_get_attachment_image( ${first.id}, 'medium', false, array( 'class' => 'theme-hero' ) );
      add_filter( 'compresso_picture_enabled', '__return_false' );
      compresso_test_out( array( 'link' => get_permalink( $post ), 'attachment' => $attachment, 'off' => wp_get_attachment_image( ${first.id}, 'medium' ) ) );`);
    const html = await (await fetch(value.link)).text();
    const picture = /<picture class="compresso-picture">(.*?)<\/picture>/s.exec(html)?.[1];
    expect(picture, 'a <picture> in the rendered post').toBeDefined();
    const source = /<source type="image\/webp" srcset="([^"]+)"(?: sizes="[^"]+")?>/.exec(picture ?? '');
    expect(source).not.toBeNull();
    const img = /<img [^>]*>/.exec(picture ?? '')?.[0] ?? '';
    // One candidate per width of the <img>'s srcset: the sibling where there is one, else the JPEG.
    const widths = (text: string) => text.split(', ').map((candidate) => candidate.split(' ')[1]);
    expect(widths(source?.[1] ?? '')).toEqual(widths(/srcset="([^"]+)"/.exec(img)?.[1] ?? ''));
    const urls = (source?.[1] ?? '')
      .split(', ')
      .map((candidate) => candidate.split(' ')[0] ?? '')
      .filter((url) => url.endsWith('.webp'));
    expect(urls.length).toBeGreaterThanOrEqual(2);
    for (const url of urls) expect(url).toMatch(/\.jpg\.webp$/);
    expect(img).toContain(`wp-image-${first.id}`);
    expect(img).toContain('style="border-radius:4px"');
    expect(img).toContain('alt="Dunes"');
    expect(img).toMatch(/src="[^"]+\.jpg"/);
    // The sibling the browser will ask for is served as WebP by the site.
    const webp = Buffer.from(await (await fetch(urls[0] ?? '')).arrayBuffer());
    expect(webp.subarray(8, 12).toString()).toBe('WEBP');
    expect(value.attachment).toMatch(
      /^<picture class="compresso-picture"><source type="image\/webp" srcset="[^"]+\.jpg\.webp/,
    );
    expect(value.attachment).toContain('class="theme-hero"');
    expect(value.off).toMatch(/^<img /);
  });

  it('sends nothing again for files already compressed (a regenerate with "update" queues, then skips)', async () => {
    const calls = compressCalls();
    const { value } = await wp.php<{ status: string; requests: number }>(`
      $meta = wp_get_attachment_metadata( ${first.id} );
      apply_filters( 'wp_generate_attachment_metadata', $meta, ${first.id}, 'update' );
      wp_unschedule_hook( Compresso_Optimizer::CRON_HOOK );
      compresso_test_out( Compresso_Optimizer::optimize( ${first.id} ) );`);
    expect(value.status).toBe('done');
    expect(value.requests).toBe(Object.keys(first.files).length * 2);
    expect(compressCalls()).toBe(calls);
  });

  it("runs an upload's compression at once through its own runner while WP-Cron is held by a long core run", async () => {
    // What a busy site's WP-Cron looks like to an upload: a run of core's due events (update checks, Site
    // Health's tests) holds doing_cron, so spawn_cron() starts nothing. Every request here keeps that
    // lock fresh, so WP-Cron cannot run until the test ends: only the plugin's runner can do the work.
    const holdCron = `set_transient( 'doing_cron', sprintf( '%.22F', microtime( true ) ) );`;
    await wp.php(`${holdCron} compresso_test_out( 1 );`);
    const second = await upload('dune-runner.jpg');
    expect(second.status).toBe('queued');
    const started = performance.now();
    let state = await stateOf(second.id);
    while (state.status === 'queued' && performance.now() - started < 480_000) {
      const { value } = await wp.php<{ status: string; cronLock: number }>(
        `${holdCron} $s = Compresso_Optimizer::state( ${second.id} );
        compresso_test_out( array( 'status' => $s['status'], 'cronLock' => (float) get_transient( 'doing_cron' ) ) );`,
      );
      expect(value.cronLock).toBeGreaterThan(0);
      if (value.status !== 'queued') state = await stateOf(second.id);
    }
    if (state.status === 'queued')
      throw new Error(`still queued: ${await backgroundDiagnostics(wp, second.id)}`);
    process.stdout.write(
      `upload to optimized with WP-Cron held: ${Math.round(performance.now() - started)} ms after the upload returned\n`,
    );
    expect(state.error).toBeNull();
    expect(state.status).toBe('done');
    expect(state.requests).toBe(Object.keys(second.files).length * 2);
    const { value } = await wp.php<{ scheduled: boolean; lock: number }>(`
      compresso_test_out( array(
        'scheduled' => (bool) wp_next_scheduled( Compresso_Optimizer::CRON_HOOK, array( ${second.id} ) ),
        'lock' => compresso_lock_held_since( Compresso_Runner::LOCK_OPTION ),
      ) );
      delete_transient( 'doing_cron' );`);
    expect(value).toEqual({ scheduled: false, lock: 0 });
  });

  it('starts the runner only for a signed, unexpired request', async () => {
    const { value } = await wp.php<{ expires: number; token: string; old: number; oldToken: string }>(`
      $expires = time() + 60; $old = time() - 1;
      compresso_test_out( array( 'expires' => $expires, 'token' => Compresso_Runner::token( $expires ),
        'old' => $old, 'oldToken' => Compresso_Runner::token( $old ) ) );`);
    const start = (expires: number, token: string) =>
      fetch(`${wp.url}/wp-admin/admin-ajax.php`, {
        method: 'POST',
        body: new URLSearchParams({ action: 'compresso_run', expires: String(expires), token }),
      });
    expect((await start(value.expires, value.token)).status).toBe(200);
    expect(
      (
        await start(
          value.expires,
          value.token.replace(/.$/, (c) => (c === '0' ? '1' : '0')),
        )
      ).status,
    ).toBe(403);
    expect((await start(value.expires + 1, value.token)).status).toBe(403);
    expect((await start(value.old, value.oldToken)).status).toBe(403);
  });

  it('locks with one winner: a held lock is refused, a stale one taken over, a released one free', async () => {
    const { value } = await wp.php<boolean[]>(`
      global $wpdb;
      $steps = array();
      $steps[] = compresso_lock( 'compresso_test_lock', 300 );
      $steps[] = compresso_lock( 'compresso_test_lock', 300 );
      $wpdb->update( $wpdb->options, array( 'option_value' => (string) ( time() - 301 ) ), array( 'option_name' => 'compresso_test_lock' ) );
      $steps[] = compresso_lock( 'compresso_test_lock', 300 );
      $steps[] = compresso_lock_held_since( 'compresso_test_lock' ) >= time() - 1;
      compresso_unlock( 'compresso_test_lock' );
      $steps[] = 0 === compresso_lock_held_since( 'compresso_test_lock' );
      $steps[] = compresso_lock( 'compresso_test_lock', 300 );
      compresso_unlock( 'compresso_test_lock' );
      compresso_test_out( $steps );`);
    expect(value).toEqual([true, false, true, true, true, true]);
  });

  it('restores every file byte for byte and removes the WebP siblings and backups', async () => {
    const { value } = await wp.php<{ restored: unknown; meta: unknown }>(`
      $r = Compresso_Optimizer::restore( ${first.id} );
      compresso_test_out( array( 'restored' => is_wp_error( $r ) ? $r->get_error_message() : $r, 'meta' => get_post_meta( ${first.id}, '_compresso', true ) ) );`);
    expect(value).toEqual({ restored: true, meta: '' });
    for (const [name, path] of Object.entries(first.files)) {
      const host = wp.hostPath(path);
      expect(sha256(host), name).toBe(before[name]?.hash);
      expect(existsSync(`${host}.webp`)).toBe(false);
      expect(existsSync(host.replace('/wp-content/uploads/', '/wp-content/compresso-backups/'))).toBe(false);
    }
  });

  it('leaves every file untouched and records the error when the server cannot be reached', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const closed = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    await wp.php(
      `${configure(closed)} wp_unschedule_hook( Compresso_Optimizer::CRON_HOOK ); compresso_test_out( 1 );`,
    );
    const { value } = await wp.php<{ status: string; error: { code: string; message: string } }>(`
      wp_unschedule_hook( Compresso_Optimizer::CRON_HOOK );
      compresso_test_out( Compresso_Optimizer::optimize( ${first.id} ) );`);
    expect(value.status).toBe('error');
    expect(value.error.code).toBe('CONNECTION_ERROR');
    expect(value.error.message).toContain(closed);
    for (const [name, path] of Object.entries(first.files))
      expect(sha256(wp.hostPath(path)), name).toBe(before[name]?.hash);
  });

  it('uninstall removes the options, the records and the scheduled jobs, and keeps the backups', async () => {
    const { value } = await wp.php<Record<string, unknown>>(
      `require_once ABSPATH . 'wp-admin/includes/plugin.php';
      Compresso_Optimizer::queue( ${first.id} );
      Compresso_Backups::keep( get_attached_file( ${first.id} ) );
      deactivate_plugins( '${PLUGIN_FILE}' );
      uninstall_plugin( '${PLUGIN_FILE}' );
      compresso_test_out( array(
        'settings' => get_option( 'compresso_settings', 'gone' ),
        'meta' => get_post_meta( ${first.id}, '_compresso', true ),
        'pending' => get_post_meta( ${first.id}, '_compresso_pending', true ),
        'scheduled' => wp_next_scheduled( 'compresso_optimize_attachment', array( ${first.id} ) ),
        'sweep' => array( get_option( 'compresso_sweep_after', 'gone' ), get_option( 'compresso_sweep_lock', 'gone' ) ),
      ) );`,
      { asAdmin: true },
    );
    expect(value).toEqual({
      settings: 'gone',
      meta: '',
      pending: '',
      scheduled: false,
      sweep: ['gone', 'gone'],
    });
    const backup = wp
      .hostPath(first.files['dune.jpg'] ?? '')
      .replace('/wp-content/uploads/', '/wp-content/compresso-backups/');
    expect(sha256(backup)).toBe(before['dune.jpg']?.hash);
  });
});
