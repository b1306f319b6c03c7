// The bulk optimizer end to end, in a real WordPress against a real Compresso server whose daily quota
// is small: 50 images (made by sharp, small enough to have no generated sizes) optimized by a run
// driven over HTTP through the compresso/v1 REST namespace (cookie + REST nonce, as the admin screen's
// apiFetch does), processed by WP-Cron ticks that chain through loopback requests; paused, resumed,
// stopped cleanly by QUOTA_EXCEEDED, gone on by itself after the quota's reset, completed; a file the
// server refuses listed with its code and retried; a second run that sends nothing. Then the WP-CLI
// commands, called through a small WP_CLI stand-in (WP-CLI cannot be installed here).
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rampJpeg } from './testing/images.ts';
import { activatePlugin, startWordPress, type WordPress } from './testing/wordpress.ts';
import { installWpCliStandIn } from './testing/wp-cli.ts';

const IMAGES = 50;
/** The account's requests per day: the run hits it about halfway. */
const DAILY_LIMIT = 30;
const REST = '/wp-json/compresso/v1';

let wp: WordPress;
let api: TestServer;
let key: string;
let dir: string;
/** Where the WP-CLI stand-in is, for `require_once` (testing/wp-cli.ts). */
let standIn: string;
let ids: number[] = [];
let refused = 0;
const originals = new Map<number, { path: string; hash: string; size: number }>();
const cookies: Record<'admin' | 'subscriber', { cookie: string; nonce: string }> = {
  admin: { cookie: '', nonce: '' },
  subscriber: { cookie: '', nonce: '' },
};

// The server's clock: frozen 15 s before midnight UTC until the quota is first refused, then running
// from that moment, so the quota resets 15 s (real time) after the run hit it, and the plugin must go
// on by itself.
const BEFORE_MIDNIGHT = Date.parse('2026-11-27T23:59:45.000Z');
const refusalsLogged = () => (api?.logLines ?? []).filter((l) => l.status === 429) as { time: number }[];
const quotaRefusals = () => refusalsLogged().length;
function serverNow(): Date {
  const first = refusalsLogged()[0];
  return new Date(BEFORE_MIDNIGHT + (first === undefined ? 0 : Math.max(0, Date.now() - first.time)));
}

/**
 * Holds the server's compressions from the (after+1)th on until released: the test pauses a run it
 * has seen running with a compression in flight, whatever the machine's speed (a poll answered
 * after a WP-Cron tick could otherwise find the run already stopped at the quota).
 */
const hold = { after: Number.POSITIVE_INFINITY, calls: 0, release: () => {}, released: Promise.resolve() };
function holdCompressionsAfter(after: number): void {
  hold.after = after;
  hold.calls = 0;
  hold.released = new Promise<void>((resolve) => {
    hold.release = () => {
      hold.after = Number.POSITIVE_INFINITY;
      resolve();
    };
  });
}

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const compressed = () =>
  api.logLines.filter((l) => l.path === '/api/v1/compress' && l.status === 200) as { time: number }[];

interface Run {
  status: string;
  total: number;
  processed: number;
  optimized: number;
  skipped: number;
  requests: number;
  percent: number;
  remaining: number;
  resume_at: number | null;
  wait_reason: string | null;
  waits: {
    reason: string;
    at: number;
    resume_at: number;
    resumed_at: number | null;
    by: string | null;
    processed: number;
  }[];
  failed: { id: number; code: string; message: string; attempts: number; file: string }[];
  quota: { limit: number | null; remaining: number | null; reset_at: number | null; plan: string | null };
}

async function rest<T>(
  path: string,
  options: { method?: string; body?: unknown; as?: 'admin' | 'subscriber' | 'nobody'; nonce?: boolean } = {},
): Promise<{ status: number; body: T }> {
  const who = options.as ?? 'admin';
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (who !== 'nobody') {
    headers.cookie = cookies[who].cookie;
    if (options.nonce !== false) headers['x-wp-nonce'] = cookies[who].nonce;
  }
  const response = await fetch(`${wp.url}${REST}${path}`, {
    method: options.method ?? 'GET',
    headers,
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  });
  return { status: response.status, body: (await response.json()) as T };
}

/** Reads the run (each read is a request to the site, which is also what lets WP-Cron run) until `done` says so. */
async function until(done: (run: Run) => boolean, limitMs = 600_000): Promise<Run> {
  const started = performance.now();
  for (;;) {
    const { status, body } = await rest<Run>('/bulk');
    expect(status).toBe(200);
    if (done(body)) return body;
    if (performance.now() - started > limitMs)
      throw new Error(`the run did not get there in ${limitMs} ms: ${JSON.stringify(body)}`);
  }
}

async function loginAs(login: string): Promise<{ cookie: string; nonce: string }> {
  const { value } = await wp.php<Record<string, string>>(`
    $user = get_user_by( 'login', '${login}' );
    $expires = time() + DAY_IN_SECONDS;
    compresso_test_out( array(
      AUTH_COOKIE => wp_generate_auth_cookie( $user->ID, $expires, 'auth' ),
      LOGGED_IN_COOKIE => wp_generate_auth_cookie( $user->ID, $expires, 'logged_in' ),
    ) );`);
  const cookie = Object.entries(value)
    .map(([name, v]) => `${name}=${encodeURIComponent(v)}`)
    .join('; ');
  // The REST nonce as WordPress hands it to a logged-in browser (apiFetch refreshes it the same way).
  const response = await fetch(`${wp.url}/wp-admin/admin-ajax.php?action=rest-nonce`, {
    headers: { cookie },
  });
  const nonce = await response.text();
  expect(nonce).toMatch(/^[0-9a-f]{10}$/);
  return { cookie, nonce };
}

beforeAll(async () => {
  api = await startTestServer({
    dbPath: ':memory:',
    overrides: { proDailyLimit: DAILY_LIMIT },
    now: serverNow,
  });
  key = (await proAccount(api.db, 'bulk@example.com')).key;
  const optimize = api.engine.optimize.bind(api.engine);
  api.engine.optimize = async (input, options) => {
    if (++hold.calls > hold.after) await hold.released;
    return optimize(input, options);
  };
  dir = mkdtempSync(join(tmpdir(), 'compresso-bulk-'));
  for (let i = 0; i < IMAGES; i++) writeFileSync(join(dir, `bulk-${i}.jpg`), await rampJpeg(i, [5, 11, 17]));
  wp = await startWordPress({ mounts: [{ hostPath: dir, vfsPath: '/bulk-src' }] });
  standIn = installWpCliStandIn(wp);
  await activatePlugin(wp, `wp_create_user( 'subscriber', 'subscriber-pass', 'subscriber@example.com' );`);
  // The library exists before the plugin is connected (nothing queued on upload), as on a site that
  // installs the plugin and then optimizes what it already has.
  const { value } = await wp.php<{ ids: number[]; files: string[]; sizes: number }>(
    `require_once ABSPATH . 'wp-admin/includes/image.php';
    require_once ABSPATH . 'wp-admin/includes/file.php';
    require_once ABSPATH . 'wp-admin/includes/media.php';
    $ids = array(); $files = array(); $sizes = 0;
    for ( $i = 0; $i < ${IMAGES}; $i++ ) {
      $tmp = wp_tempnam( "bulk-$i.jpg" );
      copy( "/bulk-src/bulk-$i.jpg", $tmp );
      $id = media_handle_sideload( array( 'name' => "bulk-$i.jpg", 'tmp_name' => $tmp ), 0, "Bulk $i" );
      if ( is_wp_error( $id ) ) { throw new Exception( $id->get_error_message() ); }
      $ids[] = $id;
      $files[] = get_attached_file( $id );
      $sizes += count( wp_get_attachment_metadata( $id )['sizes'] );
    }
    update_option( 'compresso_settings', array_merge( compresso_get_settings(), array(
      'server_url' => '${api.url}', 'api_key' => compresso_encrypt_secret( '${key}' ),
      'quality' => 75, 'webp' => false, 'avif' => false, 'backups' => true, 'max_dimension' => 0,
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
  // One file the server will refuse (not an image any more): it must be listed with its code, not stop the run.
  refused = ids[6] ?? 0;
  writeFileSync(originals.get(refused)?.path ?? '', 'this is not an image');
  cookies.admin = await loginAs('admin');
  cookies.subscriber = await loginAs('subscriber');
}, 600_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('bulk optimizer', { timeout: 900_000 }, () => {
  it('answers only logged-in users with the REST nonce and the right capability', async () => {
    expect((await rest('/bulk', { as: 'nobody' })).status).toBe(401);
    // A cookie without the nonce counts as no login (WordPress's CSRF rule for cookie-authenticated REST).
    expect((await rest('/bulk/start', { method: 'POST', nonce: false })).status).toBe(401);
    const subscriber = await rest<{ code: string }>('/bulk/start', { method: 'POST', as: 'subscriber' });
    expect(subscriber.status).toBe(403);
    expect(subscriber.body.code).toBe('rest_forbidden');
    expect((await rest('/bulk', { as: 'subscriber' })).status).toBe(403);
    const idle = await rest<Run>('/bulk');
    expect(idle.status).toBe(200);
    expect(idle.body.status).toBe('idle');
  });

  it('tells the cost before anything is spent: requests per upload, for the library, and days at the quota', async () => {
    const { status, body } = await rest<{
      images: number;
      pending: number;
      sizes: string[];
      requests_per_upload: number;
      requests_for_library: number;
      extra_days_for_library: number;
      quota: { plan: string; limit: number; remaining: number; reset_at: number };
    }>('/stats?refresh=1');
    expect(status).toBe(200);
    expect(body.images).toBe(IMAGES);
    expect(body.pending).toBe(IMAGES);
    // WordPress 6.5 registers 6 sizes (thumbnail … 2048x2048): the original and each, WebP/AVIF off.
    expect(body.sizes.length).toBeGreaterThanOrEqual(4);
    expect(body.requests_per_upload).toBe(1 + body.sizes.length);
    expect(body.requests_for_library).toBe(IMAGES);
    // /usage counts as one request: 29 left today, so 21 requests wait for one more day.
    expect(body.quota).toMatchObject({ plan: 'pro', limit: DAILY_LIMIT, remaining: DAILY_LIMIT - 1 });
    expect(body.quota.reset_at - Date.now() / 1000).toBeLessThanOrEqual(16);
    expect(body.extra_days_for_library).toBe(1);
    const { value } = await wp.php<{ perUpload: number; library: number }>(`
      update_option( 'compresso_settings', array_merge( compresso_get_settings(), array( 'webp' => true, 'avif' => true ) ) );
      $stats = Compresso_Bulk::stats();
      update_option( 'compresso_settings', array_merge( compresso_get_settings(), array( 'webp' => false, 'avif' => false ) ) );
      compresso_test_out( array( 'perUpload' => $stats['requests_per_upload'], 'library' => $stats['requests_for_library'] ) );`);
    expect(value).toEqual({ perUpload: 3 * (1 + body.sizes.length), library: 3 * IMAGES });
    expect(compressed()).toHaveLength(0);
  });

  const active = { ms: 0, images: 0 };

  it('runs in the background, pauses (nothing more is sent) and resumes', async () => {
    // The sixth image's compression waits at the server until the pause is sent.
    holdCompressionsAfter(5);
    let started = performance.now();
    const start = await rest<Run>('/bulk/start', { method: 'POST' });
    expect(start.status).toBe(200);
    expect(start.body).toMatchObject({ status: 'running', total: IMAGES, processed: 0 });
    expect((await rest<{ code: string }>('/bulk/start', { method: 'POST' })).body.code).toBe(
      'compresso_bulk_in_progress',
    );
    const running = await until((run) => run.processed >= 5);
    expect(running).toMatchObject({ status: 'running', processed: 5 });
    const paused = await rest<Run>('/bulk/pause', { method: 'POST' });
    hold.release();
    active.ms += performance.now() - started;
    expect(paused.body.status).toBe('paused');
    // The tick that was working finishes its image and stops: wait until it let go of its lock.
    const { value: idle } = await wp.php<{ scheduled: unknown }>(`
      while ( get_option( 'compresso_bulk_lock' ) ) { usleep( 200000 ); wp_cache_delete( 'compresso_bulk_lock', 'options' ); }
      compresso_test_out( array( 'scheduled' => wp_next_scheduled( Compresso_Bulk::CRON_HOOK ) ) );`);
    expect(idle.scheduled).toBe(false);
    const sent = compressed().length;
    const still = await until(() => true);
    expect(still.status).toBe('paused');
    expect((await until(() => true)).processed).toBe(still.processed);
    expect(compressed()).toHaveLength(sent);
    active.images += still.processed;

    started = performance.now();
    const resumed = await rest<Run>('/bulk/resume', { method: 'POST' });
    expect(resumed.body.status).toBe('running');
    resumedFrom = still.processed;
  });

  let resumedFrom = 0;

  it('stops cleanly at the quota, goes on by itself after the reset, and completes; the refused file is listed with its code', async () => {
    const started = performance.now();
    // Nobody resumes it after the quota: the reads below are what any visit to the site does (WP-Cron
    // runs on them). A read that lands during the wait sees it.
    const seen: Run[] = [];
    const done = await until((run) => {
      if (run.status === 'waiting') seen.push(run);
      return run.status === 'done';
    });
    const wait = done.waits[0];
    expect(done.waits).toHaveLength(1);
    expect(wait).toMatchObject({ reason: 'QUOTA_EXCEEDED', by: 'schedule' });
    // Stopped where the quota ran out (29 requests left after /usage, one of them refused as not an image).
    expect(wait?.processed).toBeLessThan(IMAGES);
    expect(wait?.processed).toBeGreaterThan(resumedFrom);
    // The server's Retry-After (15 s to its midnight) and two seconds of slack.
    expect((wait?.resume_at ?? 0) - (wait?.at ?? 0)).toBeGreaterThanOrEqual(16);
    expect((wait?.resume_at ?? 0) - (wait?.at ?? 0)).toBeLessThanOrEqual(18);
    expect(wait?.resumed_at ?? 0).toBeGreaterThanOrEqual(wait?.resume_at ?? Infinity);
    for (const run of seen) {
      expect(run).toMatchObject({ wait_reason: 'QUOTA_EXCEEDED', resume_at: wait?.resume_at });
      // Used up until the server's reset, then whole again (the run itself waits two seconds more).
      expect(run.quota.remaining).toBe(run.quota.reset_at === null ? DAILY_LIMIT : 0);
    }
    const waitedMs = ((wait?.resumed_at ?? 0) - (wait?.at ?? 0)) * 1000;
    active.ms += performance.now() - started - waitedMs;
    active.images += done.processed - resumedFrom;
    process.stdout.write(
      `quota wait: ${waitedMs} ms (seen by ${seen.length} read(s)); ${quotaRefusals()} request(s) refused with QUOTA_EXCEEDED\n`,
    );
    expect(quotaRefusals()).toBeGreaterThanOrEqual(1);
    expect(done).toMatchObject({
      processed: IMAGES,
      optimized: IMAGES - 1,
      skipped: 0,
      percent: 100,
      remaining: 0,
    });
    expect(done.failed).toHaveLength(1);
    expect(done.failed[0]).toMatchObject({ id: refused, attempts: 1, file: 'bulk-6.jpg' });
    expect(done.failed[0]?.code).toMatch(/^(NOT_AN_IMAGE|CORRUPT_IMAGE|UNSUPPORTED_FORMAT)$/);
    // Every image sent exactly once (the run's count, the server's log, each image's record).
    expect(done.requests).toBe(IMAGES - 1);
    expect(compressed()).toHaveLength(IMAGES - 1);
    const { value } = await wp.php<Record<string, { status: string; requests: number }>>(`
      $out = array();
      foreach ( array( ${ids.join(',')} ) as $id ) { $out[ $id ] = Compresso_Optimizer::state( $id ); unset( $out[ $id ]['files'] ); }
      compresso_test_out( $out );`);
    for (const id of ids) {
      const original = originals.get(id);
      if (id === refused) {
        expect(value[id]?.status).toBe('error');
        continue;
      }
      expect(value[id], `#${id}`).toMatchObject({ status: 'done', requests: 1 });
      expect(statSync(original?.path ?? '').size, `#${id}`).toBeLessThan(original?.size ?? 0);
      const backup = (original?.path ?? '').replace('/wp-content/uploads/', '/wp-content/compresso-backups/');
      expect(sha256(backup)).toBe(original?.hash);
    }
    const minutes = active.ms / 60_000;
    const times = compressed().map((l) => l.time);
    process.stdout.write(
      `bulk: ${active.images} images in ${Math.round(active.ms / 1000)} s of running (pause and quota wait excluded): ${(active.images / minutes).toFixed(1)} images/min; ` +
        `server log, first to last compression: ${IMAGES - 1} in ${Math.round(((times.at(-1) ?? 0) - (times[0] ?? 0)) / 1000)} s\n`,
    );
  });

  it('retries a failed image once it is fixed; every image was sent once', async () => {
    writeFileSync(originals.get(refused)?.path ?? '', readFileSync(join(dir, 'bulk-6.jpg')));
    const retry = await rest<Run>('/bulk/retry', { method: 'POST', body: { ids: [refused] } });
    expect(retry.status).toBe(200);
    expect(retry.body.status).toBe('running');
    const done = await until((run) => run.status === 'done');
    expect(done).toMatchObject({ processed: IMAGES, optimized: IMAGES, failed: [] });
    expect(compressed()).toHaveLength(IMAGES);
    expect((await rest<{ code: string }>('/bulk/retry', { method: 'POST', body: {} })).status).toBe(404);

    const stats = await rest<{ optimized: number; pending: number; requests_for_library: number }>('/stats');
    expect(stats.body).toMatchObject({ optimized: IMAGES, pending: 0, requests_for_library: 0 });
  });

  it('a new run over a done library can be cancelled for good', async () => {
    // Over a library already done, one tick finishes the run (no request to send), and it could do so
    // before the cancel below arrives (it did once in CI). The tick lock is held meanwhile, as a tick
    // at work holds it, so the cancel meets a running run.
    await wp.php(`compresso_test_out( add_option( Compresso_Bulk::LOCK_OPTION, time(), '', false ) );`);
    const started = await rest<Run>('/bulk/start', { method: 'POST' });
    expect(started.body).toMatchObject({ status: 'running', processed: 0, total: IMAGES });
    const cancelled = await rest<Run>('/bulk/cancel', { method: 'POST' });
    await wp.php(`compresso_test_out( delete_option( Compresso_Bulk::LOCK_OPTION ) );`);
    expect(cancelled.body.status).toBe('cancelled');
    expect((await rest<{ code: string }>('/bulk/pause', { method: 'POST' })).body.code).toBe(
      'compresso_bulk_not_running',
    );
    // A runner the start woke may still be at work on the tick's event: it leased it (moved it
    // LEASE seconds ahead, a write that can land after the cancel took the event out, as WordPress
    // rewrites the whole schedule) and removes it when the tick returns (at once here: the tick finds
    // its lock taken or the run cancelled). Once no runner holds its lock, nothing of the run may be
    // left scheduled. (It was read at once before, and a CI run of d18b412 found the leased event
    // still there.)
    const waitFrom = performance.now();
    for (;;) {
      const { value: held } = await wp.php<number>(
        `compresso_test_out( compresso_lock_held_since( Compresso_Runner::LOCK_OPTION ) );`,
      );
      if (!held) break;
      if (performance.now() - waitFrom > 120_000)
        throw new Error('the runner still holds its lock after 120 s');
    }
    const { value } = await wp.php<unknown>(
      `compresso_test_out( wp_next_scheduled( Compresso_Bulk::CRON_HOOK ) );`,
    );
    expect(value).toBe(false);
  });

  it('WP-CLI: stats, restore and optimize with a progress bar (through a WP_CLI stand-in)', async () => {
    type Cli = {
      exit: number;
      lines: [string, string][];
      bars: { count: number; ticks: number; finished: boolean }[];
    };
    const cli = async (command: string, args: string[] = [], assoc: Record<string, boolean> = {}) =>
      (
        await wp.php<Cli>(`require_once '${standIn}';
          compresso_test_out( compresso_test_cli( '${command}', ${JSON.stringify(args).replace(/^\[/, 'array(').replace(/\]$/, ')')}, array( ${Object.keys(
            assoc,
          )
            .map((k) => `'${k}' => true`)
            .join(', ')} ) ) );`)
      ).value;
    const { value: loaded } = await wp.php<boolean>(
      `compresso_test_out( class_exists( 'Compresso_Cli', false ) );`,
    );
    expect(loaded, 'the command class is loaded only under WP-CLI').toBe(false);

    const stats = await cli('stats');
    expect(stats.exit).toBe(0);
    const text = stats.lines.map(([, line]) => line).join('\n');
    expect(text).toContain(`Images: ${IMAGES} (${IMAGES} optimized, 0 to do).`);
    expect(text).toMatch(/One upload costs up to \d+ API requests/);

    const some = ids.slice(0, 3).map(String);
    const restored = await cli('restore', some);
    expect(restored.exit).toBe(0);
    expect(restored.bars).toEqual([{ label: 'Restoring originals', count: 3, ticks: 3, finished: true }]);
    for (const id of ids.slice(0, 3))
      expect(sha256(originals.get(id)?.path ?? '')).toBe(originals.get(id)?.hash);

    const before = compressed().length;
    const optimized = await cli('optimize', some);
    expect(optimized.exit).toBe(0);
    expect(optimized.lines.at(-1)).toEqual([
      'success',
      '3 optimized, 0 already optimized, 0 failed; 3 API requests.',
    ]);
    expect(optimized.bars[0]).toMatchObject({ count: 3, ticks: 3, finished: true });
    expect(compressed()).toHaveLength(before + 3);

    const all = await cli('optimize', [], { all: true });
    expect(all.lines.at(-1)).toEqual([
      'success',
      `0 optimized, ${IMAGES} already optimized, 0 failed; 0 API requests.`,
    ]);
    expect(compressed()).toHaveLength(before + 3);

    const bad = await cli('optimize', ['999999']);
    expect(bad.exit).toBe(1);
    expect(bad.lines.at(-1)).toEqual(['error', '"999999" is not the ID of an image in the media library.']);
    const none = await cli('restore');
    expect(none.exit).toBe(1);
    expect(none.lines.at(-1)?.[1]).toContain('--all');
    expect(existsSync(originals.get(ids[0] ?? 0)?.path ?? '')).toBe(true);
  });
});
