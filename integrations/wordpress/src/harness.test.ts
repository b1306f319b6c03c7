// The test harness itself: a real WordPress boots offline with the plugin mounted, and PHP inside it
// reaches a real Compresso server on loopback through the WordPress HTTP API.
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PHP_VERSION, PLUGIN_FILE, startWordPress, type WordPress } from './testing/wordpress.ts';

let wp: WordPress;
let api: TestServer;
let key: string;

beforeAll(async () => {
  api = await startTestServer();
  key = (await proAccount(api.db, 'harness@example.com')).key;
  wp = await startWordPress();
  process.stdout.write(`WordPress ${wp.url} booted in ${wp.bootMs} ms\n`);
}, 300_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
});

describe('WordPress on Playground', { timeout: 180_000 }, () => {
  it('runs the bundled WordPress on the pinned PHP, with GD able to write WebP and AVIF', async () => {
    const { value } = await wp.php<Record<string, unknown>>(`
      compresso_test_out( array(
        'wp' => get_bloginfo( 'version' ),
        'php' => PHP_VERSION,
        'webp' => function_exists( 'imagewebp' ),
        'avif' => function_exists( 'imageavif' ),
        'installed' => is_blog_installed(),
      ) );`);
    expect(value).toMatchObject({
      wp: expect.stringMatching(/^6\.5\./),
      webp: true,
      avif: true,
      installed: true,
    });
    expect(String(value.php).startsWith(`${PHP_VERSION}.`)).toBe(true);
  });

  it('sees the mounted plugin and activates it', async () => {
    const { value } = await wp.php<{ listed: boolean; activated: unknown; active: boolean }>(
      `require_once ABSPATH . 'wp-admin/includes/plugin.php';
      $listed = array_key_exists( '${PLUGIN_FILE}', get_plugins() );
      $result = activate_plugin( '${PLUGIN_FILE}' );
      compresso_test_out( array(
        'listed' => $listed,
        'activated' => is_wp_error( $result ) ? $result->get_error_message() : $result,
        'active' => is_plugin_active( '${PLUGIN_FILE}' ),
      ) );`,
      { asAdmin: true },
    );
    expect(value).toEqual({ listed: true, activated: null, active: true });
  });

  it('locks a file opened read-only with flock() as flock(2) does (what OPcache needs to read its file cache)', async () => {
    // Shared and exclusive, on the WordPress tree (mounted from the host) and on OPcache's own cache
    // directory; before the harness's fix to @php-wasm/node the shared lock failed (php-wasm-flock.ts).
    const { value } = await wp.php<Record<string, boolean[]>>(`
      $out = array();
      $cached = glob( ini_get( 'opcache.file_cache' ) . '/*/wordpress/wp-settings.php.bin' );
      foreach ( array( 'tree' => ABSPATH . 'wp-settings.php', 'opcache' => $cached ? $cached[0] : '' ) as $label => $path ) {
        $handle = fopen( $path, 'r' );
        $out[ $label ] = $handle ? array( flock( $handle, LOCK_SH ), flock( $handle, LOCK_UN ), flock( $handle, LOCK_EX ), flock( $handle, LOCK_UN ) ) : array();
      }
      compresso_test_out( $out );`);
    expect(value).toEqual({ tree: [true, true, true, true], opcache: [true, true, true, true] });
  });

  it('serves the site over HTTP on loopback', async () => {
    const response = await fetch(`${wp.url}/`);
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('<html');
  });

  it('reaches the Compresso server from PHP with wp_remote_get; wp_safe_remote_get refuses loopback', async () => {
    const { value } = await wp.php<{ status: number; body: Record<string, unknown>; safe: string }>(`
      $response = wp_remote_get( '${api.url}/api/v1/usage', array(
        'headers' => array( 'Authorization' => 'Bearer ${key}' ),
        'timeout' => 10,
      ) );
      $safe = wp_safe_remote_get( '${api.url}/api/v1/usage' );
      compresso_test_out( array(
        'status' => wp_remote_retrieve_response_code( $response ),
        'body' => json_decode( wp_remote_retrieve_body( $response ), true ),
        'safe' => is_wp_error( $safe ) ? $safe->get_error_code() : 'allowed',
      ) );`);
    expect(value.status).toBe(200);
    expect(value.body).toMatchObject({ plan: 'pro', used: 1 });
    expect(value.safe).toBe('http_request_failed');
  });
});
