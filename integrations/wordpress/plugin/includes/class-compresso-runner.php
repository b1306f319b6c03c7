<?php
/**
 * The plugin's own background runner: a non-blocking loopback request to admin-ajax.php, signed, that
 * runs the plugin's due WP-Cron events (an upload's compression, a bulk run's tick) at once.
 *
 * Why not only spawn_cron(): wp-cron.php runs every due event of the site, oldest first, in one request,
 * and holds core's lock (doing_cron) meanwhile, so a just-uploaded image waits behind whatever core and
 * other plugins have due (update checks, Site Health's scheduled tests with their own loopback requests:
 * 25–100 s measured on a fresh site), and a spawn during that run is refused. The events stay in WP-Cron
 * all the same: a site whose loopback requests are blocked gets them done by the next WP-Cron run, as
 * before. The filter `compresso_use_runner` (return false) turns the runner off.
 *
 * One runner at a time (compresso_lock()), so the site's PHP workers are not all taken by
 * background work; it works through the due events for up to TIME_BUDGET seconds and hands the rest to
 * a fresh request.
 *
 * An event is leased, never taken out of the schedule before its work: the runner moves it LEASE
 * seconds ahead, runs it, and removes it when the work is over (done, or a failure recorded). A runner
 * that dies on the way (killed, a fatal error, the time limit) leaves the event scheduled; it comes due
 * again after the dead runner's locks have gone stale, and the next runner (or WP-Cron) runs it. The
 * plugin's own callbacks lease their event themselves when WP-Cron runs them (wp-cron.php takes an event
 * out of the schedule before it runs it), so a WP-Cron request that dies loses nothing either. How many
 * times an attachment is tried is counted (Compresso_Optimizer::attempt()), so an image that kills PHP
 * every time is marked failed instead of being tried for ever.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Starts and runs the background runner.
 */
class Compresso_Runner {

	const ACTION       = 'compresso_run';
	const LOCK_OPTION  = 'compresso_runner_lock';
	const LOCK_TIMEOUT = 300;
	/** Seconds of work before the runner hands over to a new request. */
	const TIME_BUDGET = 20;
	/** Seconds a signed start request stays valid. */
	const TOKEN_TTL = 300;
	/**
	 * Seconds ahead an event is moved while its work runs: a minute past the locks' timeout (the runner's,
	 * the bulk tick's, an attachment's, all 300 s), so when a dead request's event comes due again, the
	 * locks it left are stale and the next request takes them over.
	 */
	const LEASE = 360;

	/** @var bool Whether this request asked for the runner (it is started at shutdown, once). */
	private static $wanted = false;

	/** @var array<string, int> The leases this request holds: hook and args' key => the event's timestamp. */
	private static $leases = array();

	/**
	 * The hooks whose events the runner runs.
	 *
	 * @return string[]
	 */
	public static function hooks() {
		return array( Compresso_Optimizer::CRON_HOOK, Compresso_Bulk::CRON_HOOK );
	}

	/**
	 * @return bool Whether the runner is used (else WP-Cron alone runs the plugin's events).
	 */
	public static function enabled() {
		return (bool) apply_filters( 'compresso_use_runner', true );
	}

	/**
	 * Asks for the runner at the end of this request.
	 */
	public static function want() {
		self::$wanted = true;
	}

	/**
	 * The shutdown action: when asked for, the non-blocking loopback request that starts the runner.
	 */
	public static function maybe_start() {
		if ( ! self::$wanted ) {
			return;
		}
		self::$wanted = false;
		self::start();
	}

	/**
	 * Sends the request that starts a runner (it returns at once; the work happens in that request).
	 */
	public static function start() {
		$expires = time() + self::TOKEN_TTL;
		/**
		 * The runner's start request, as core's `cron_request` filter for spawn_cron(): a host whose
		 * loopback is slow to connect (more than the 10 ms core allows its own) raises the timeout here.
		 *
		 * @param array $request url and args for wp_remote_post().
		 */
		$request = apply_filters(
			'compresso_runner_request',
			array(
				'url'  => admin_url( 'admin-ajax.php' ),
				'args' => array(
					'timeout'   => 0.01,
					'blocking'  => false,
					'body'      => array(
						'action'  => self::ACTION,
						'expires' => $expires,
						'token'   => self::token( $expires ),
					),
					/** This filter is documented in wp-includes/class-wp-http-streams.php */
					'sslverify' => apply_filters( 'https_local_ssl_verify', false ),
				),
			)
		);
		$sent = wp_remote_post( $request['url'], $request['args'] );
		if ( is_wp_error( $sent ) ) {
			// The loopback did not start (refused, DNS, a host that blocks it): the events are still in
			// the schedule, so WP-Cron runs them; ask it now rather than on the next visit.
			spawn_cron();
		}
	}

	/**
	 * @param int $expires Unix time the token stops being accepted.
	 * @return string HMAC of the expiry with a key derived from the site's salts.
	 */
	public static function token( $expires ) {
		return hash_hmac( 'sha256', self::ACTION . '|' . (int) $expires, wp_salt( 'nonce' ) );
	}

	/**
	 * The admin-ajax handler (logged in or not: the loopback carries no cookies). Answers 403 to a
	 * request without a valid, unexpired token.
	 */
	public static function handle() {
		$expires = isset( $_POST['expires'] ) ? (int) $_POST['expires'] : 0; // phpcs:ignore WordPress.Security.NonceVerification.Missing -- signed with a token instead (no user session on a loopback).
		$token   = isset( $_POST['token'] ) ? sanitize_text_field( wp_unslash( $_POST['token'] ) ) : ''; // phpcs:ignore WordPress.Security.NonceVerification.Missing
		if ( $expires < time() || $expires > time() + self::TOKEN_TTL || ! hash_equals( self::token( $expires ), $token ) ) {
			wp_die( '', '', array( 'response' => 403 ) );
		}
		ignore_user_abort( true );
		if ( function_exists( 'set_time_limit' ) ) {
			@set_time_limit( self::LOCK_TIMEOUT ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
		}
		self::run();
		wp_die( '', '', array( 'response' => 200 ) );
	}

	/**
	 * Runs the plugin's due events until none is left or the time budget is spent (then a new runner is
	 * asked for). Does nothing while another runner holds the lock.
	 *
	 * @return int Events run.
	 */
	public static function run() {
		if ( ! self::lock() ) {
			return 0;
		}
		$ends = microtime( true ) + self::TIME_BUDGET;
		$ran  = 0;
		try {
			for ( ;; ) {
				$event = self::next_due();
				if ( ! $event ) {
					break;
				}
				if ( microtime( true ) >= $ends ) {
					self::want();
					break;
				}
				// Leased, not taken out of the schedule: if this request dies while the work runs, the event
				// comes due again. An event a concurrent WP-Cron run took first is no longer where it was
				// and is skipped here.
				$leased = self::lease( $event['hook'], $event['args'], $event['timestamp'] );
				if ( null === $leased ) {
					continue;
				}
				if ( ! $leased ) {
					// Not written (the database refused): left to WP-Cron rather than tried in a loop.
					break;
				}
				do_action_ref_array( $event['hook'], $event['args'] );
				// Only when the work returned: an exception leaves the lease to run out.
				self::release( $event['hook'], $event['args'] );
				++$ran;
			}
		} finally {
			self::unlock();
		}
		// Queued while this runner was finishing (its start was refused by the lock): run it now.
		if ( ! self::$wanted && self::next_due() ) {
			self::want();
		}
		return $ran;
	}

	/**
	 * @return array|null The oldest due event of the plugin's hooks (timestamp, hook, args).
	 */
	private static function next_due() {
		// The schedule as another request may have changed it (`cron` is an autoloaded option).
		wp_cache_delete( 'alloptions', 'options' );
		$crons = _get_cron_array();
		$now   = time();
		foreach ( $crons as $timestamp => $hooks ) {
			if ( $timestamp > $now ) {
				break;
			}
			foreach ( self::hooks() as $hook ) {
				if ( empty( $hooks[ $hook ] ) ) {
					continue;
				}
				$event = reset( $hooks[ $hook ] );
				return array(
					'timestamp' => (int) $timestamp,
					'hook'      => $hook,
					'args'      => isset( $event['args'] ) ? (array) $event['args'] : array(),
				);
			}
		}
		return null;
	}

	/**
	 * Moves an event LEASE seconds ahead (or, without $from, adds it there), in one write of the schedule,
	 * and remembers that this request holds it. Two runners never lease the same event at once: one
	 * runner at a time holds the runner's lock, and a WP-Cron run leases only an event it took out of the
	 * schedule itself.
	 *
	 * @param string   $hook The event's hook.
	 * @param array    $args The event's arguments.
	 * @param int|null $from The timestamp the event is due at; null: add the event (WP-Cron took it out).
	 * @return bool|null True when leased, null when the event is not at $from (another request took it),
	 *                   false when the schedule could not be written.
	 */
	public static function lease( $hook, array $args, $from = null ) {
		wp_cache_delete( 'alloptions', 'options' );
		$until = time() + self::LEASE;
		$crons = self::moved( _get_cron_array(), $hook, $args, $from, $until );
		if ( null === $crons ) {
			return null;
		}
		if ( true !== _set_cron_array( $crons, true ) ) {
			return false;
		}
		self::$leases[ self::key( $hook, $args ) ] = $until;
		return true;
	}

	/**
	 * The event stays in the schedule while this request works on it: leased now unless this request
	 * leased it already (the runner does before it runs an event; wp-cron.php takes it out instead).
	 *
	 * @param string $hook The event's hook.
	 * @param array  $args The event's arguments.
	 */
	public static function hold( $hook, array $args ) {
		if ( ! isset( self::$leases[ self::key( $hook, $args ) ] ) ) {
			self::lease( $hook, $args );
		}
	}

	/**
	 * Ends this request's lease on an event: the leased event is removed from the schedule (the work is
	 * over, or whoever releases schedules the event anew, as a quota wait does). An event someone
	 * scheduled at another time meanwhile stays.
	 *
	 * @param string $hook The event's hook.
	 * @param array  $args The event's arguments.
	 */
	public static function release( $hook, array $args ) {
		$key = self::key( $hook, $args );
		if ( ! isset( self::$leases[ $key ] ) ) {
			return;
		}
		$until = self::$leases[ $key ];
		unset( self::$leases[ $key ] );
		wp_cache_delete( 'alloptions', 'options' );
		$crons = _get_cron_array();
		if ( isset( $crons[ $until ][ $hook ][ md5( serialize( $args ) ) ] ) ) { // phpcs:ignore WordPress.PHP.DiscouragedPHPFunctions.serialize_serialize -- core's key for an event's arguments.
			wp_unschedule_event( $until, $hook, $args );
		}
	}

	/**
	 * The schedule with one single event moved (or added): a pure function of core's cron array.
	 *
	 * @param array    $crons timestamp => hook => args' key => event, as _get_cron_array() gives it.
	 * @param string   $hook  The event's hook.
	 * @param array    $args  The event's arguments.
	 * @param int|null $from  Where the event is; null: add it (an identical event elsewhere is kept).
	 * @param int      $to    Where it goes.
	 * @return array|null The new schedule, in timestamp order; null when the event is not at $from.
	 */
	public static function moved( array $crons, $hook, array $args, $from, $to ) {
		$key   = md5( serialize( $args ) ); // phpcs:ignore WordPress.PHP.DiscouragedPHPFunctions.serialize_serialize -- core's key for an event's arguments.
		$event = array(
			'schedule' => false,
			'args'     => $args,
		);
		if ( null !== $from ) {
			if ( ! isset( $crons[ $from ][ $hook ][ $key ] ) ) {
				return null;
			}
			$event = $crons[ $from ][ $hook ][ $key ];
			unset( $crons[ $from ][ $hook ][ $key ] );
			if ( empty( $crons[ $from ][ $hook ] ) ) {
				unset( $crons[ $from ][ $hook ] );
			}
			if ( empty( $crons[ $from ] ) ) {
				unset( $crons[ $from ] );
			}
		}
		$crons[ (int) $to ][ $hook ][ $key ] = $event;
		ksort( $crons );
		return $crons;
	}

	/**
	 * @return string The key of an event in this request's leases.
	 */
	private static function key( $hook, array $args ) {
		return $hook . '|' . md5( serialize( $args ) ); // phpcs:ignore WordPress.PHP.DiscouragedPHPFunctions.serialize_serialize
	}

	private static function lock() {
		return compresso_lock( self::LOCK_OPTION, self::LOCK_TIMEOUT );
	}

	private static function unlock() {
		compresso_unlock( self::LOCK_OPTION );
	}
}
