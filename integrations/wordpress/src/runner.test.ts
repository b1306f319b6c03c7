// The background runner does not lose work when a request dies, in a real WordPress against a real
// Compresso server. The runner leases an event (moves it Compresso_Runner::LEASE seconds ahead) instead of
// taking it out of the schedule, and removes it when the work is over. Death is simulated by an exception
// thrown from inside the work (the request to the Compresso server), after the lease and the attempt were
// taken; the time a dead runner's lease takes to run out is simulated by moving the leased event into the
// past and leaving the locks a dead runner leaves behind, as old as the lease.
//
// Nothing runs behind the tests' backs: a must-use plugin turns WP-Cron's page-load spawns off
// (DISABLE_WP_CRON) and refuses every loopback request (the runner's and spawn_cron()'s) with an error,
// writing down which were asked for; each test runs the runner (or wp-cron.php) itself.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activatePlugin, sideloadPhp, startWordPress, type WordPress } from './testing/wordpress.ts';
import { installWpCliStandIn } from './testing/wp-cli.ts';

const CORPUS = join(import.meta.dirname, '../../../../shared/corpus');
const PHOTO = 'photo-mate-Dune.jpg';

let wp: WordPress;
let api: TestServer;
let key: string;
/** Where the WP-CLI stand-in is, for `require_once` (testing/wp-cli.ts). */
let standIn: string;

const compressCalls = () => api.logLines.filter((l) => l.path === '/api/v1/compress').length;

interface Look {
  status: string;
  error: { code: string; message: string } | null;
  /** Seconds from now to the attachment's event (null: none scheduled). */
  scheduledIn: number | null;
  attempts: number;
  runnerLock: number;
  attachmentLock: number;
}

/** PHP: the attachment's record, its event and the locks, as `$look` (`id`: a number or a PHP variable). */
function look(id: number | string): string {
  return `wp_cache_delete( 'alloptions', 'options' ); wp_cache_delete( ${id}, 'post_meta' );
    $s = Compresso_Optimizer::state( ${id} );
    $at = wp_next_scheduled( Compresso_Optimizer::CRON_HOOK, array( ${id} ) );
    $look = array(
      'status' => $s['status'], 'error' => $s['error'],
      'scheduledIn' => $at ? $at - time() : null,
      'attempts' => (int) get_post_meta( ${id}, Compresso_Optimizer::ATTEMPTS_META, true ),
      'runnerLock' => compresso_lock_held_since( Compresso_Runner::LOCK_OPTION ),
      'attachmentLock' => compresso_lock_held_since( Compresso_Optimizer::LOCK_PREFIX . ${id} ),
    );`;
}

async function upload(name: string): Promise<number> {
  const { value } = await wp.php<number>(
    `${sideloadPhp(`/corpus/${PHOTO}`, name)} compresso_test_out( $id );`,
    {
      asAdmin: true,
    },
  );
  return value;
}

/** Runs a runner whose request dies (an exception) while it sends the attachment's first file. */
async function dyingRunner(id: number): Promise<Look & { died: string }> {
  const { value } = await wp.php<Look & { died: string }>(`
    add_filter( 'pre_http_request', function ( $pre, $args, $url ) {
      if ( false !== strpos( $url, '/api/v1/compress' ) ) { throw new RuntimeException( 'simulated death' ); }
      return $pre;
    }, 10, 3 );
    $died = '';
    try { Compresso_Runner::run(); } catch ( RuntimeException $e ) { $died = $e->getMessage(); }
    ${look(id)} $look['died'] = $died; compresso_test_out( $look );`);
  return value;
}

/**
 * The lease runs out: the attachment's event comes due, and the locks the dead runner held are as old as
 * the lease (a real death leaves them; the exception above released them on its way out).
 */
async function leaseRunsOut(id: number): Promise<void> {
  await wp.php(`
    wp_cache_delete( 'alloptions', 'options' );
    $args = array( ${id} );
    $at = wp_next_scheduled( Compresso_Optimizer::CRON_HOOK, $args );
    if ( ! $at ) { throw new Exception( 'no event to let run out' ); }
    _set_cron_array( Compresso_Runner::moved( _get_cron_array(), Compresso_Optimizer::CRON_HOOK, $args, $at, time() - 1 ) );
    global $wpdb;
    foreach ( array( Compresso_Runner::LOCK_OPTION, Compresso_Optimizer::LOCK_PREFIX . ${id} ) as $name ) {
      $wpdb->replace( $wpdb->options, array( 'option_name' => $name, 'option_value' => (string) ( time() - Compresso_Runner::LEASE ), 'autoload' => 'no' ) );
    }
    compresso_test_out( 1 );`);
}

/**
 * `wp compresso optimize <id>` (the command class, called through a small WP_CLI stand-in: WP-CLI is not
 * installed here); with `die`, its request dies (an exception) while it sends the attachment's first file.
 */
async function cliOptimize(
  id: number,
  die: boolean,
): Promise<Look & { died: string; lines: [string, string][] }> {
  const { value } = await wp.php<Look & { died: string; lines: [string, string][] }>(`
    require_once '${standIn}';
    if ( ${die ? 'true' : 'false'} ) {
      add_filter( 'pre_http_request', function ( $pre, $args, $url ) {
        if ( false !== strpos( $url, '/api/v1/compress' ) ) { throw new RuntimeException( 'simulated death' ); }
        return $pre;
      }, 10, 3 );
    }
    $died = '';
    try { compresso_test_cli( 'optimize', array( '${id}' ) ); }
    catch ( RuntimeException $e ) { $died = $e->getMessage(); }
    ${look(id)} $look['died'] = $died; $look['lines'] = WP_CLI::$lines; compresso_test_out( $look );`);
  return value;
}

async function runRunner(id: number): Promise<Look & { ran: number }> {
  const { value } = await wp.php<Look & { ran: number }>(
    `$ran = Compresso_Runner::run(); ${look(id)} $look['ran'] = $ran; compresso_test_out( $look );`,
  );
  return value;
}

beforeAll(async () => {
  api = await startTestServer({ dbPath: ':memory:', overrides: { maxUploadBytes: 20 * 1024 * 1024 } });
  key = (await proAccount(api.db, 'runner@example.com')).key;
  wp = await startWordPress({ mounts: [{ hostPath: CORPUS, vfsPath: '/corpus' }] });
  standIn = installWpCliStandIn(wp);
  const mu = wp.hostPath('/wordpress/wp-content/mu-plugins/compresso-test-loopbacks.php');
  mkdirSync(join(mu, '..'), { recursive: true });
  writeFileSync(
    mu,
    `<?php
    define( 'DISABLE_WP_CRON', true );
    add_filter( 'pre_http_request', function ( $pre, $args, $url ) {
      foreach ( array( 'admin-ajax.php', 'wp-cron.php' ) as $loopback ) {
        if ( false !== strpos( $url, $loopback ) ) {
          $asked = get_option( 'compresso_test_loopbacks', array() );
          $asked[] = $loopback;
          update_option( 'compresso_test_loopbacks', $asked, false );
          return new WP_Error( 'http_request_failed', 'loopback refused by the test' );
        }
      }
      return $pre;
    }, 10, 3 );
`,
  );
  await activatePlugin(wp);
  await wp.php(`update_option( 'compresso_settings', array_merge( compresso_get_settings(), array(
      'server_url' => '${api.url}', 'api_key' => compresso_encrypt_secret( '${key}' ),
      'quality' => 75, 'webp' => false, 'avif' => false, 'backups' => true, 'max_dimension' => 0,
    ) ) );
    compresso_test_out( compresso_is_connected() );`);
}, 300_000);

afterAll(async () => {
  await wp?.close();
  await api?.close();
});

describe('the runner when a request dies', { timeout: 600_000 }, () => {
  let survivor: number;

  it('leaves the event of a runner that died scheduled, and a later run finishes the attachment', async () => {
    survivor = await upload('dies-once.jpg');
    const calls = compressCalls();
    const dead = await dyingRunner(survivor);
    expect(dead.died).toBe('simulated death');
    expect(dead.status).toBe('queued');
    expect(dead.attempts).toBe(1);
    // Leased: still scheduled, Compresso_Runner::LEASE (360 s) ahead (a second or two taken on the way).
    expect(dead.scheduledIn).toBeGreaterThan(350);
    expect(dead.scheduledIn).toBeLessThanOrEqual(360);
    expect(compressCalls()).toBe(calls);

    // A runner before the lease runs out leaves the event alone: the dead one might still be working.
    const early = await runRunner(survivor);
    expect(early.ran).toBe(0);
    expect(early.status).toBe('queued');
    expect(early.scheduledIn).toBeGreaterThan(340);

    await leaseRunsOut(survivor);
    const later = await runRunner(survivor);
    expect(later).toMatchObject({
      ran: 1,
      status: 'done',
      error: null,
      scheduledIn: null,
      attempts: 0,
      runnerLock: 0,
      attachmentLock: 0,
    });
    expect(compressCalls()).toBeGreaterThan(calls);
  });

  it('marks an image that kills PHP every time failed after three attempts, with a message the media library shows', async () => {
    const poison = await upload('poison.jpg');
    for (let attempt = 1; attempt <= 3; attempt++) {
      const dead = await dyingRunner(poison);
      expect(dead.died).toBe('simulated death');
      expect(dead).toMatchObject({ status: 'queued', attempts: attempt });
      expect(dead.scheduledIn).toBeGreaterThan(350);
      await leaseRunsOut(poison);
    }
    const calls = compressCalls();
    const last = await runRunner(poison);
    expect(last).toMatchObject({ ran: 1, status: 'error', scheduledIn: null, attempts: 0 });
    expect(last.error?.code).toBe('compresso_gave_up');
    expect(last.error?.message).toMatch(/^Compresso stopped trying after 3 attempts: /);
    // Given up without sending the image once more.
    expect(compressCalls()).toBe(calls);
    const { value: column } = await wp.php<string>(
      `compresso_test_out( Compresso_Media::summary_html( ${poison}, true ) );`,
      { asAdmin: true },
    );
    expect(column).toContain('Compresso stopped trying after 3 attempts');
    expect(column).toContain('Try again');

    // Try again (the media library's action queues it) starts a fresh count, and it is compressed.
    const again = await wp.php<Look & { ran: number }>(
      `Compresso_Optimizer::queue( ${poison}, 'manual' ); $ran = Compresso_Runner::run(); ${look(poison)} $look['ran'] = $ran; compresso_test_out( $look );`,
    );
    expect(again.value).toMatchObject({
      ran: 1,
      status: 'done',
      error: null,
      scheduledIn: null,
      attempts: 0,
    });
  });

  it('WP-CLI optimize tries an image Compresso was about to give up on, from a fresh count, and counts a death during the command', async () => {
    const id = await upload('cli.jpg');
    // What three tries that died leave (the previous test shows them): the runner's next turn gives up.
    await wp.php(
      `update_post_meta( ${id}, Compresso_Optimizer::ATTEMPTS_META, Compresso_Optimizer::MAX_ATTEMPTS ); compresso_test_out( 1 );`,
    );
    const calls = compressCalls();
    const dead = await cliOptimize(id, true);
    expect(dead.died).toBe('simulated death');
    // Asked for by hand: tried (not given up on), with this try counted as the first of a new count.
    expect(dead).toMatchObject({ status: 'queued', error: null, attempts: 1 });
    // Its event kept, leased: the background runner takes it up after the lease, the death counted.
    expect(dead.scheduledIn).toBeGreaterThan(350);
    expect(dead.scheduledIn).toBeLessThanOrEqual(360);
    expect(compressCalls()).toBe(calls);

    const done = await cliOptimize(id, false);
    expect(done).toMatchObject({ died: '', status: 'done', error: null, attempts: 0, scheduledIn: null });
    expect(done.lines.at(-1)?.[0]).toBe('success');
    expect(done.lines.at(-1)?.[1]).toMatch(
      /^1 optimized, 0 already optimized, 0 failed; \d+ API requests\.$/,
    );
    expect(compressCalls()).toBeGreaterThan(calls);
  });

  it('sends nothing for a stale event of an attachment already done, restored or failed', async () => {
    const restored = await upload('restored.jpg');
    await runRunner(restored);
    const failed = await upload('failed.jpg');
    const { value: prepared } = await wp.php<{ restored: unknown; failed: string }>(`
      $r = Compresso_Optimizer::restore( ${restored} );
      $s = Compresso_Optimizer::state( ${failed} );
      $s['status'] = 'error'; $s['error'] = array( 'code' => 'INVALID_IMAGE', 'message' => 'recorded before' );
      update_post_meta( ${failed}, Compresso_Optimizer::META, $s );
      wp_clear_scheduled_hook( Compresso_Optimizer::CRON_HOOK, array( ${failed} ) );
      compresso_test_out( array( 'restored' => $r, 'failed' => Compresso_Optimizer::state( ${failed} )['status'] ) );`);
    expect(prepared).toEqual({ restored: true, failed: 'error' });
    const calls = compressCalls();
    // The events a runner that died after finishing its work would have left, come due.
    const { value } = await wp.php<{ ran: number; states: string[]; left: boolean[] }>(`
      $ids = array( ${survivor}, ${restored}, ${failed} );
      foreach ( $ids as $id ) { wp_schedule_single_event( time() - 1, Compresso_Optimizer::CRON_HOOK, array( $id ) ); }
      $ran = Compresso_Runner::run();
      $states = array(); $left = array();
      foreach ( $ids as $id ) {
        wp_cache_delete( $id, 'post_meta' );
        $states[] = Compresso_Optimizer::state( $id )['status'];
        $left[] = (bool) wp_next_scheduled( Compresso_Optimizer::CRON_HOOK, array( $id ) );
      }
      compresso_test_out( array( 'ran' => $ran, 'states' => $states, 'left' => $left ) );`);
    expect(value).toEqual({ ran: 3, states: ['done', 'new', 'error'], left: [false, false, false] });
    expect(compressCalls()).toBe(calls);
  });

  it('puts back the event of an upload that a stale write of the schedule dropped, at the next sweep, and a runner finishes it', async () => {
    // The sweep is held off (its next time an hour away) while the loss is made.
    const holdSweep = `update_option( Compresso_Optimizer::SWEEP_OPTION, time() + HOUR_IN_SECONDS, true );`;
    // A request that read the schedule before the upload added its event, and writes it back after (as
    // wp-cron.php does after each event it runs, from the schedule it read when it started).
    const { value: lost } = await wp.php<Look & { id: number }>(`
      ${holdSweep}
      wp_cache_delete( 'alloptions', 'options' );
      $stale = _get_cron_array();
      ${sideloadPhp(`/corpus/${PHOTO}`, 'lost.jpg')}
      $added = (bool) wp_next_scheduled( Compresso_Optimizer::CRON_HOOK, array( $id ) );
      _set_cron_array( $stale );
      ${look('$id')} $look['id'] = $id; $look['added'] = $added; compresso_test_out( $look );`);
    expect(lost).toMatchObject({ status: 'queued', scheduledIn: null, added: true });
    const id = lost.id;
    const calls = compressCalls();

    // Before the sweep is due, requests leave it so (one autoloaded option read, nothing else).
    await wp.php(`${look(id)} compresso_test_out( $look );`);
    const waiting = (await wp.php<Look>(`${look(id)} compresso_test_out( $look );`)).value;
    expect(waiting).toMatchObject({ status: 'queued', scheduledIn: null });

    // A minute after the last sweep (its time and its lock both as old as that), a request ends (its
    // shutdown) with a sweep, which schedules the event, due now.
    const { value: due } = await wp.php<Look>(`
      update_option( Compresso_Optimizer::SWEEP_OPTION, time() - 1, true );
      global $wpdb;
      $wpdb->replace( $wpdb->options, array( 'option_name' => Compresso_Optimizer::SWEEP_LOCK,
        'option_value' => (string) ( time() - Compresso_Optimizer::SWEEP_EVERY ), 'autoload' => 'no' ) );
      ${look(id)} compresso_test_out( $look );`);
    expect(due.scheduledIn).toBeNull();
    const { value: swept } = await wp.php<Look & { next: number; now: number; lost: number[] }>(`
      ${look(id)} $look['next'] = (int) get_option( Compresso_Optimizer::SWEEP_OPTION ); $look['now'] = time();
      $look['lost'] = Compresso_Optimizer::requeue_lost(); compresso_test_out( $look );`);
    expect(swept.status).toBe('queued');
    expect(swept.scheduledIn).not.toBeNull();
    expect(swept.scheduledIn).toBeLessThanOrEqual(0);
    // The next sweep is a minute away, and a sweep now finds nothing lost.
    expect(swept.next - swept.now).toBeGreaterThan(50);
    expect(swept.next - swept.now).toBeLessThanOrEqual(60);
    expect(swept.lost).toEqual([]);

    const finished = await runRunner(id);
    expect(finished).toMatchObject({ ran: 1, status: 'done', error: null, scheduledIn: null, attempts: 0 });
    expect(compressCalls()).toBeGreaterThan(calls);
  });

  it('puts back the lost retry of an image waiting for the quota at the time the server gave, unless a bulk run holds it', async () => {
    const id = await upload('waits.jpg');
    // The server answers QUOTA_EXCEEDED with Retry-After: 600; the runner records the wait.
    const { value: waiting } = await wp.php<Look & { retryIn: number }>(`
      add_filter( 'pre_http_request', function ( $pre, $args, $url ) {
        if ( false === strpos( $url, '/api/v1/compress' ) ) { return $pre; }
        return array( 'headers' => array( 'retry-after' => '600' ), 'cookies' => array(), 'filename' => null,
          'response' => array( 'code' => 429, 'message' => 'Too Many Requests' ),
          'body' => wp_json_encode( array( 'error' => array( 'code' => 'QUOTA_EXCEEDED', 'message' => 'The daily quota is used up.' ) ) ) );
      }, 10, 3 );
      Compresso_Runner::run();
      ${look(id)} $look['retryIn'] = Compresso_Optimizer::state( ${id} )['retry_at'] - time(); compresso_test_out( $look );`);
    expect(waiting.status).toBe('waiting');
    expect(waiting.retryIn).toBeGreaterThan(590);
    expect(waiting.retryIn).toBeLessThanOrEqual(600);
    expect(Math.abs((waiting.scheduledIn ?? 0) - waiting.retryIn)).toBeLessThanOrEqual(1);

    // A stale write of the schedule drops the retry; the next sweep is due.
    const sweepDue = `update_option( Compresso_Optimizer::SWEEP_OPTION, time() - 1, true );
      global $wpdb;
      $wpdb->replace( $wpdb->options, array( 'option_name' => Compresso_Optimizer::SWEEP_LOCK,
        'option_value' => (string) ( time() - Compresso_Optimizer::SWEEP_EVERY ), 'autoload' => 'no' ) );`;
    const lose = `wp_clear_scheduled_hook( Compresso_Optimizer::CRON_HOOK, array( ${id} ) );`;
    // A bulk run waiting for the reset holds the image for its own retry: the sweep leaves it.
    await wp.php(`update_option( Compresso_Bulk::OPTION, array_merge( Compresso_Bulk::run(),
        array( 'status' => 'waiting', 'retry' => array( ${id} ) ) ), false );
      ${lose} ${sweepDue} compresso_test_out( 1 );`);
    const held = (await wp.php<Look>(`${look(id)} compresso_test_out( $look );`)).value;
    expect(held).toMatchObject({ status: 'waiting', scheduledIn: null });

    // Without the run, the retry is put back where it was, not now.
    await wp.php(`delete_option( Compresso_Bulk::OPTION ); ${lose} ${sweepDue} compresso_test_out( 1 );`);
    const back = (
      await wp.php<Look & { retryIn: number }>(
        `${look(id)} $look['retryIn'] = Compresso_Optimizer::state( ${id} )['retry_at'] - time(); compresso_test_out( $look );`,
      )
    ).value;
    expect(back.status).toBe('waiting');
    expect(Math.abs((back.scheduledIn ?? 0) - back.retryIn)).toBeLessThanOrEqual(1);
    expect(back.scheduledIn).toBeGreaterThan(500);

    // Out of the way of the tests after this one: the record moved on by a write around save_state()
    // (as these tests make), so the sweep finds a stale mark, schedules nothing and removes the mark.
    const { value: after } = await wp.php<{ lost: number[]; mark: string; scheduled: boolean }>(`${lose}
      $s = Compresso_Optimizer::state( ${id} ); $s['status'] = 'new';
      update_post_meta( ${id}, Compresso_Optimizer::META, $s );
      $marked = get_post_meta( ${id}, Compresso_Optimizer::PENDING_META, true );
      $lost = Compresso_Optimizer::requeue_lost();
      compresso_test_out( array( 'lost' => $lost, 'mark' => $marked . '|' . get_post_meta( ${id}, Compresso_Optimizer::PENDING_META, true ),
        'scheduled' => (bool) wp_next_scheduled( Compresso_Optimizer::CRON_HOOK, array( ${id} ) ) ) );`);
    expect(after).toEqual({ lost: [], mark: 'waiting|', scheduled: false });
  });

  it('leaves the event to WP-Cron when the runner’s loopback request fails, and WP-Cron alone finishes it', async () => {
    await wp.php(
      `delete_option( 'compresso_test_loopbacks' ); delete_transient( 'doing_cron' ); compresso_test_out( 1 );`,
    );
    // The upload's shutdown starts the runner: its request is refused, so spawn_cron() is asked at once.
    const id = await upload('no-loopback.jpg');
    const { value: after } = await wp.php<Look & { asked: string[] }>(
      `${look(id)} $look['asked'] = get_option( 'compresso_test_loopbacks', array() ); compresso_test_out( $look );`,
    );
    expect(after.asked).toEqual(['admin-ajax.php', 'wp-cron.php']);
    expect(after.status).toBe('queued');
    expect(after.scheduledIn).not.toBeNull();
    expect(after.scheduledIn).toBeLessThanOrEqual(0);

    // WP-Cron on its own (a visit's spawn, or a system cron): wp-cron.php runs the event.
    await wp.php(`delete_transient( 'doing_cron' ); compresso_test_out( 1 );`);
    const cron = await fetch(`${wp.url}/wp-cron.php`);
    expect(cron.status).toBe(200);
    await cron.text();
    // wp-cron.php may answer before its work ends (fastcgi_finish_request where PHP has it): the record
    // is read until it leaves `queued`, for at most two minutes.
    const started = performance.now();
    let done = (await wp.php<Look>(`${look(id)} compresso_test_out( $look );`)).value;
    while (done.status === 'queued' && performance.now() - started < 120_000) {
      done = (await wp.php<Look>(`${look(id)} compresso_test_out( $look );`)).value;
    }
    expect(done).toMatchObject({
      status: 'done',
      error: null,
      scheduledIn: null,
      attempts: 0,
      attachmentLock: 0,
    });
  });
});
