/**
 * Measures what issue 17's closing note asks for, on a real WordPress (Playground, the tests' harness)
 * against a real Compresso server on loopback:
 *
 * - the time from the start of an upload request to the end of the attachment's background
 *   optimization (the `_compresso` record polled until it says `done` or `error`);
 * - the API requests one upload costs with the plugin's default settings (counted in the server's log);
 * - the page weight of a sample post before and after: the bytes of the images a browser would
 *   download (1280-px-wide viewport, DPR 1, `Accept: image/avif,image/webp,*\/*`).
 *
 * "Before" is the same post on the same site with the plugin not active (WordPress's own files);
 * "after" is the plugin activated with the settings activation stores plus a working key, and the same
 * photos uploaded again and optimized. Run with `node integrations/wordpress/bench/measure.ts` (or
 * `npm run bench -w @compresso/wordpress`); the table goes to stdout and to bench/results/latest.md.
 */
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { proAccount, startTestServer } from '@compresso/server/testing';
import { PLUGIN_FILE, sideloadPhp, startWordPress, type WordPress } from '../src/testing/wordpress.ts';

const CORPUS = join(import.meta.dirname, '../../../../shared/corpus');
/** Ordinary JPEG photos of 1–1.3 MB (1680×1050 and 1920×1200). PNG-to-JPEG is off by default, so no PNG. */
const PHOTOS = ['photo-mate-Dune.jpg', 'photo-mate-Blinds.jpg', 'photo-mate-RainDrops.jpg'];
const ACCEPT = 'image/avif,image/webp,*/*';
const VIEWPORT = 1280;
const POLL_LIMIT_MS = 20 * 60_000;

interface Upload {
  id: number;
  name: string;
  files: number;
  requestMs: number;
  optimizedMs?: number;
  status?: string;
  error?: unknown;
  serverRequests?: number;
  /** Milliseconds from the upload's start to the server's first and last answer (its log's `time`). */
  firstApiMs?: number;
  lastApiMs?: number;
  recordRequests?: number;
}

interface Download {
  url: string;
  type: string;
  bytes: number;
}

const log = (line: string) => process.stdout.write(`${line}\n`);
const load = () =>
  loadavg()
    .map((n) => n.toFixed(1))
    .join(' / ');

async function upload(wp: WordPress, photo: string, name: string): Promise<Upload> {
  const started = performance.now();
  const { value } = await wp.php<{ id?: number; error?: string; files?: number }>(
    `${sideloadPhp(`/corpus/${photo}`, name)}
    $meta = wp_get_attachment_metadata( $id );
    compresso_test_out( array( 'id' => $id, 'files' => 1 + count( $meta['sizes'] ) + ( empty( $meta['original_image'] ) ? 0 : 1 ) ) );`,
    { asAdmin: true },
  );
  if (value.id === undefined) throw new Error(`upload of ${photo} failed: ${value.error}`);
  return {
    id: value.id,
    name: photo,
    files: value.files ?? 0,
    requestMs: Math.round(performance.now() - started),
  };
}

/** A post with the images in its content, as the block editor writes them (large size), published. */
async function post(wp: WordPress, title: string, ids: number[]): Promise<string> {
  const blocks = ids
    .map(
      (id) =>
        `<!-- wp:image {"id":${id},"sizeSlug":"large"} --><figure class="wp-block-image size-large"><img src="' . wp_get_attachment_image_url( ${id}, 'large' ) . '" alt="" class="wp-image-${id}"/></figure><!-- /wp:image -->`,
    )
    .join('<!-- wp:paragraph --><p>Some text between the photos.</p><!-- /wp:paragraph -->');
  const { value } = await wp.php<string>(
    `$post = wp_insert_post( array( 'post_title' => '${title}', 'post_status' => 'publish', 'post_author' => 1,
      'post_content' => '${blocks}' ) );
    compresso_test_out( get_permalink( $post ) );`,
  );
  return value;
}

/** The width in CSS px of the first matching `sizes` entry at the viewport (px, vw, min/max-width). */
function slotWidth(sizes: string | undefined): number {
  if (!sizes) return VIEWPORT; // no sizes: 100vw
  for (const entry of sizes.split(',').map((s) => s.trim())) {
    const m = /^(?:\((min|max)-width:\s*(\d+)px\)\s*)?(\d+(?:\.\d+)?)(px|vw)$/.exec(entry);
    if (!m) continue;
    const [, kind, bound, length, unit] = m;
    if (kind === 'max' && VIEWPORT > Number(bound)) continue;
    if (kind === 'min' && VIEWPORT < Number(bound)) continue;
    return unit === 'vw' ? (VIEWPORT * Number(length)) / 100 : Number(length);
  }
  return VIEWPORT;
}

/** The candidate a browser takes from a srcset of width descriptors at DPR 1: the smallest that covers the slot. */
function pick(srcset: string, sizes: string | undefined): string {
  const candidates = srcset
    .split(/,\s+/)
    .map((c) => c.trim().split(/\s+/))
    .map(([url = '', d = '1x']) => ({ url, w: d.endsWith('w') ? Number.parseInt(d, 10) : 0 }));
  const slot = slotWidth(sizes);
  const sorted = candidates.filter((c) => c.w > 0).sort((a, b) => a.w - b.w);
  if (sorted.length === 0) return candidates[0]?.url ?? '';
  return (sorted.find((c) => c.w >= slot) ?? sorted[sorted.length - 1])?.url ?? '';
}

const attr = (tag: string, name: string) => new RegExp(`\\s${name}="([^"]*)"`).exec(tag)?.[1];

/** The image URLs a browser would download for the page's <picture> and <img> elements. */
function chosenUrls(html: string): string[] {
  const urls: string[] = [];
  const accepts = (type: string | undefined) => !type || ['image/avif', 'image/webp'].includes(type);
  const rest = html.replace(/<picture[^>]*>(.*?)<\/picture>/gs, (_whole, inner: string) => {
    const source = [...inner.matchAll(/<source[^>]*>/g)]
      .map((m) => m[0])
      .find((s) => accepts(attr(s, 'type')));
    const img = /<img[^>]*>/.exec(inner)?.[0] ?? '';
    const srcset = source ? attr(source, 'srcset') : attr(img, 'srcset');
    const sizes = source ? (attr(source, 'sizes') ?? attr(img, 'sizes')) : attr(img, 'sizes');
    urls.push(srcset ? pick(srcset, sizes) : (attr(img, 'src') ?? ''));
    return '';
  });
  for (const [img] of rest.matchAll(/<img[^>]*>/g)) {
    const srcset = attr(img, 'srcset');
    urls.push(srcset ? pick(srcset, attr(img, 'sizes')) : (attr(img, 'src') ?? ''));
  }
  return urls.filter(Boolean);
}

async function pageWeight(pageUrl: string): Promise<{ html: string; downloads: Download[] }> {
  const html = await (await fetch(pageUrl, { headers: { accept: ACCEPT } })).text();
  const downloads: Download[] = [];
  for (const url of new Set(chosenUrls(html).map((u) => new URL(u, pageUrl).href))) {
    const response = await fetch(url, { headers: { accept: ACCEPT } });
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    const bytes = (await response.arrayBuffer()).byteLength;
    downloads.push({ url, type: response.headers.get('content-type') ?? '?', bytes });
  }
  return { html, downloads };
}

async function main() {
  const startedAt = new Date();
  const loadAtStart = load();
  log(`load average at start: ${loadAtStart}`);
  const api = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 20 * 1024 * 1024 } });
  const { key } = await proAccount(api.db, 'bench@example.com');
  const wp = await startWordPress({ mounts: [{ hostPath: CORPUS, vfsPath: '/corpus' }] });
  log(`WordPress booted in ${wp.bootMs} ms at ${wp.url}`);
  try {
    // Before: the plugin not active; WordPress's own files.
    const plain: Upload[] = [];
    for (const photo of PHOTOS) plain.push(await upload(wp, photo, `before-${photo}`));
    const beforeUrl = await post(
      wp,
      'Before',
      plain.map((u) => u.id),
    );
    const before = await pageWeight(beforeUrl);
    log(
      `before: ${before.downloads.length} images, ${before.downloads.reduce((s, d) => s + d.bytes, 0)} bytes`,
    );

    // After: activate (stores the defaults), then a working key, nothing else changed.
    await wp.php(
      `require_once ABSPATH . 'wp-admin/includes/plugin.php';
      activate_plugin( '${PLUGIN_FILE}' );
      compresso_test_out( 'ok' );`,
      { asAdmin: true },
    );
    const { value: settings } = await wp.php<Record<string, unknown>>(
      `update_option( 'compresso_settings', array_merge( get_option( 'compresso_settings' ), array(
        'server_url' => '${api.url}', 'api_key' => compresso_encrypt_secret( '${key}' ) ) ) );
      $s = compresso_get_settings(); unset( $s['api_key'] ); $s['connected'] = compresso_is_connected();
      compresso_test_out( $s );`,
    );
    log(`settings: ${JSON.stringify({ ...settings, server_url: undefined })}`);
    const { value: estimate } = await wp.php<unknown>(
      `$r = rest_do_request( new WP_REST_Request( 'GET', '/compresso/v1/stats' ) );
      compresso_test_out( $r->get_data() );`,
      { asAdmin: true },
    );

    const optimized: Upload[] = [];
    for (const photo of PHOTOS) {
      const apiCalls = () => api.logLines.filter((l) => String(l.path ?? '').startsWith('/api/')).length;
      const callsBefore = apiCalls();
      const started = performance.now();
      const startedWall = Date.now();
      const up = await upload(wp, photo, `after-${photo}`);
      log(`${photo}: upload request ${up.requestMs} ms, ${up.files} files`);
      let state = { status: 'queued', requests: 0, error: null as unknown };
      while (!['done', 'error'].includes(state.status) && performance.now() - started < POLL_LIMIT_MS) {
        state = (await wp.php<typeof state>(`compresso_test_out( Compresso_Optimizer::state( ${up.id} ) );`))
          .value;
      }
      up.optimizedMs = Math.round(performance.now() - started);
      up.status = state.status;
      up.error = state.error;
      up.recordRequests = state.requests;
      up.serverRequests = apiCalls() - callsBefore;
      const times = api.logLines
        .filter((l) => String(l.path ?? '').startsWith('/api/'))
        .slice(callsBefore)
        .map((l) => Number(l.time));
      if (times.length > 0) {
        up.firstApiMs = (times[0] ?? 0) - startedWall;
        up.lastApiMs = (times[times.length - 1] ?? 0) - startedWall;
      }
      log(
        `${photo}: ${state.status} ${up.optimizedMs} ms after the upload started; ${up.serverRequests} API requests (record: ${state.requests})`,
      );
      optimized.push(up);
    }
    const afterUrl = await post(
      wp,
      'After',
      optimized.map((u) => u.id),
    );
    const after = await pageWeight(afterUrl);
    const loadAtEnd = load();

    const sum = (d: Download[]) => d.reduce((s, x) => s + x.bytes, 0);
    const kb = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
    const sec = (ms: number | undefined) => `${((ms ?? 0) / 1000).toFixed(1)} s`;
    const file = (url: string) => url.replace(/^.*\/uploads\//, '');
    const lines = [
      `# WordPress plugin benchmark (issue 17)`,
      '',
      `Run ${startedAt.toISOString()} by \`node integrations/wordpress/bench/measure.ts\`: WordPress ${'6.5'} on Playground (PHP 8.3 in WebAssembly, SQLite), a Compresso server on loopback, ${cpus().length} cores shared with other sessions; load average (1/5/15 min) ${loadAtStart} at the start, ${loadAtEnd} at the end. WordPress boot: ${sec(wp.bootMs)}.`,
      '',
      `Settings: as activation stores them plus a working key — ${Object.entries(settings)
        .filter(([k]) => !['server_url', 'connected'].includes(k))
        .map(([k, v]) => `${k} ${JSON.stringify(v)}`)
        .join(', ')}.`,
      '',
      '## Upload to optimized',
      '',
      '| photo | original | files (original + sizes) | upload request | upload start → optimized | first / last API answer | status | API requests (server log) | requests in the record |',
      '| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |',
      ...optimized.map(
        (u) =>
          `| ${u.name} | ${kb(statSync(join(CORPUS, u.name)).size)} | ${u.files} | ${sec(u.requestMs)} | ${sec(u.optimizedMs)} | ${sec(u.firstApiMs)} / ${sec(u.lastApiMs)} | ${u.status}${u.error ? ` ${JSON.stringify(u.error)}` : ''} | ${u.serverRequests} | ${u.recordRequests} |`,
      ),
      '',
      `The plugin's own estimate (\`GET /compresso/v1/stats\`): ${JSON.stringify(estimate)}.`,
      '',
      `## Page weight of a sample post (${PHOTOS.length} photos, large size, the default theme)`,
      '',
      `Images a browser downloads at a ${VIEWPORT}-px-wide viewport, DPR 1, \`Accept: ${ACCEPT}\` (first accepted \`<source>\`, its srcset candidate for the \`sizes\` slot; else the \`<img>\`'s; every image counted, lazy or not).`,
      '',
      '| | images | bytes |',
      '| --- | ---: | ---: |',
      `| before (plugin not active) | ${before.downloads.length} | ${sum(before.downloads)} (${kb(sum(before.downloads))}) |`,
      `| after (optimized, defaults) | ${after.downloads.length} | ${sum(after.downloads)} (${kb(sum(after.downloads))}) |`,
      `| saving | | ${(100 * (1 - sum(after.downloads) / Math.max(1, sum(before.downloads)))).toFixed(1)} % |`,
      '',
      '| before: file | type | bytes | after: file | type | bytes |',
      '| --- | --- | ---: | --- | --- | ---: |',
      ...before.downloads.map((b, i) => {
        const a = after.downloads[i];
        return `| ${file(b.url)} | ${b.type} | ${b.bytes} | ${a ? file(a.url) : ''} | ${a?.type ?? ''} | ${a?.bytes ?? ''} |`;
      }),
      '',
    ];
    const table = lines.join('\n');
    log(`\n${table}`);
    const dir = join(import.meta.dirname, 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'latest.md'), table);
  } finally {
    await wp.close();
    await api.close();
  }
}

await main();
