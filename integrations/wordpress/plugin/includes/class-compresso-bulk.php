<?php
/**
 * The bulk optimizer: one durable run over the media library, processed in the background by WP-Cron
 * (each tick chains the next through the same non-blocking loopback request core's spawn_cron() makes),
 * so it goes on after the browser is closed.
 *
 * The run lives in one option (`compresso_bulk`, not autoloaded): its status, a cursor (the last
 * attachment ID handled, in ascending order up to the highest ID when it started), counters, the images
 * that failed with the server's code, and when it waits for the quota, the time it goes on by itself.
 * Each image goes through Compresso_Optimizer::optimize(), which never sends a file whose hash says it
 * is already done, so an image is not processed twice, even when a run is started again.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Starts, pauses, resumes, cancels and runs the bulk optimization; estimates what it costs.
 */
class Compresso_Bulk {

	const OPTION       = 'compresso_bulk';
	const QUOTA_OPTION = 'compresso_quota';
	const LOCK_OPTION  = 'compresso_bulk_lock';
	/** Images the admin asked to try again, taken into the run by the next tick. */
	const RETRY_OPTION = 'compresso_bulk_retry';
	const CRON_HOOK    = 'compresso_bulk_tick';
	/** A tick older than this is taken to have died (PHP killed): the next one takes over. */
	const LOCK_TIMEOUT = 300;
	/** Seconds one tick works before it hands over to the next request (kept under WP_CRON_LOCK_TIMEOUT). */
	const TIME_BUDGET = 20;
	/** Seconds added to the server's Retry-After before the run goes on. */
	const RESET_SLACK = 2;

	/** @var bool Whether this request asked for the next tick to be started at shutdown. */
	private static $kick = false;

	/**
	 * @return array The run (an idle one when none was ever started).
	 */
	public static function run() {
		// Other processes (the cron ticks, the admin's requests) write the option: read it afresh.
		wp_cache_delete( self::OPTION, 'options' );
		$run = get_option( self::OPTION, array() );
		return array_merge(
			array(
				'status'       => 'idle',
				'id'           => '',
				'started_at'   => null,
				'updated_at'   => null,
				'finished_at'  => null,
				'max_id'       => 0,
				'cursor'       => 0,
				'total'        => 0,
				'processed'    => 0,
				'optimized'    => 0,
				'skipped'      => 0,
				'requests'     => 0,
				'bytes_before' => 0,
				'bytes_after'  => 0,
				'failed'       => array(),
				'retry'        => array(),
				'resume_at'    => null,
				'wait_reason'  => null,
				// Each stop for the quota (or a rate limit): reason, at, resume_at, resumed_at, by, processed.
				'waits'        => array(),
				'ticks'        => 0,
			),
			is_array( $run ) ? $run : array()
		);
	}

	private static function save( array $run ) {
		$run['updated_at'] = time();
		update_option( self::OPTION, $run, false );
		return $run;
	}

	/**
	 * A tick's write: a pause or cancel the admin wrote while the tick worked on an image wins over
	 * the tick's copy of the status.
	 */
	private static function save_progress( array $run ) {
		$current = self::run();
		if ( $current['id'] !== $run['id'] ) {
			return $current; // A new run was started meanwhile: this tick's run is over.
		}
		if ( in_array( $current['status'], array( 'paused', 'cancelled' ), true ) && in_array( $run['status'], array( 'running', 'waiting' ), true ) ) {
			$run['status']      = $current['status'];
			$run['resume_at']   = $current['resume_at'];
			$run['finished_at'] = $current['finished_at'];
		}
		return self::save( $run );
	}

	/**
	 * Takes the images the admin asked to retry into the run (failed ones only).
	 */
	private static function take_retries( array $run ) {
		wp_cache_delete( self::RETRY_OPTION, 'options' );
		$asked = get_option( self::RETRY_OPTION, array() );
		if ( ! $asked ) {
			return $run;
		}
		delete_option( self::RETRY_OPTION );
		foreach ( (array) $asked as $id ) {
			$id = (int) $id;
			if ( isset( $run['failed'][ $id ] ) && ! in_array( $id, $run['retry'], true ) ) {
				$run['retry'][] = $id;
				// The image is counted again when it is done.
				--$run['processed'];
				$run['failed'][ $id ]['retrying'] = true;
			}
		}
		return $run;
	}

	/**
	 * @return array The run, shaped for the REST answer and the admin screen.
	 */
	public static function status() {
		$run = self::run();
		// A running run whose tick is due but not running (its loopback was lost, cron disabled and no
		// visits): this request starts it again.
		if ( in_array( $run['status'], array( 'running', 'waiting' ), true ) ) {
			$next = wp_next_scheduled( self::CRON_HOOK );
			if ( ! $next ) {
				$next = 'waiting' === $run['status'] && $run['resume_at'] ? (int) $run['resume_at'] : time();
				wp_schedule_single_event( $next, self::CRON_HOOK );
			}
			if ( $next <= time() && ! self::locked() ) {
				self::$kick = true;
			}
		}
		$failed = array();
		$asked  = array_map( 'intval', (array) get_option( self::RETRY_OPTION, array() ) );
		foreach ( $run['failed'] as $id => $error ) {
			if ( in_array( (int) $id, $asked, true ) ) {
				$error['retrying'] = true;
			}
			$failed[] = array_merge(
				array(
					'id'    => (int) $id,
					'title' => get_the_title( (int) $id ),
					'file'  => wp_basename( (string) get_attached_file( (int) $id ) ),
				),
				$error
			);
		}
		$run['failed']    = $failed;
		$run['remaining'] = max( 0, (int) $run['total'] - (int) $run['processed'] );
		$run['percent']   = $run['total'] > 0 ? (int) floor( 100 * $run['processed'] / $run['total'] ) : ( 'done' === $run['status'] ? 100 : 0 );
		$run['quota']     = self::quota();
		$run['now']       = time();
		return $run;
	}

	/**
	 * The image attachments a run goes over.
	 *
	 * @param int $after  Only IDs above this one.
	 * @param int $max_id Only IDs up to this one (0: no bound).
	 * @param int $limit  How many.
	 * @return int[]
	 */
	public static function image_ids( $after = 0, $max_id = 0, $limit = 1 ) {
		global $wpdb;
		$types = Compresso_Optimizer::MIME_TYPES;
		$in    = implode( ',', array_fill( 0, count( $types ), '%s' ) );
		$sql   = "SELECT ID FROM {$wpdb->posts} WHERE post_type = 'attachment' AND post_mime_type IN ($in) AND ID > %d" . ( $max_id ? ' AND ID <= %d' : '' ) . ' ORDER BY ID ASC LIMIT %d';
		$args  = array_merge( $types, array( (int) $after ), $max_id ? array( (int) $max_id ) : array(), array( (int) $limit ) );
		return array_map( 'intval', $wpdb->get_col( $wpdb->prepare( $sql, $args ) ) ); // phpcs:ignore WordPress.DB.PreparedSQL.NotPrepared, WordPress.DB.DirectDatabaseQuery
	}

	/**
	 * @return int How many image attachments the library holds.
	 */
	public static function count_images() {
		global $wpdb;
		$types = Compresso_Optimizer::MIME_TYPES;
		$in    = implode( ',', array_fill( 0, count( $types ), '%s' ) );
		return (int) $wpdb->get_var( $wpdb->prepare( "SELECT COUNT(*) FROM {$wpdb->posts} WHERE post_type = 'attachment' AND post_mime_type IN ($in)", $types ) ); // phpcs:ignore WordPress.DB.PreparedSQL.InterpolatedNotPrepared, WordPress.DB.DirectDatabaseQuery
	}

	/**
	 * Starts a run over every image in the library (those already done cost nothing: their hashes match).
	 *
	 * @return array|WP_Error The run.
	 */
	public static function start() {
		if ( ! compresso_is_connected() ) {
			return new WP_Error( 'compresso_not_connected', __( 'Connect the plugin to a Compresso server first (Settings → Compresso).', 'compresso' ), array( 'status' => 409 ) );
		}
		$run = self::run();
		if ( in_array( $run['status'], array( 'running', 'paused', 'waiting' ), true ) ) {
			return new WP_Error( 'compresso_bulk_in_progress', __( 'A bulk optimization is already in progress: resume or cancel it first.', 'compresso' ), array( 'status' => 409 ) );
		}
		global $wpdb;
		$max_id = (int) $wpdb->get_var( "SELECT MAX(ID) FROM {$wpdb->posts} WHERE post_type = 'attachment'" ); // phpcs:ignore WordPress.DB.DirectDatabaseQuery
		$run    = array_merge(
			self::run(),
			array(
				'status'       => 'running',
				'id'           => wp_generate_uuid4(),
				'started_at'   => time(),
				'finished_at'  => null,
				'max_id'       => $max_id,
				'cursor'       => 0,
				'total'        => self::count_images(),
				'processed'    => 0,
				'optimized'    => 0,
				'skipped'      => 0,
				'requests'     => 0,
				'bytes_before' => 0,
				'bytes_after'  => 0,
				'failed'       => array(),
				'retry'        => array(),
				'resume_at'    => null,
				'wait_reason'  => null,
				'waits'        => array(),
				'ticks'        => 0,
			)
		);
		delete_option( self::RETRY_OPTION );
		$run = self::save( $run );
		self::schedule( time() );
		return self::status();
	}

	/**
	 * @return array|WP_Error
	 */
	public static function pause() {
		$run = self::run();
		if ( ! in_array( $run['status'], array( 'running', 'waiting' ), true ) ) {
			return new WP_Error( 'compresso_bulk_not_running', __( 'There is no running bulk optimization to pause.', 'compresso' ), array( 'status' => 409 ) );
		}
		$run['status']    = 'paused';
		$run['resume_at'] = null;
		self::save( $run );
		wp_unschedule_hook( self::CRON_HOOK );
		return self::status();
	}

	/**
	 * @return array|WP_Error
	 */
	public static function resume() {
		$run = self::run();
		if ( 'paused' !== $run['status'] && 'waiting' !== $run['status'] ) {
			return new WP_Error( 'compresso_bulk_not_paused', __( 'There is no paused bulk optimization to resume.', 'compresso' ), array( 'status' => 409 ) );
		}
		if ( 'waiting' === $run['status'] ) {
			$run = self::end_wait( $run, 'admin' );
		}
		$run['status']      = 'running';
		$run['resume_at']   = null;
		$run['wait_reason'] = null;
		self::save( $run );
		wp_unschedule_hook( self::CRON_HOOK );
		self::schedule( time() );
		return self::status();
	}

	/**
	 * Stops the run for good; images already done stay done (and a later run skips them).
	 *
	 * @return array|WP_Error
	 */
	public static function cancel() {
		$run = self::run();
		if ( ! in_array( $run['status'], array( 'running', 'paused', 'waiting' ), true ) ) {
			return new WP_Error( 'compresso_bulk_not_running', __( 'There is no bulk optimization to cancel.', 'compresso' ), array( 'status' => 409 ) );
		}
		$run['status']      = 'cancelled';
		$run['finished_at'] = time();
		$run['resume_at']   = null;
		self::save( $run );
		wp_unschedule_hook( self::CRON_HOOK );
		return self::status();
	}

	/**
	 * Tries the images that failed again (all, or the IDs given), in the current run.
	 *
	 * @param int[] $ids Attachment IDs; empty for every failed one.
	 * @return array|WP_Error
	 */
	public static function retry( array $ids = array() ) {
		$run    = self::run();
		$failed = array_map( 'intval', array_keys( $run['failed'] ) );
		$ids    = $ids ? array_values( array_intersect( array_map( 'intval', $ids ), $failed ) ) : $failed;
		if ( ! $ids ) {
			return new WP_Error( 'compresso_bulk_nothing_to_retry', __( 'None of these images failed in this run.', 'compresso' ), array( 'status' => 404 ) );
		}
		$asked = get_option( self::RETRY_OPTION, array() );
		update_option( self::RETRY_OPTION, array_values( array_unique( array_merge( (array) $asked, $ids ) ) ), false );
		if ( in_array( $run['status'], array( 'done', 'cancelled', 'paused' ), true ) ) {
			$run['status']      = 'running';
			$run['finished_at'] = null;
			self::save( $run );
		}
		if ( 'running' === $run['status'] ) {
			self::schedule( time() );
		}
		return self::status();
	}

	/**
	 * Notes when (and by whom: the schedule or the admin) a wait for the quota ended.
	 */
	private static function end_wait( array $run, $by ) {
		$last = count( $run['waits'] ) - 1;
		if ( $last >= 0 && null === $run['waits'][ $last ]['resumed_at'] ) {
			$run['waits'][ $last ]['resumed_at'] = time();
			$run['waits'][ $last ]['by']         = $by;
		}
		return $run;
	}

	private static function schedule( $when ) {
		// The next tick replaces the lease this tick holds on its own event (Compresso_Runner).
		Compresso_Runner::release( self::CRON_HOOK, array() );
		if ( ! wp_next_scheduled( self::CRON_HOOK ) ) {
			wp_schedule_single_event( $when, self::CRON_HOOK );
		}
		if ( $when <= time() ) {
			self::$kick = true;
		}
	}

	private static function locked() {
		$held = compresso_lock_held_since( self::LOCK_OPTION );
		return $held && $held > time() - self::LOCK_TIMEOUT;
	}

	/**
	 * One tick at a time (compresso_lock()); a stale lock (its tick died) is taken over.
	 */
	private static function lock() {
		return compresso_lock( self::LOCK_OPTION, self::LOCK_TIMEOUT );
	}

	private static function unlock() {
		compresso_unlock( self::LOCK_OPTION );
	}

	/**
	 * The cron job: handles images until the time budget is spent, a pause or cancel is seen, or the
	 * quota runs out; then schedules the next tick (now, or at the quota's reset).
	 *
	 * @param int $budget Seconds to work (the filter `compresso_bulk_time_budget` changes the default).
	 * @return array The run afterwards.
	 */
	public static function tick( $budget = 0 ) {
		if ( ! self::lock() ) {
			return self::run();
		}
		$budget = $budget ? (int) $budget : (int) apply_filters( 'compresso_bulk_time_budget', self::TIME_BUDGET );
		$ends   = microtime( true ) + max( 1, $budget );
		// The tick's event stays scheduled while it works (run by WP-Cron, which took it out): a tick
		// that dies is run again when the lease ends.
		if ( wp_doing_cron() ) {
			Compresso_Runner::hold( self::CRON_HOOK, array() );
		}
		$ended = false;
		try {
			$run   = self::work( $ends );
			$ended = true;
			return $run;
		} finally {
			// The lease ends with the tick's work; a tick that threw leaves it to run out.
			if ( $ended ) {
				Compresso_Runner::release( self::CRON_HOOK, array() );
			}
			self::unlock();
		}
	}

	/**
	 * The tick's work, under its lock.
	 *
	 * @param float $ends microtime() when the tick hands over.
	 * @return array The run afterwards.
	 */
	private static function work( $ends ) {
		$run = self::run();
		if ( 'waiting' === $run['status'] && $run['resume_at'] <= time() ) {
			$run                = self::end_wait( $run, 'schedule' );
			$run['status']      = 'running';
			$run['resume_at']   = null;
			$run['wait_reason'] = null;
		}
		if ( 'running' !== $run['status'] ) {
			return $run;
		}
		++$run['ticks'];
		$run = self::save_progress( $run );
		do {
			// A pause or cancel from the admin is written by another request: read it between images.
			$current = self::run();
			if ( 'running' !== $current['status'] ) {
				return $current;
			}
			$run = self::take_retries( $current );
			if ( $run['retry'] ) {
				$id       = (int) $run['retry'][0];
				$is_retry = true;
			} else {
				$next     = self::image_ids( (int) $run['cursor'], (int) $run['max_id'] );
				$id       = $next ? $next[0] : 0;
				$is_retry = false;
			}
			if ( ! $id ) {
				$run['status']      = 'done';
				$run['finished_at'] = time();
				return self::save_progress( $run );
			}
			$run = self::save_progress( self::process( $run, $id, $is_retry ) );
			if ( 'waiting' === $run['status'] ) {
				self::schedule( (int) $run['resume_at'] );
				return $run;
			}
		} while ( 'running' === $run['status'] && microtime( true ) < $ends );
		if ( 'running' === self::run()['status'] ) {
			self::schedule( time() );
		}
		return $run;
	}

	/**
	 * Optimizes one image for the run and counts what happened.
	 */
	private static function process( array $run, $id, $is_retry ) {
		// The upload's own job for this image (if still queued) is done here instead.
		wp_clear_scheduled_hook( Compresso_Optimizer::CRON_HOOK, array( $id ) );
		$before = Compresso_Optimizer::state( $id );
		// Tries counted: an image that kills PHP every time is marked failed after a few, not met again
		// by every tick for ever.
		$state  = Compresso_Optimizer::attempt( $id );
		$sent   = (int) $state['requests'] - (int) $before['requests'];
		$run['requests'] += max( 0, $sent );

		if ( 'waiting' === $state['status'] ) {
			// QUOTA_EXCEEDED or RATE_LIMITED: the optimizer scheduled its own retry after the server's
			// Retry-After; the run takes that time over (one retry, by the run) and stops until then.
			$at = wp_next_scheduled( Compresso_Optimizer::CRON_HOOK, array( $id ) );
			wp_clear_scheduled_hook( Compresso_Optimizer::CRON_HOOK, array( $id ) );
			$run['status']      = 'waiting';
			// Two seconds past the reset, so a site clock a little behind the server's does not meet the old day.
			$run['resume_at']   = ( $at ? (int) $at : time() + HOUR_IN_SECONDS ) + self::RESET_SLACK;
			$run['wait_reason'] = isset( $state['error']['code'] ) ? $state['error']['code'] : 'QUOTA_EXCEEDED';
			$run['waits'][]     = array(
				'reason'     => $run['wait_reason'],
				'at'         => time(),
				'resume_at'  => $run['resume_at'],
				'resumed_at' => null,
				'by'         => null,
				'processed'  => (int) $run['processed'],
			);
			$run['waits']       = array_slice( $run['waits'], -20 );
			if ( 'QUOTA_EXCEEDED' === $run['wait_reason'] ) {
				self::remember_quota(
					array(
						'remaining' => 0,
						'reset_at'  => $run['resume_at'],
					)
				);
			}
			if ( ! $is_retry ) {
				// The image is taken up first when the run goes on; the cursor moves past it now.
				$run['retry'][] = $id;
				$run['cursor']  = $id;
			}
			return $run;
		}
		if ( $is_retry ) {
			array_shift( $run['retry'] );
		} else {
			$run['cursor'] = $id;
		}
		++$run['processed'];
		if ( 'done' === $state['status'] ) {
			unset( $run['failed'][ $id ] );
			if ( $sent > 0 ) {
				++$run['optimized'];
			} else {
				++$run['skipped'];
			}
			foreach ( $state['files'] as $record ) {
				$run['bytes_before'] += isset( $record['size_before'] ) ? (int) $record['size_before'] : 0;
				$run['bytes_after']  += isset( $record['size_after'] ) ? (int) $record['size_after'] : 0;
			}
			return $run;
		}
		$attempts             = isset( $run['failed'][ $id ]['attempts'] ) ? (int) $run['failed'][ $id ]['attempts'] : 0;
		$run['failed'][ $id ] = array(
			'code'     => isset( $state['error']['code'] ) ? $state['error']['code'] : 'compresso_unknown',
			'message'  => isset( $state['error']['message'] ) ? $state['error']['message'] : __( 'The image could not be optimized.', 'compresso' ),
			'attempts' => $attempts + 1,
			'at'       => time(),
		);
		return $run;
	}

	/**
	 * At the end of a request that asked for a tick: start the plugin's runner (Compresso_Runner), or,
	 * with the runner turned off, WP-Cron through a non-blocking loopback request (spawn_cron()). Inside a cron request spawn_cron() does nothing (and core's lock is held
	 * until the request ends), so a tick chains the next one by making the same request itself, after
	 * wp-cron.php has released its lock.
	 */
	public static function kick() {
		if ( ! self::$kick ) {
			return;
		}
		self::$kick = false;
		if ( Compresso_Runner::enabled() ) {
			Compresso_Runner::start();
			return;
		}
		if ( ! wp_doing_cron() ) {
			spawn_cron();
			return;
		}
		$key = sprintf( '%.22F', microtime( true ) );
		set_transient( 'doing_cron', $key );
		$request = apply_filters(
			'cron_request',
			array(
				'url'  => add_query_arg( 'doing_wp_cron', $key, site_url( 'wp-cron.php' ) ),
				'key'  => $key,
				'args' => array(
					'timeout'   => 0.01,
					'blocking'  => false,
					/** This filter is documented in wp-includes/class-wp-http-streams.php */
					'sslverify' => apply_filters( 'https_local_ssl_verify', false ),
				),
			),
			$key
		);
		wp_remote_post( $request['url'], $request['args'] );
	}

	/**
	 * The http_api_debug action: every answer from the Compresso server carries the quota in its
	 * RateLimit-* headers; the last one seen is kept, so the screens show it without spending a request.
	 */
	public static function observe_response( $response, $context, $class, $args, $url ) {
		$server = (string) compresso_get_setting( 'server_url' );
		if ( 'response' !== $context || is_wp_error( $response ) || '' === $server || 0 !== strpos( (string) $url, untrailingslashit( $server ) . '/api/v1/' ) ) {
			return;
		}
		$limit     = wp_remote_retrieve_header( $response, 'ratelimit-limit' );
		$remaining = wp_remote_retrieve_header( $response, 'ratelimit-remaining' );
		$reset     = wp_remote_retrieve_header( $response, 'ratelimit-reset' );
		if ( '' === $limit || '' === $remaining ) {
			return;
		}
		self::remember_quota(
			array(
				'limit'     => (int) $limit,
				'remaining' => (int) $remaining,
				'reset_at'  => '' === $reset ? null : time() + (int) $reset,
			)
		);
	}

	private static function remember_quota( array $fields ) {
		$quota = get_option( self::QUOTA_OPTION, array() );
		$quota = array_merge( is_array( $quota ) ? $quota : array(), $fields, array( 'seen_at' => time() ) );
		update_option( self::QUOTA_OPTION, $quota, false );
	}

	/**
	 * @return array The quota as last seen: plan, limit, remaining, reset_at (Unix time), seen_at.
	 */
	public static function quota() {
		wp_cache_delete( self::QUOTA_OPTION, 'options' );
		$quota = get_option( self::QUOTA_OPTION, array() );
		$quota = array_merge(
			array(
				'plan'      => null,
				'limit'     => null,
				'remaining' => null,
				'reset_at'  => null,
				'seen_at'   => null,
			),
			is_array( $quota ) ? $quota : array()
		);
		// Past the reset, the whole daily quota is there again.
		if ( $quota['reset_at'] && $quota['reset_at'] <= time() && null !== $quota['limit'] ) {
			$quota['remaining'] = $quota['limit'];
			$quota['reset_at']  = null;
		}
		return $quota;
	}

	/**
	 * Asks the server for the quota (GET /api/v1/usage; it counts as one request of the quota).
	 *
	 * @return array|WP_Error
	 */
	public static function refresh_quota() {
		$usage = compresso_api_client()->usage();
		if ( is_wp_error( $usage ) ) {
			$data = $usage->get_error_data();
			if ( 'QUOTA_EXCEEDED' === $usage->get_error_code() && is_array( $data ) && ! empty( $data['retry_after'] ) ) {
				self::remember_quota(
					array(
						'remaining' => 0,
						'reset_at'  => time() + (int) $data['retry_after'],
					)
				);
			}
			return $usage;
		}
		self::remember_quota(
			array(
				'plan'      => $usage['plan'],
				'limit'     => (int) $usage['limit'],
				'remaining' => (int) $usage['remaining'],
				'reset_at'  => isset( $usage['resets_in_seconds'] ) ? time() + (int) $usage['resets_in_seconds'] : null,
			)
		);
		return self::quota();
	}

	/**
	 * What one upload costs and what the library's run will take, before anything is spent.
	 *
	 * Requests per upload: one per file (the original and each generated size chosen in the settings), and one
	 * more per file for each WebP/AVIF format that is turned on. The library's requests count the files
	 * not yet done (hash recorded) of every image the same way.
	 *
	 * @return array
	 */
	public static function stats() {
		$settings = compresso_get_settings();
		$formats  = count( array_filter( array( ! empty( $settings['webp'] ), ! empty( $settings['avif'] ) ) ) );
		// The generated sizes the owner chose to compress (Settings → Compresso); the original always.
		$sizes    = compresso_enabled_sizes( $settings );
		$per_file = 1 + $formats;

		$images    = 0;
		$optimized = 0;
		$pending   = 0;
		$requests  = 0;
		$before    = 0;
		$after     = 0;
		$after_id  = 0;
		do {
			$ids = self::image_ids( $after_id, 0, 200 );
			foreach ( $ids as $id ) {
				$after_id = $id;
				++$images;
				$state = Compresso_Optimizer::state( $id );
				$files = Compresso_Optimizer::files( $id, $settings );
				$todo  = 0;
				foreach ( $files as $name => $path ) {
					$record = isset( $state['files'][ $name ] ) ? $state['files'][ $name ] : null;
					if ( $record ) {
						$before += (int) $record['size_before'];
						$after  += (int) $record['size_after'];
					}
					if ( ! $record || ! isset( $record['sha256'] ) ) {
						$todo += $per_file;
					}
				}
				if ( 'done' === $state['status'] && 0 === $todo ) {
					++$optimized;
				} else {
					++$pending;
				}
				$requests += $todo;
			}
		} while ( count( $ids ) === 200 );

		$quota = self::quota();
		$days  = null;
		if ( $quota['limit'] ) {
			$today = null === $quota['remaining'] ? $quota['limit'] : $quota['remaining'];
			$days  = $requests <= $today ? 0 : (int) ceil( ( $requests - $today ) / $quota['limit'] );
		}
		return array(
			'images'                => $images,
			'optimized'             => $optimized,
			'pending'               => $pending,
			'bytes_before'          => $before,
			'bytes_after'           => $after,
			'sizes'                 => $sizes,
			'formats'               => array_keys( array_filter( array( 'webp' => ! empty( $settings['webp'] ), 'avif' => ! empty( $settings['avif'] ) ) ) ),
			'requests_per_upload'   => ( 1 + count( $sizes ) ) * $per_file,
			'requests_for_library'  => $requests,
			// Days after today the run needs at the plan's daily quota (0: it fits in what is left today).
			'extra_days_for_library' => $days,
			'quota'                 => $quota,
		);
	}
}
