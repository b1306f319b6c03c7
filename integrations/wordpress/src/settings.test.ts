// The settings screen in a real WordPress, driven over HTTP as a logged-in administrator: activation
// notice, the form, saving with the key checked live against a real Compresso server, validation,
// capability and nonce checks, and the key encrypted at rest.
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fieldValue, sessionFor, type WpSession } from './testing/browser.ts';
import { PLUGIN_FILE, startWordPress, type WordPress } from './testing/wordpress.ts';

let wp: WordPress;
let api: TestServer;
let key: string;
let admin: WpSession;

const SETTINGS = 'wp-admin/options-general.php?page=compresso';

async function save(session: WpSession, fields: Record<string, string>, nonce?: string) {
  const form: Record<string, string> = {
    action: 'compresso_save_settings',
    _wp_http_referer: `/${SETTINGS}`,
  };
  if (nonce !== undefined) form._wpnonce = nonce;
  for (const [name, value] of Object.entries(fields)) form[`compresso[${name}]`] = value;
  return session.request('wp-admin/admin-post.php', { form });
}

async function nonceOf(session: WpSession): Promise<string> {
  const page = await session.request(SETTINGS);
  const nonce = fieldValue(page.text, '_wpnonce');
  if (!nonce) throw new Error(`no nonce on the settings screen:\n${page.text.slice(0, 3000)}`);
  return nonce;
}

async function stored() {
  return (
    await wp.php<{ settings: Record<string, unknown>; key: string; notice: unknown }>(`
      compresso_test_out( array(
        'settings' => get_option( 'compresso_settings' ),
        'key' => compresso_get_api_key(),
        'notice' => get_option( 'compresso_show_setup_notice' ),
      ) );`)
  ).value;
}

beforeAll(async () => {
  api = await startTestServer();
  key = (await proAccount(api.db, 'settings@example.com')).key;
  wp = await startWordPress();
  await wp.php(
    `require_once ABSPATH . 'wp-admin/includes/plugin.php';
    $r = activate_plugin( '${PLUGIN_FILE}' );
    wp_create_user( 'subscriber', 'subscriber-pass', 'subscriber@example.com' );
    compresso_test_out( is_wp_error( $r ) ? $r->get_error_message() : 'ok' );`,
    { asAdmin: true },
  );
  admin = await sessionFor(wp, 'admin');
}, 300_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
});

describe('activation', { timeout: 180_000 }, () => {
  it('stores the defaults and shows a notice on the dashboard that leads to the settings', async () => {
    const dashboard = await admin.request('wp-admin/plugins.php');
    expect(dashboard.status, `redirected through ${dashboard.redirects.join(' ')}`).toBe(200);
    expect(dashboard.redirects.join(' ')).not.toContain('wp-login.php');
    expect(dashboard.text).toContain('compresso-setup-notice');
    expect(dashboard.text).toContain('options-general.php?page=compresso');
    const state = await stored();
    expect(state.settings).toMatchObject({ quality: 'auto', webp: true, backups: true, api_key: '' });
    expect(state.notice).toBe('1');
  });
});

describe('the settings screen', { timeout: 180_000 }, () => {
  it('shows every setting, a nonce, and never the key', async () => {
    const page = await admin.request(SETTINGS);
    expect(page.status).toBe(200);
    for (const name of [
      'server_url',
      'api_key',
      'quality',
      'max_dimension',
      'webp',
      'avif',
      'png_to_jpeg',
      'lazy_load',
      'backups',
    ]) {
      expect(page.text).toContain(`name="compresso[${name}]"`);
    }
    expect(fieldValue(page.text, '_wpnonce')).toMatch(/^[0-9a-f]{10}$/);
    expect(page.text).not.toContain('compresso-setup-notice');
  });

  it('refuses a post without a valid nonce, and a user without manage_options', async () => {
    const noNonce = await save(admin, { server_url: api.url, api_key: key });
    expect(noNonce.status).toBe(403);
    const subscriber = await sessionFor(wp, 'subscriber');
    const refused = await save(subscriber, { server_url: api.url, api_key: key }, await nonceOf(admin));
    expect(refused.status).toBe(403);
    expect((await subscriber.request(SETTINGS)).status).toBe(403);
    expect((await stored()).key).toBe('');
  });

  it('names the field and what was expected for bad input, and stores nothing', async () => {
    const response = await save(
      admin,
      { server_url: 'ftp://x', quality: '101', max_dimension: 'big' },
      await nonceOf(admin),
    );
    expect(response.status, response.text.slice(0, 1000)).toBe(302);
    const page = await admin.request(SETTINGS);
    expect(page.text).toContain(
      'Quality: expected &quot;auto&quot; or a whole number from 1 to 100, received &quot;101&quot;',
    );
    expect(page.text).toContain('Server URL: expected an http:// or https:// URL');
    expect(page.text).toContain('Maximum dimension: expected a whole number of pixels');
    expect((await stored()).settings).toMatchObject({ quality: 'auto', server_url: '' });
  });

  it('does not store a key the server rejects, and says why', async () => {
    await save(
      admin,
      { server_url: api.url, api_key: 'cmp_not_a_real_key_0000', quality: '70' },
      await nonceOf(admin),
    );
    const page = await admin.request(SETTINGS);
    expect(page.text).toContain('INVALID_API_KEY');
    const state = await stored();
    expect(state.key).toBe('');
    expect(state.settings).toMatchObject({ quality: 70, server_url: '' });
  });

  it('checks a good key live with /api/v1/usage, stores it encrypted, and retires the setup notice', async () => {
    const checks = () => api.logLines.filter((l) => l.path === '/api/v1/usage' && l.status === 200).length;
    const before = checks();
    await save(
      admin,
      {
        server_url: `${api.url}/`,
        api_key: key,
        quality: 'auto',
        max_dimension: '1920',
        webp: '1',
        avif: '1',
        backups: '1',
      },
      await nonceOf(admin),
    );
    const page = await admin.request(SETTINGS);
    expect(checks()).toBe(before + 1);
    expect(page.text).toMatch(/Connected\. Plan pro: \d+ of \d+ requests left today\./);
    expect(page.text).toContain('A key is saved (not shown)');
    expect(page.text).not.toContain(key);
    const state = await stored();
    expect(state.key).toBe(key);
    expect(state.settings).toMatchObject({
      server_url: api.url,
      quality: 'auto',
      max_dimension: 1920,
      webp: true,
      avif: true,
      png_to_jpeg: false,
      lazy_load: false,
      backups: true,
    });
    expect(String(state.settings.api_key)).toMatch(/^v1:/);
    expect(JSON.stringify(state.settings)).not.toContain(key);
    expect(state.notice).toBe(false);
    expect((await admin.request('wp-admin/plugins.php')).text).not.toContain('compresso-setup-notice');
  });

  it('keeps the saved key when the field is left empty', async () => {
    await save(admin, { server_url: api.url, api_key: '', quality: '82', webp: '1' }, await nonceOf(admin));
    const state = await stored();
    expect(state.key).toBe(key);
    expect(state.settings).toMatchObject({ quality: 82, avif: false });
  });
});

describe('sizes to compress, the cost, and backups on uninstall', { timeout: 300_000 }, () => {
  it('shows a checkbox per registered size, the cost, and the uninstall switch with its warning', async () => {
    const page = await admin.request(SETTINGS);
    for (const size of ['thumbnail', 'medium', 'medium_large', 'large']) {
      expect(page.text).toMatch(
        new RegExp(`name="compresso\\[sizes\\]\\[${size}\\]" value="1"\\s+checked='checked'`),
      );
    }
    expect(page.text).toContain('name="compresso[delete_backups_on_uninstall]"');
    expect(page.text).not.toMatch(/name="compresso\[delete_backups_on_uninstall\]" value="1"\s+checked/);
    expect(page.text).toContain('deletes them for good and no image can be restored afterwards');
    const stats = (
      await wp.php<{ perUpload: number; sizes: number }>(`
      $s = Compresso_Bulk::stats();
      compresso_test_out( array( 'perUpload' => $s['requests_per_upload'], 'sizes' => count( $s['sizes'] ) ) );`)
    ).value;
    // Every registered size on by default; WebP on, AVIF off (the last save): 2 requests per file.
    expect(stats.sizes).toBeGreaterThanOrEqual(4);
    expect(stats.perUpload).toBe((1 + stats.sizes) * 2);
    expect(page.text).toContain(`One upload costs up to ${stats.perUpload} requests with the saved settings`);
  });

  it('names the field for an unknown size and stores nothing', async () => {
    await save(admin, { sizes_field: '1', 'sizes][no_such_size': '1', webp: '1' }, await nonceOf(admin));
    const page = await admin.request(SETTINGS);
    expect(page.text).toContain(
      'Image sizes to compress: expected sizes this site registers (thumbnail, medium, medium_large, large',
    );
    expect(page.text).toContain('received &quot;no_such_size&quot;');
    expect((await stored()).settings.sizes).toEqual([]);
  });

  it('stores the chosen sizes; the optimizer, the cost and the days at the daily quota follow them', async () => {
    await save(
      admin,
      {
        server_url: api.url,
        api_key: '',
        webp: '1',
        sizes_field: '1',
        'sizes][thumbnail': '1',
        'sizes][medium': '1',
      },
      await nonceOf(admin),
    );
    const sizes = (await stored()).settings.sizes as Record<string, boolean>;
    expect(sizes).toMatchObject({ thumbnail: true, medium: true, medium_large: false, large: false });
    // An image with three generated sizes on disk (the optimizer's file list is what it sends).
    const result = (
      await wp.php<{ chosen: string[]; all: string[]; perUpload: number; library: number; sizes: string[] }>(`
      $dir = wp_upload_dir()['basedir'];
      foreach ( array( 'wpsizes.jpg', 'wpsizes-150x150.jpg', 'wpsizes-300x200.jpg', 'wpsizes-1024x683.jpg' ) as $f ) {
        file_put_contents( $dir . '/' . $f, 'x' );
      }
      $id = wp_insert_attachment( array( 'post_mime_type' => 'image/jpeg', 'post_title' => 'wpsizes', 'post_status' => 'inherit' ), $dir . '/wpsizes.jpg' );
      update_post_meta( $id, '_wp_attachment_metadata', array(
        'width' => 1600, 'height' => 1067, 'file' => 'wpsizes.jpg',
        'sizes' => array(
          'thumbnail' => array( 'file' => 'wpsizes-150x150.jpg', 'width' => 150, 'height' => 150, 'mime-type' => 'image/jpeg' ),
          'medium' => array( 'file' => 'wpsizes-300x200.jpg', 'width' => 300, 'height' => 200, 'mime-type' => 'image/jpeg' ),
          'large' => array( 'file' => 'wpsizes-1024x683.jpg', 'width' => 1024, 'height' => 683, 'mime-type' => 'image/jpeg' ),
        ),
      ) );
      update_option( 'compresso_quota', array( 'plan' => 'pro', 'limit' => 4, 'remaining' => 2, 'reset_at' => time() + 3600 ), false );
      $s = Compresso_Bulk::stats();
      compresso_test_out( array(
        'chosen' => array_keys( Compresso_Optimizer::files( $id, compresso_get_settings() ) ),
        'all' => array_keys( Compresso_Optimizer::files( $id ) ),
        'perUpload' => $s['requests_per_upload'],
        'library' => $s['requests_for_library'],
        'sizes' => $s['sizes'],
      ) );`)
    ).value;
    expect(result.chosen).toEqual(['wpsizes.jpg', 'wpsizes-150x150.jpg', 'wpsizes-300x200.jpg']);
    expect(result.all).toHaveLength(4);
    expect(result.sizes).toEqual(['thumbnail', 'medium']);
    expect(result.perUpload).toBe(6); // (original + 2 sizes) × (compressed + WebP)
    expect(result.library).toBe(6); // the one image's 3 chosen files × 2
    const page = await admin.request(SETTINGS);
    expect(page.text).toMatch(/name="compresso\[sizes\]\[large\]" value="1"\s+\/>/);
    expect(page.text).toContain(
      'One upload costs up to 6 requests with the saved settings: the original and 2 sizes',
    );
    // 6 requests, 2 left today, 4 a day: today and 1 more day.
    expect(page.text).toContain(
      'takes 6 requests (1 images): today and 1 more day at your plan&#039;s 4 requests a day.',
    );
  });

  it('uninstall keeps the backups unless the owner ticked the switch', async () => {
    const uninstall = () =>
      wp.php<boolean>(
        `require_once ABSPATH . 'wp-admin/includes/plugin.php';
        $dir = WP_CONTENT_DIR . '/compresso-backups/2026';
        if ( ! is_dir( $dir ) ) { wp_mkdir_p( $dir ); file_put_contents( $dir . '/a.jpg', 'original' ); }
        deactivate_plugins( '${PLUGIN_FILE}' );
        uninstall_plugin( '${PLUGIN_FILE}' );
        compresso_test_out( is_file( $dir . '/a.jpg' ) );`,
        { asAdmin: true },
      );
    expect((await uninstall()).value).toBe(true);
    await wp.php(
      `require_once ABSPATH . 'wp-admin/includes/plugin.php';
      compresso_test_out( activate_plugin( '${PLUGIN_FILE}' ) );`,
      { asAdmin: true },
    );
    await save(admin, { webp: '1', delete_backups_on_uninstall: '1' }, await nonceOf(admin));
    expect((await stored()).settings.delete_backups_on_uninstall).toBe(true);
    expect((await admin.request(SETTINGS)).text).toMatch(
      /name="compresso\[delete_backups_on_uninstall\]" value="1"\s+checked='checked'/,
    );
    expect((await uninstall()).value).toBe(false);
    expect(
      (await wp.php<boolean>(`compresso_test_out( is_dir( WP_CONTENT_DIR . '/compresso-backups' ) );`)).value,
    ).toBe(false);
  });
});
