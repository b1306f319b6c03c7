// Lazy loading, smart PNG-to-JPEG, re-compressing an image edited in the WordPress image editor, AVIF
// siblings in <picture>, and the media library's column and actions — in one real WordPress (one boot:
// boots are slow) against a real Compresso server.
//
// The background path (upload → the plugin's runner → job) is covered by upload.test.ts; here a
// must-use plugin turns the runner off (compresso_use_runner) and the putting back of lost events
// (compresso_requeue_lost: the uploads here are queued with their events removed on purpose), and points
// the cron loopback at a closed port, so each test runs the job itself when it wants to and nothing runs
// concurrently with its assertions.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionFor, type WpSession } from './testing/browser.ts';
import { activatePlugin, startWordPress, type WordPress } from './testing/wordpress.ts';

const CORPUS = join(import.meta.dirname, '../../../../shared/corpus');

let wp: WordPress;
let api: TestServer;
let key: string;
let admin: WpSession;

interface Upload {
  id: number;
  files: Record<string, string>;
  url: string;
  medium: string;
}
const uploads: Record<string, Upload> = {};

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const compressCalls = () => api.logLines.filter((l) => l.path === '/api/v1/compress').length;
const backupOf = (host: string) => host.replace('/wp-content/uploads/', '/wp-content/compresso-backups/');

/** Every <img> tag of a page, by its alt text (or its position when it has none). */
function imagesByAlt(html: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [index, tag] of (html.match(/<img\s[^>]*>/g) ?? []).entries()) {
    const alt = /\salt="([^"]*)"/.exec(tag)?.[1];
    out.set(alt || `#${index}`, tag);
  }
  return out;
}
const attrOf = (tag: string, name: string) => new RegExp(`\\s${name}="([^"]*)"`).exec(tag)?.[1];
function attributeNames(tag: string): string[] {
  return [...tag.replace(/^<img/, '').matchAll(/\s([a-zA-Z-]+)(?==)/g)].map((m) => m[1] ?? '');
}

async function settings(values: Record<string, unknown>) {
  await wp.php(
    `update_option( 'compresso_settings', array_merge( compresso_get_settings(), json_decode( '${JSON.stringify(values)}', true ) ) );
    compresso_test_out( 1 );`,
  );
}

async function optimize(id: number) {
  return (
    await wp.php<{
      status: string;
      requests: number;
      error: { code: string; message: string } | null;
      files: Record<string, Record<string, unknown>>;
      png_to_jpeg?: Record<string, unknown>;
    }>(
      `wp_unschedule_hook( Compresso_Optimizer::CRON_HOOK ); compresso_test_out( Compresso_Optimizer::optimize( ${id} ) );`,
    )
  ).value;
}

async function attachment(id: number) {
  return (
    await wp.php<{
      file: string;
      mime: string;
      meta: { file: string; sizes: Record<string, { file: string; 'mime-type': string; filesize?: number }> };
      files: Record<string, string>;
      state: Record<string, unknown>;
    }>(`compresso_test_out( array(
      'file' => get_attached_file( ${id} ),
      'mime' => get_post_mime_type( ${id} ),
      'meta' => wp_get_attachment_metadata( ${id} ),
      'files' => Compresso_Optimizer::files( ${id} ),
      'state' => Compresso_Optimizer::state( ${id} ),
    ) );`)
  ).value;
}

beforeAll(async () => {
  api = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 20 * 1024 * 1024 } });
  key = (await proAccount(api.db, 'media@example.com')).key;
  wp = await startWordPress({ mounts: [{ hostPath: CORPUS, vfsPath: '/corpus' }] });
  process.stdout.write(`boot: ${wp.bootMs} ms\n`);
  // Test fixtures as a must-use plugin: no runner and the cron loopback goes nowhere; a dynamic block that prints
  // its own <img> (no width/height); a late the_content filter that appends an attachment image.
  const mu = wp.hostPath('/wordpress/wp-content/mu-plugins/compresso-test-fixtures.php');
  mkdirSync(dirname(mu), { recursive: true });
  writeFileSync(
    mu,
    `<?php
    add_filter( 'compresso_use_runner', '__return_false' );
    add_filter( 'compresso_requeue_lost', '__return_false' );
    add_filter( 'cron_request', function ( $request ) { $request['url'] = 'http://127.0.0.1:9/wp-cron.php'; return $request; } );
    add_action( 'init', function () {
      register_block_type( 'compresso-test/raw', array(
        'attributes' => array( 'src' => array( 'type' => 'string' ) ),
        'render_callback' => function ( $attributes ) { return '<p><img src="' . esc_url( $attributes['src'] ) . '" alt="raw-block"></p>'; },
      ) );
    } );
    add_filter( 'the_content', function ( $content ) {
      $id = (int) get_option( 'compresso_test_append' );
      return $id && is_singular() ? $content . wp_get_attachment_image( $id, 'thumbnail', false, array( 'alt' => 'appended' ) ) : $content;
    }, 20 );
`,
  );
  await activatePlugin(wp, `wp_create_user( 'subscriber', 'subscriber-pass', 'subscriber@example.com' );`);
  await settings({
    server_url: api.url,
    quality: 75,
    webp: true,
    avif: false,
    backups: true,
    max_dimension: 0,
  });
  await wp.php(
    `update_option( 'compresso_settings', array_merge( compresso_get_settings(), array( 'api_key' => compresso_encrypt_secret( '${key}' ) ) ) ); compresso_test_out( compresso_is_connected() );`,
  );
  // The uploads every test uses, in one request: two JPEGs, an opaque PNG photo, the same photo saved
  // with an alpha channel that is fully opaque, and a PNG with real transparency.
  const started = performance.now();
  const { value } = await wp.php<Record<string, Upload>>(
    `require_once ABSPATH . 'wp-admin/includes/image.php';
    require_once ABSPATH . 'wp-admin/includes/file.php';
    require_once ABSPATH . 'wp-admin/includes/media.php';
    $rgba = wp_tempnam( 'rgba.png' );
    $im = imagecreatefrompng( '/corpus/photo-skimage-chelsea.png' );
    $true = imagecreatetruecolor( imagesx( $im ), imagesy( $im ) );
    imagealphablending( $true, false );
    imagesavealpha( $true, true );
    imagecopy( $true, $im, 0, 0, 0, 0, imagesx( $im ), imagesy( $im ) );
    imagepng( $true, $rgba );
    $sources = array(
      'rocket' => array( 'rocket.jpg', '/corpus/photo-skimage-rocket.jpg' ),
      'edited' => array( 'edited.jpg', '/corpus/photo-skimage-rocket.jpg' ),
      'chelsea' => array( 'chelsea.png', '/corpus/photo-skimage-chelsea.png' ),
      'rgba' => array( 'chelsea-rgba.png', $rgba ),
      'folder' => array( 'folder.png', '/corpus/icon-oxygen-folder-red.png' ),
    );
    $out = array();
    foreach ( $sources as $label => $source ) {
      $tmp = wp_tempnam( $source[0] );
      copy( $source[1], $tmp );
      $id = media_handle_sideload( array( 'name' => $source[0], 'tmp_name' => $tmp ), 0 );
      if ( is_wp_error( $id ) ) { compresso_test_out( array( 'error' => $id->get_error_message() ) ); return; }
      wp_unschedule_hook( Compresso_Optimizer::CRON_HOOK );
      $out[ $label ] = array( 'id' => $id, 'files' => Compresso_Optimizer::files( $id ), 'url' => wp_get_attachment_url( $id ), 'medium' => wp_get_attachment_image_url( $id, 'medium' ) );
    }
    compresso_test_out( $out );`,
    { asAdmin: true },
  );
  process.stdout.write(`five uploads: ${Math.round(performance.now() - started)} ms\n`);
  Object.assign(uploads, value);
  admin = await sessionFor(wp, 'admin');
}, 400_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
});

describe('lazy loading with core', { timeout: 300_000 }, () => {
  const medium = () => uploads.rocket?.medium ?? '';
  const thumb = () => (uploads.rocket?.medium ?? '').replace('-300x200', '-150x150');
  const block = (alt: string) =>
    `<!-- wp:image {"id":${uploads.rocket?.id},"sizeSlug":"medium"} --><figure class="wp-block-image size-medium"><img src="${medium()}" alt="${alt}" class="wp-image-${uploads.rocket?.id}"/></figure><!-- /wp:image -->`;
  const raw = (alt: string) => `<!-- wp:html --><p><img src="${thumb()}" alt="${alt}"></p><!-- /wp:html -->`;
  let link = '';

  it('marks the first image core cannot measure as the LCP image, lazy-loads the late ones, never duplicates an attribute', async () => {
    const content = [
      raw('first-raw'),
      block('core-1'),
      block('core-2'),
      `<!-- wp:compresso-test/raw {"src":"${thumb()}"} /-->`,
      raw('late-raw'),
      block('core-3'),
      raw('kept-eager" loading="eager'),
    ].join('\n');
    const { value } = await wp.php<string>(`
      update_option( 'compresso_test_append', ${uploads.rocket?.id} );
      $post = wp_insert_post( array( 'post_title' => 'Lazy', 'post_status' => 'publish', 'post_author' => 1, 'post_content' => '${content.replace(/'/g, "\\'")}' ) );
      compresso_test_out( get_permalink( $post ) );`);
    link = value;
    const html = await (await fetch(link)).text();
    const images = imagesByAlt(html);
    for (const alt of [
      'first-raw',
      'core-1',
      'core-2',
      'raw-block',
      'late-raw',
      'core-3',
      'kept-eager',
      'appended',
    ])
      expect(images.get(alt), `${alt} in the page`).toBeDefined();
    for (const [alt, tag] of images) {
      const names = attributeNames(tag);
      expect(new Set(names).size, `${alt}: ${tag}`).toBe(names.length);
      if (attrOf(tag, 'fetchpriority') === 'high') expect(attrOf(tag, 'loading'), alt).toBeUndefined();
    }
    const high = [...images].filter(([, tag]) => attrOf(tag, 'fetchpriority') === 'high').map(([alt]) => alt);
    expect(high).toEqual(['first-raw']);
    // Core's own choices stand: its next in-viewport images stay eager, its late one is lazy.
    expect(attrOf(images.get('core-1') ?? '', 'loading')).toBeUndefined();
    expect(attrOf(images.get('core-3') ?? '', 'loading')).toBe('lazy');
    // What core leaves bare: a block's own <img>, a late raw <img>, an attachment image appended after
    // core's content filter.
    for (const alt of ['raw-block', 'late-raw', 'appended']) {
      expect(attrOf(images.get(alt) ?? '', 'loading'), alt).toBe('lazy');
      expect(attrOf(images.get(alt) ?? '', 'decoding'), alt).toBe('async');
    }
    for (const alt of ['core-1', 'core-2', 'core-3'])
      expect(attrOf(images.get(alt) ?? '', 'decoding')).toBe('async');
    // An author's own loading="eager" is kept.
    expect(attrOf(images.get('kept-eager') ?? '', 'loading')).toBe('eager');
  });

  it('with the setting off, the images core misses stay bare (what the plugin adds is its own)', async () => {
    await settings({ lazy_load: false });
    const images = imagesByAlt(await (await fetch(link)).text());
    await settings({ lazy_load: true });
    // Core alone: the first image it can measure takes fetchpriority, its third counted image stays
    // eager, and what it cannot see gets no loading attribute (the appended one nothing at all).
    for (const alt of ['raw-block', 'late-raw', 'appended'])
      expect(attrOf(images.get(alt) ?? '', 'loading'), alt).toBeUndefined();
    expect(attrOf(images.get('appended') ?? '', 'decoding')).toBeUndefined();
    expect(attrOf(images.get('first-raw') ?? '', 'fetchpriority')).toBeUndefined();
    expect(attrOf(images.get('core-1') ?? '', 'fetchpriority')).toBe('high');
    expect(attrOf(images.get('core-3') ?? '', 'loading')).toBeUndefined();
  });

  it('keeps the featured image the only high-priority image, and lazy-loads widget images core never filters', async () => {
    const { value } = await wp.php<{ link: string; html: string; text: string; own: string }>(`
      delete_option( 'compresso_test_append' );
      $post = wp_insert_post( array( 'post_title' => 'Featured', 'post_status' => 'publish', 'post_author' => 1,
        'post_content' => '<!-- wp:html --><p><img src="${thumb()}" alt="after-featured"></p><!-- /wp:html -->' ) );
      set_post_thumbnail( $post, ${uploads.rocket?.id} );
      ob_start();
      the_widget( 'WP_Widget_Custom_HTML', array( 'title' => '', 'content' => '<img src="${thumb()}" alt="widget-html">' ) );
      $html = ob_get_clean();
      ob_start();
      the_widget( 'WP_Widget_Text', array( 'title' => '', 'text' => '<img src="${thumb()}" alt="widget-text">', 'filter' => false, 'visual' => false ) );
      $text = ob_get_clean();
      ob_start();
      the_widget( 'WP_Widget_Custom_HTML', array( 'title' => '', 'content' => '<img src="${thumb()}" alt="widget-own" loading="eager" decoding="sync">' ) );
      compresso_test_out( array( 'link' => get_permalink( $post ), 'html' => $html, 'text' => $text, 'own' => ob_get_clean() ) );`);
    const images = imagesByAlt(await (await fetch(value.link)).text());
    const high = [...images].filter(([, tag]) => attrOf(tag, 'fetchpriority') === 'high');
    expect(high).toHaveLength(1);
    expect(high[0]?.[1]).toContain(`wp-post-image`);
    expect(attrOf(high[0]?.[1] ?? '', 'loading')).toBeUndefined();
    expect(attrOf(images.get('after-featured') ?? '', 'fetchpriority')).toBeUndefined();
    for (const [name, html] of [
      ['widget-html', value.html],
      ['widget-text', value.text],
    ] as const) {
      const tag = imagesByAlt(html).get(name) ?? '';
      expect(attrOf(tag, 'loading'), `${name}: ${html}`).toBe('lazy');
      expect(attrOf(tag, 'decoding'), name).toBe('async');
    }
    const own = imagesByAlt(value.own).get('widget-own') ?? '';
    expect(attrOf(own, 'loading')).toBe('eager');
    expect(attrOf(own, 'decoding')).toBe('sync');
    expect(new Set(attributeNames(own)).size).toBe(attributeNames(own).length);
  });
});

describe('smart PNG-to-JPEG', { timeout: 400_000 }, () => {
  const before: Record<string, string> = {};
  let post = 0;
  let saving = 0;

  it('converts an opaque PNG photo and its sizes to JPEG, and follows it in post content and post meta', async () => {
    const chelsea = uploads.chelsea as Upload;
    for (const [name, path] of Object.entries(chelsea.files)) before[name] = sha256(wp.hostPath(path));
    expect(before['chelsea.png']).toBe(sha256(join(CORPUS, 'photo-skimage-chelsea.png')));
    const { value } = await wp.php<{ post: number; serialized: number; json: number }>(`
      $post = wp_insert_post( array( 'post_title' => 'Cat', 'post_status' => 'publish', 'post_author' => 1,
        'post_content' => '<!-- wp:image {"id":${chelsea.id},"sizeSlug":"medium"} --><figure class="wp-block-image size-medium"><img src="${chelsea.medium}" alt="Cat" class="wp-image-${chelsea.id}"/></figure><!-- /wp:image --><p><a href="${chelsea.url}">full size</a></p>' ) );
      $serialized = add_post_meta( $post, 'hero', array( 'image' => array( 'url' => '${chelsea.url}', 'id' => ${chelsea.id} ) ) );
      $json = add_post_meta( $post, '_builder_data', wp_slash( wp_json_encode( array( 'src' => '${chelsea.medium}' ) ) ) );
      compresso_test_out( array( 'post' => $post, 'serialized' => $serialized, 'json' => $json ) );`);
    post = value.post;
    expect(value.serialized).toBeGreaterThan(0);
    expect(value.json).toBeGreaterThan(0);
    await settings({ png_to_jpeg: true, png_to_jpeg_min_saving: 20, webp: true, avif: false });
    const calls = compressCalls();
    const state = await optimize(chelsea.id);
    expect(state.error).toBeNull();
    expect(state.status).toBe('done');
    expect(state.png_to_jpeg).toMatchObject({ converted: true });
    saving = Number(state.png_to_jpeg?.saving);
    process.stdout.write(
      `PNG-to-JPEG: ${Object.keys(chelsea.files).length} files, ${compressCalls() - calls} requests, main file ${saving}% smaller than the PNG\n`,
    );
    expect(saving).toBeGreaterThanOrEqual(20);
    const after = await attachment(chelsea.id);
    expect(after.mime).toBe('image/jpeg');
    expect(after.file).toMatch(/\/chelsea\.jpg$/);
    expect(after.meta.file).toMatch(/chelsea\.jpg$/);
    const sizes = Object.values(after.meta.sizes);
    expect(sizes.length).toBe(Object.keys(chelsea.files).length - 1);
    for (const size of sizes) {
      expect(size.file).toMatch(/\.jpg$/);
      expect(size['mime-type']).toBe('image/jpeg');
    }
    // One request decides (png_to_jpeg=true), one per size converts, one WebP per JPEG.
    const files = Object.values(after.files);
    expect(compressCalls() - calls).toBe(files.length * 2);
    for (const path of files) {
      const host = wp.hostPath(path);
      expect(readFileSync(host).subarray(0, 3).toString('hex'), path).toBe('ffd8ff');
      expect(existsSync(host.replace(/\.jpg$/, '.png')), `${path}: the PNG is gone`).toBe(false);
    }
    for (const [name, path] of Object.entries(chelsea.files)) {
      expect(sha256(backupOf(wp.hostPath(path))), `backup of ${name}`).toBe(before[name]);
      const jpeg = wp.hostPath(path).replace(/\.png$/, '.jpg');
      expect(statSync(jpeg).size, name).toBeLessThan(statSync(backupOf(wp.hostPath(path))).size);
    }
    const refs = await wp.php<{ content: string; hero: { image: { url: string } }; builder: string }>(`
      compresso_test_out( array( 'content' => get_post( ${post} )->post_content, 'hero' => get_post_meta( ${post}, 'hero', true ), 'builder' => get_post_meta( ${post}, '_builder_data', true ) ) );`);
    expect(refs.value.content).not.toContain('.png');
    expect(refs.value.content).toContain(chelsea.medium.replace(/\.png$/, '.jpg'));
    expect(refs.value.content).toContain(`href="${chelsea.url.replace(/\.png$/, '.jpg')}"`);
    expect(refs.value.hero.image.url).toBe(chelsea.url.replace(/\.png$/, '.jpg'));
    expect(JSON.parse(refs.value.builder)).toEqual({ src: chelsea.medium.replace(/\.png$/, '.jpg') });
    // The rendered post serves the JPEG (and its WebP sibling in <picture>).
    const html = await (await fetch(`${wp.url}/?p=${post}`)).text();
    expect(html).toContain(chelsea.medium.replace(/\.png$/, '.jpg'));
    expect(html).toMatch(/<source type="image\/webp" srcset="[^"]*chelsea-300x200\.jpg\.webp/);
    const jpeg = Buffer.from(await (await fetch(chelsea.medium.replace(/\.png$/, '.jpg'))).arrayBuffer());
    expect(jpeg.subarray(0, 3).toString('hex')).toBe('ffd8ff');
  });

  it('restore brings back every PNG byte for byte, the MIME type, the metadata and every reference', async () => {
    const chelsea = uploads.chelsea as Upload;
    const { value } = await wp.php<unknown>(
      `$r = Compresso_Optimizer::restore( ${chelsea.id} ); compresso_test_out( is_wp_error( $r ) ? $r->get_error_code() : $r );`,
    );
    expect(value).toBe(true);
    const after = await attachment(chelsea.id);
    expect(after.mime).toBe('image/png');
    expect(after.file).toMatch(/\/chelsea\.png$/);
    expect(Object.keys(after.files).sort()).toEqual(Object.keys(chelsea.files).sort());
    for (const size of Object.values(after.meta.sizes)) expect(size['mime-type']).toBe('image/png');
    for (const [name, path] of Object.entries(chelsea.files)) {
      const host = wp.hostPath(path);
      expect(sha256(host), name).toBe(before[name]);
      expect(existsSync(host.replace(/\.png$/, '.jpg')), `${name}: the JPEG is gone`).toBe(false);
      expect(existsSync(`${host.replace(/\.png$/, '.jpg')}.webp`)).toBe(false);
      expect(existsSync(backupOf(host))).toBe(false);
    }
    const refs = await wp.php<{
      content: string;
      hero: { image: { url: string } };
      builder: string;
      ids: unknown;
    }>(`
      compresso_test_out( array( 'content' => get_post( ${post} )->post_content, 'hero' => get_post_meta( ${post}, 'hero', true ), 'builder' => get_post_meta( ${post}, '_builder_data', true ) ) );`);
    expect(refs.value.content).not.toContain('.jpg');
    expect(refs.value.content).toContain(`src="${chelsea.medium}"`);
    expect(refs.value.hero.image.url).toBe(chelsea.url);
    expect(JSON.parse(refs.value.builder)).toEqual({ src: chelsea.medium });
  });

  it('keeps the PNG when the JPEG would not save the threshold the owner set', async () => {
    const chelsea = uploads.chelsea as Upload;
    // The setting as the settings screen validates it.
    const checked = await wp.php<{
      ok: { settings: { png_to_jpeg_min_saving: number } };
      bad: { errors: Record<string, string> };
    }>(`
      compresso_test_out( array(
        'ok' => compresso_validate_settings( array( 'quality' => 'auto', 'png_to_jpeg_min_saving' => '35' ) ),
        'bad' => compresso_validate_settings( array( 'quality' => 'auto', 'png_to_jpeg_min_saving' => '120' ) ),
      ) );`);
    expect(checked.value.ok.settings.png_to_jpeg_min_saving).toBe(35);
    expect(checked.value.bad.errors.png_to_jpeg_min_saving).toBe(
      'PNG-to-JPEG saving: expected a whole percent from 0 to 95, received "120".',
    );
    // Just above what the JPEG saved on this photo (the same bytes give the same JPEG).
    const threshold = Math.ceil(saving) + 1;
    expect(threshold).toBeLessThanOrEqual(95);
    await settings({ png_to_jpeg_min_saving: threshold });
    const state = await optimize(chelsea.id);
    await settings({ png_to_jpeg_min_saving: 20 });
    expect(state.status).toBe('done');
    expect(state.png_to_jpeg).toMatchObject({ converted: false, reason: 'below_threshold', saving });
    const after = await attachment(chelsea.id);
    expect(after.mime).toBe('image/png');
    expect(readFileSync(wp.hostPath(after.file)).subarray(1, 4).toString()).toBe('PNG');
    const restored = await wp.php<unknown>(
      `$r = Compresso_Optimizer::restore( ${chelsea.id} ); compresso_test_out( is_wp_error( $r ) ? $r->get_error_code() : $r );`,
    );
    expect(restored.value).toBe(true);
    expect(sha256(wp.hostPath(after.file))).toBe(before['chelsea.png']);
  });

  it('converts a PNG whose alpha channel is present but fully opaque, and keeps one with real transparency', async () => {
    const rgba = uploads.rgba as Upload;
    const folder = uploads.folder as Upload;
    // Colour type 6 (RGBA) in the IHDR: the alpha channel is there.
    expect(readFileSync(wp.hostPath(rgba.files['chelsea-rgba.png'] ?? '')).readUInt8(25)).toBe(6);
    expect(readFileSync(wp.hostPath(folder.files['folder.png'] ?? '')).readUInt8(25)).toBe(6);
    const opaque = await optimize(rgba.id);
    expect(opaque.error).toBeNull();
    expect(opaque.png_to_jpeg).toMatchObject({ converted: true });
    expect((await attachment(rgba.id)).mime).toBe('image/jpeg');
    const transparent = await optimize(folder.id);
    expect(transparent.error).toBeNull();
    expect(transparent.png_to_jpeg).toMatchObject({
      converted: false,
      reason: 'transparent_or_small_saving',
    });
    const after = await attachment(folder.id);
    expect(after.mime).toBe('image/png');
    expect(after.file).toMatch(/folder\.png$/);
    for (const path of Object.values(after.files))
      expect(readFileSync(wp.hostPath(path)).subarray(1, 4).toString(), path).toBe('PNG');
  });
});

describe('an image edited in the WordPress image editor', { timeout: 400_000 }, () => {
  it('is compressed again, once: the new -e… files only', async () => {
    const edited = uploads.edited as Upload;
    await settings({ webp: true, avif: false });
    const first = await optimize(edited.id);
    expect(first.status).toBe('done');
    const originals: Record<string, string> = {};
    for (const [name, path] of Object.entries(edited.files))
      originals[name] = sha256(backupOf(wp.hostPath(path)));
    const { value } = await wp.php<{
      saved: unknown;
      file: string;
      state: { status: string; context: string };
      events: number;
    }>(
      `require_once ABSPATH . 'wp-admin/includes/image-edit.php';
      require_once ABSPATH . 'wp-admin/includes/image.php';
      $_REQUEST['history'] = wp_slash( '[{"r":90}]' );
      $_REQUEST['target'] = 'all';
      $_REQUEST['do'] = 'save';
      $saved = wp_save_image( ${edited.id} );
      // A later metadata update (another plugin, a regenerate) does not queue it a second time.
      wp_update_attachment_metadata( ${edited.id}, wp_get_attachment_metadata( ${edited.id} ) );
      $events = 0;
      foreach ( _get_cron_array() as $hooks ) { $events += isset( $hooks[ Compresso_Optimizer::CRON_HOOK ] ) ? count( $hooks[ Compresso_Optimizer::CRON_HOOK ] ) : 0; }
      compresso_test_out( array( 'saved' => $saved, 'file' => get_attached_file( ${edited.id} ), 'state' => Compresso_Optimizer::state( ${edited.id} ), 'events' => $events ) );`,
      { asAdmin: true },
    );
    expect(JSON.stringify(value.saved)).not.toContain('error');
    expect(value.file).toMatch(/edited-e\d{13}\.jpg$/);
    expect(value.state).toMatchObject({ status: 'queued', context: 'edit' });
    expect(value.events).toBe(1);
    const after = await attachment(edited.id);
    const newFiles = Object.entries(after.files);
    for (const [name] of newFiles) expect(name).toMatch(/-e\d{13}/);
    const sizesBefore = Object.fromEntries(
      newFiles.map(([name, path]) => [name, statSync(wp.hostPath(path)).size]),
    );
    const calls = compressCalls();
    const state = await optimize(edited.id);
    expect(state.status).toBe('done');
    // The new files, each compressed once (+ its WebP); the earlier files are not sent again.
    expect(compressCalls() - calls).toBe(newFiles.length * 2);
    for (const [name, path] of newFiles)
      expect(statSync(wp.hostPath(path)).size, name).toBeLessThan(sizesBefore[name] ?? 0);
    const again = compressCalls();
    await optimize(edited.id);
    expect(compressCalls()).toBe(again);
    // Restore puts back both the edited files as saved and the files from before the edit.
    const restored = await wp.php<unknown>(
      `$r = Compresso_Optimizer::restore( ${edited.id} ); compresso_test_out( is_wp_error( $r ) ? $r->get_error_code() : $r );`,
    );
    expect(restored.value).toBe(true);
    for (const [name, path] of Object.entries(edited.files))
      expect(sha256(wp.hostPath(path)), name).toBe(originals[name]);
    for (const [name, path] of newFiles)
      expect(statSync(wp.hostPath(path)).size, name).toBe(sizesBefore[name]);
  });
});

describe('AVIF siblings', { timeout: 400_000 }, () => {
  it('are made for every size and served first in <picture> in a rendered post', async () => {
    const rocket = uploads.rocket as Upload;
    await settings({ webp: true, avif: true });
    const state = await optimize(rocket.id);
    expect(state.error).toBeNull();
    let avifs = 0;
    for (const [name, path] of Object.entries(rocket.files)) {
      const sibling = ((state.files[name]?.siblings ?? {}) as Record<string, unknown>).avif;
      if (sibling === false) continue;
      const bytes = readFileSync(`${wp.hostPath(path)}.avif`);
      expect(bytes.subarray(4, 12).toString(), name).toBe('ftypavif');
      expect(bytes.length).toBe((sibling as { size: number }).size);
      avifs++;
    }
    expect(avifs).toBeGreaterThanOrEqual(2);
    const bytes = (suffix: string) =>
      Object.values(rocket.files).reduce((sum, path) => {
        const file = `${wp.hostPath(path)}${suffix}`;
        return sum + (existsSync(file) ? statSync(file).size : 0);
      }, 0);
    process.stdout.write(
      `rocket (${Object.keys(rocket.files).length} files): JPEG ${bytes('')} B, WebP ${bytes('.webp')} B, AVIF ${bytes('.avif')} B\n`,
    );
    const { value } = await wp.php<string>(`
      $post = wp_insert_post( array( 'post_title' => 'Rocket', 'post_status' => 'publish', 'post_author' => 1,
        'post_content' => '<!-- wp:image {"id":${rocket.id},"sizeSlug":"full"} --><figure class="wp-block-image size-full"><img src="${rocket.url}" alt="Rocket" class="wp-image-${rocket.id}"/></figure><!-- /wp:image -->' ) );
      compresso_test_out( get_permalink( $post ) );`);
    const html = await (await fetch(value)).text();
    const picture = /<picture class="compresso-picture">(.*?)<\/picture>/s.exec(html)?.[1] ?? '';
    const types = [...picture.matchAll(/<source type="([^"]+)"/g)].map((m) => m[1]);
    expect(types).toEqual(['image/avif', 'image/webp']);
    const avifUrl = /<source type="image\/avif" srcset="([^" ]+\.avif)/.exec(picture)?.[1] ?? '';
    const served = Buffer.from(await (await fetch(avifUrl)).arrayBuffer());
    expect(served.subarray(4, 12).toString()).toBe('ftypavif');
    // The <img> inside keeps core's loading attributes (and only one of each).
    const img = /<img [^>]*>/.exec(picture)?.[0] ?? '';
    expect(new Set(attributeNames(img)).size).toBe(attributeNames(img).length);
  });
});

describe('the media library', { timeout: 400_000 }, () => {
  it('shows the saving and the format copies in a column, with compress/restore row actions', async () => {
    const rocket = uploads.rocket as Upload;
    const page = await admin.request('wp-admin/upload.php?mode=list');
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/<th[^>]*id=['"]compresso['"][^>]*>[^<]*Compresso/);
    const row = new RegExp(`<tr id="post-${rocket.id}"[\\s\\S]*?</tr>`).exec(page.text)?.[0] ?? '';
    expect(row).toMatch(/Saved \d+(\.\d)?% \([^)]+\) over 3 files\./);
    expect(row).toContain('AVIF: ');
    expect(row).toContain('WEBP: ');
    expect(row).toContain('action=compresso_restore');
    expect(row).toContain('action=compresso_compress');
    expect(row).not.toContain('compresso-backup-warning');
    // The PNG converted to JPEG says so.
    const rgba = new RegExp(`<tr id="post-${uploads.rgba?.id}"[\\s\\S]*?</tr>`).exec(page.text)?.[0] ?? '';
    expect(rgba).toContain('Converted from PNG to JPEG');
  });

  it('shows compress/restore in the attachment details', async () => {
    const { value } = await wp.php<string>(
      `require_once ABSPATH . 'wp-admin/includes/media.php';
      $fields = get_attachment_fields_to_edit( get_post( ${uploads.rocket?.id} ) ); compresso_test_out( $fields['compresso']['html'] );`,
      { asAdmin: true },
    );
    expect(value).toContain('compresso-details');
    expect(value).toMatch(
      /<a href="[^"]+action=compresso_restore[^"]+" class="button">Restore original<\/a>/,
    );
    expect(value).toContain('Compress again');
  });

  it('warns when a backup is missing or damaged, and a restore then changes nothing', async () => {
    const rgba = uploads.rgba as Upload;
    const rocket = uploads.rocket as Upload;
    // The rocket's thumbnail backup damaged, the converted PNG's medium backup removed.
    const thumbName = Object.keys(rocket.files).find((n) => n.includes('150x150')) ?? '';
    const damaged = backupOf(wp.hostPath(rocket.files[thumbName] ?? ''));
    const good = readFileSync(damaged);
    writeFileSync(damaged, Buffer.concat([good, Buffer.from('x')]));
    const mediumName = Object.keys(rgba.files).find((n) => n.includes('300x')) ?? '';
    const missing = backupOf(wp.hostPath(rgba.files[mediumName] ?? ''));
    const kept = readFileSync(missing);
    unlinkSync(missing);
    const page = await admin.request('wp-admin/upload.php?mode=list');
    const row = new RegExp(`<tr id="post-${rocket.id}"[\\s\\S]*?</tr>`).exec(page.text)?.[0] ?? '';
    expect(row).toContain('compresso-backup-damaged');
    expect(row).toContain(`Backup of ${thumbName} is damaged`);
    const rgbaRow = new RegExp(`<tr id="post-${rgba.id}"[\\s\\S]*?</tr>`).exec(page.text)?.[0] ?? '';
    expect(rgbaRow).toContain('compresso-backup-missing');
    // Restore refuses before touching anything.
    const link = (/href="([^"]+action=compresso_restore[^"]+)"/.exec(rgbaRow)?.[1] ?? '').replace(
      /&amp;|&#038;/g,
      '&',
    );
    const files = Object.values((await attachment(rgba.id)).files);
    const current = Object.fromEntries(files.map((p) => [p, sha256(wp.hostPath(p))]));
    const webps = files.filter((p) => existsSync(`${wp.hostPath(p)}.webp`));
    expect(webps.length).toBeGreaterThan(0);
    const answer = await admin.request(link);
    expect(answer.redirects.join(' ')).toContain('compresso_result=compresso_backup_missing');
    expect(answer.text).toContain('could not be restored (compresso_backup_missing)');
    for (const [path, hash] of Object.entries(current)) expect(sha256(wp.hostPath(path)), path).toBe(hash);
    for (const path of webps) expect(existsSync(`${wp.hostPath(path)}.webp`), path).toBe(true);
    writeFileSync(damaged, good);
    writeFileSync(missing, kept);
  });

  it('restores from the row action (nonce and capability checked) and queues a compression from it', async () => {
    const rocket = uploads.rocket as Upload;
    const page = await admin.request('wp-admin/upload.php?mode=list');
    const row = new RegExp(`<tr id="post-${rocket.id}"[\\s\\S]*?</tr>`).exec(page.text)?.[0] ?? '';
    const restore = (/href="([^"]+action=compresso_restore[^"]+)"/.exec(row)?.[1] ?? '').replace(
      /&amp;|&#038;/g,
      '&',
    );
    const path = restore;
    // A subscriber with the admin's link, and the admin with a wrong nonce: refused, nothing changed.
    const subscriber = await sessionFor(wp, 'subscriber');
    expect((await subscriber.request(path)).status).toBe(403);
    expect((await admin.request(path.replace(/_wpnonce=[^&]+/, '_wpnonce=0123456789'))).status).toBe(403);
    expect(existsSync(`${wp.hostPath(rocket.files['rocket.jpg'] ?? '')}.avif`)).toBe(true);
    const done = await admin.request(path);
    expect(done.status).toBe(200);
    expect(done.redirects.join(' ')).toContain('compresso_result=restored');
    expect(done.text).toContain('The original image was restored');
    for (const [name, file] of Object.entries(rocket.files)) {
      const host = wp.hostPath(file);
      expect(existsSync(`${host}.avif`), name).toBe(false);
      expect(existsSync(`${host}.webp`), name).toBe(false);
    }
    expect(sha256(wp.hostPath(rocket.files['rocket.jpg'] ?? ''))).toBe(
      sha256(join(CORPUS, 'photo-skimage-rocket.jpg')),
    );
    // Now "Compress now": queued for the background job.
    const row2 = new RegExp(`<tr id="post-${rocket.id}"[\\s\\S]*?</tr>`).exec(done.text)?.[0] ?? '';
    expect(row2).toContain('Not compressed yet.');
    expect(row2).not.toContain('action=compresso_restore');
    const compress = (/href="([^"]+action=compresso_compress[^"]+)"/.exec(row2)?.[1] ?? '').replace(
      /&amp;|&#038;/g,
      '&',
    );
    const queued = await admin.request(compress);
    expect(queued.redirects.join(' ')).toContain('compresso_result=queued');
    const { value } = await wp.php<{ status: string; scheduled: boolean }>(
      `compresso_test_out( array( 'status' => Compresso_Optimizer::state( ${rocket.id} )['status'], 'scheduled' => (bool) wp_next_scheduled( Compresso_Optimizer::CRON_HOOK, array( ${rocket.id} ) ) ) );`,
    );
    expect(value).toEqual({ status: 'queued', scheduled: true });
  });
});
