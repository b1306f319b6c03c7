<?php
/**
 * Compresses an attachment's files (the original and every generated size) through the API, in the
 * background: uploads only queue work (a WP-Cron event, kicked by a loopback request at the end of the
 * upload's request), so the upload itself stays as fast as without the plugin.
 *
 * What was done is kept in the attachment's `_compresso` meta, per file: sizes before and after, the
 * hash of the file as written (a file whose hash still matches is never sent again, so an image is not
 * processed twice), the original's hash (its backup's checksum), and the WebP/AVIF siblings made.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Queues, compresses and restores attachments.
 */
class Compresso_Optimizer {

	const META       = '_compresso';
	const CRON_HOOK  = 'compresso_optimize_attachment';
	const MIME_TYPES = array( 'image/jpeg', 'image/png', 'image/webp', 'image/gif' );
	/** The option that marks an attachment being optimized (its id appended). */
	const LOCK_PREFIX = 'compresso_optimizing_';
	/** Seconds after which such a mark is taken to be left by a request that died. */
	const LOCK_TIMEOUT = 300;
	/** The meta counting the tries of an attachment that have not ended (deleted when one ends). */
	const ATTEMPTS_META = '_compresso_attempts';
	/** Tries that may end with the request dying before the attachment is marked failed. */
	const MAX_ATTEMPTS = 3;
	/**
	 * The meta that marks an attachment queued or waiting (its value is that status), kept beside the
	 * record by save_state() so the sweep for lost events finds them through the meta_key index instead
	 * of reading every record.
	 */
	const PENDING_META = '_compresso_pending';
	/** The option (autoloaded, so reading it costs no query) holding when the next sweep for lost events is due. */
	const SWEEP_OPTION = 'compresso_sweep_after';
	/** The lock one request takes to sweep, so requests meeting at the minute do not all sweep. */
	const SWEEP_LOCK = 'compresso_sweep_lock';
	/** Seconds between sweeps. */
	const SWEEP_EVERY = 60;
	/** Queued and waiting attachments (PENDING_META) looked at per sweep (lowest ids first). */
	const SWEEP_LIMIT = 200;

	/** @var bool Whether this request queued work (then the cron is kicked at shutdown). */
	private static $queued = false;

	/**
	 * The wp_generate_attachment_metadata filter: queues the attachment, returns the metadata unchanged.
	 * 'create' is a new upload; 'update' is sizes made again for an existing one (only files whose hash
	 * changed are sent again).
	 *
	 * @param array  $metadata      The attachment's metadata.
	 * @param int    $attachment_id The attachment.
	 * @param string $context       'create' or 'update'.
	 * @return array
	 */
	public static function on_generate_metadata( $metadata, $attachment_id, $context = 'create' ) {
		if ( is_array( $metadata ) && in_array( get_post_mime_type( $attachment_id ), self::MIME_TYPES, true ) && compresso_is_connected() ) {
			self::queue( (int) $attachment_id, $context );
		}
		return $metadata;
	}

	/**
	 * The wp_update_attachment_metadata filter, for one case only: an image saved from the WordPress
	 * image editor (wp_save_image() updates the metadata once, it never calls
	 * wp_generate_attachment_metadata). Its new main file is named `name-e1234567890123.ext`; when that
	 * file is not in the record yet, the attachment is queued again ('edit'), once: the record has the
	 * file after the run, and a queued attachment is not scheduled twice.
	 *
	 * @param array $metadata      The metadata being saved.
	 * @param int   $attachment_id The attachment.
	 * @return array Unchanged.
	 */
	public static function on_update_metadata( $metadata, $attachment_id ) {
		if ( ! is_array( $metadata ) || empty( $metadata['file'] ) || ! preg_match( '/-e\d{13}\.[a-z0-9]+$/i', $metadata['file'] ) ) {
			return $metadata;
		}
		$state = self::state( $attachment_id );
		$name  = wp_basename( $metadata['file'] );
		if ( isset( $state['files'][ $name ] ) || 'queued' === $state['status'] || ! compresso_is_connected() ) {
			return $metadata;
		}
		if ( in_array( get_post_mime_type( $attachment_id ), self::MIME_TYPES, true ) ) {
			self::queue( (int) $attachment_id, 'edit' );
		}
		return $metadata;
	}

	/**
	 * @param int    $attachment_id The attachment.
	 * @param string $context       Why it was queued.
	 * @param int    $when          Unix time to run at.
	 */
	public static function queue( $attachment_id, $context = 'create', $when = 0 ) {
		$state            = self::state( $attachment_id );
		$waiting          = 'waiting' === $state['status'];
		$state['status']  = 'queued';
		$state['context'] = $context;
		self::save_state( $attachment_id, $state );
		$when = $when ? $when : time();
		$args = array( $attachment_id );
		$next = wp_next_scheduled( self::CRON_HOOK, $args );
		if ( ! $next ) {
			wp_schedule_single_event( $when, self::CRON_HOOK, $args );
		} elseif ( $next > $when && ! $waiting ) {
			// The event is leased by a request working on the attachment (the files changed under it): it
			// is brought forward, so the new files are done after that request, not when the lease ends.
			// A wait for the quota keeps its time.
			wp_cache_delete( 'alloptions', 'options' );
			$crons = Compresso_Runner::moved( _get_cron_array(), self::CRON_HOOK, $args, $next, $when );
			if ( null !== $crons ) {
				_set_cron_array( $crons );
			}
		}
		self::$queued = true;
	}

	/**
	 * The shutdown action (before kick()): at most once a minute over the whole site, puts back the event
	 * of every queued or waiting attachment whose event is gone (requeue_lost()).
	 *
	 * Why events go missing: WordPress keeps every WP-Cron event in one option, `cron`, and each writer
	 * rewrites it whole from what it read. A request that read the schedule before an upload added its
	 * event and writes it afterwards drops that event: wp-cron.php does so as a matter of course (it reads
	 * the schedule once and writes it after each event it runs, for as long as the run lasts), and so can
	 * any plugin. The attachment then stays "queued" (or waiting for the quota's reset) with nothing
	 * scheduled to process it.
	 *
	 * Costs nothing on most requests: one autoloaded option compared with the clock.
	 */
	public static function maybe_sweep() {
		// The clock first: the only check most requests make.
		if ( (int) get_option( self::SWEEP_OPTION, 0 ) > time() ) {
			return;
		}
		// Not in the request that deactivates the plugin: deactivation leaves nothing scheduled.
		if ( did_action( 'deactivate_' . plugin_basename( COMPRESSO_PLUGIN_FILE ) ) || ! compresso_lock( self::SWEEP_LOCK, self::SWEEP_EVERY ) ) {
			return;
		}
		update_option( self::SWEEP_OPTION, time() + self::SWEEP_EVERY, true );
		/**
		 * Whether the plugin puts back lost events of queued attachments (a site that runs the plugin's
		 * events from its own queue turns this off).
		 *
		 * @param bool $on True.
		 */
		if ( apply_filters( 'compresso_requeue_lost', true ) && compresso_is_connected() ) {
			self::requeue_lost();
		}
	}

	/**
	 * Schedules the event of each queued or waiting attachment that has none (up to SWEEP_LIMIT of them):
	 * a queued one's due now, a waiting one's at the time the server said to retry (`retry_at`, now for
	 * a record from before it was kept). One queued an instant ago whose event is being added meets
	 * core's duplicate check; one a bulk run is working on gets an event that finds its files done and
	 * sends nothing. An image a bulk run holds for its own retry after the quota's reset (the run took
	 * its event over) is left to the run.
	 *
	 * @return int[] The attachments whose event was put back.
	 */
	public static function requeue_lost() {
		global $wpdb;
		// phpcs:ignore WordPress.DB.DirectDatabaseQuery -- ids only, through the meta_key index.
		$ids  = $wpdb->get_col(
			$wpdb->prepare(
				"SELECT post_id FROM {$wpdb->postmeta} WHERE meta_key = %s ORDER BY post_id LIMIT %d",
				self::PENDING_META,
				self::SWEEP_LIMIT
			)
		);
		if ( ! $ids ) {
			return array();
		}
		$bulk = Compresso_Bulk::run();
		$held = in_array( $bulk['status'], array( 'running', 'paused', 'waiting' ), true ) ? array_map( 'intval', (array) $bulk['retry'] ) : array();
		// The schedule as it is now, not as this request read it.
		wp_cache_delete( 'alloptions', 'options' );
		$requeued = array();
		foreach ( array_map( 'intval', $ids ) as $id ) {
			if ( wp_next_scheduled( self::CRON_HOOK, array( $id ) ) ) {
				continue;
			}
			wp_cache_delete( $id, 'post_meta' );
			$state = self::state( $id );
			if ( 'queued' === $state['status'] ) {
				$when = time();
			} elseif ( 'waiting' === $state['status'] ) {
				if ( in_array( $id, $held, true ) ) {
					continue;
				}
				$when = max( time(), isset( $state['retry_at'] ) ? (int) $state['retry_at'] : 0 );
			} else {
				// A mark the record has moved past (written around save_state()): gone, so it takes no
				// place in the next sweep's window.
				delete_post_meta( $id, self::PENDING_META );
				continue;
			}
			if ( true === wp_schedule_single_event( $when, self::CRON_HOOK, array( $id ) ) ) {
				$requeued[] = $id;
			}
		}
		if ( $requeued ) {
			self::$queued = true;
		}
		return $requeued;
	}

	/**
	 * At the end of a request that queued work: the loopback request that runs the plugin's runner (or,
	 * with the runner turned off, WP-Cron) now rather than on the next visit (non-blocking, as core's
	 * own spawn_cron()).
	 */
	public static function kick() {
		if ( ! self::$queued || wp_doing_cron() ) {
			return;
		}
		self::$queued = false;
		if ( Compresso_Runner::enabled() ) {
			Compresso_Runner::start();
		} else {
			spawn_cron();
		}
	}

	/**
	 * @return array The attachment's record (empty fields when never processed).
	 */
	public static function state( $attachment_id ) {
		$state = get_post_meta( $attachment_id, self::META, true );
		return array_merge(
			array(
				'status'   => 'new',
				'files'    => array(),
				'error'    => null,
				'requests' => 0,
			),
			is_array( $state ) ? $state : array()
		);
	}

	/**
	 * Saves the attachment's record, and the mark (PENDING_META) that says it is queued or waiting.
	 *
	 * @param int   $attachment_id The attachment.
	 * @param array $state         The record.
	 */
	public static function save_state( $attachment_id, array $state ) {
		update_post_meta( $attachment_id, self::META, $state );
		if ( isset( $state['status'] ) && in_array( $state['status'], array( 'queued', 'waiting' ), true ) ) {
			update_post_meta( $attachment_id, self::PENDING_META, $state['status'] );
		} else {
			delete_post_meta( $attachment_id, self::PENDING_META );
		}
	}

	/**
	 * The files of an attachment: its main file, the pre-scaling original if any, and every size.
	 *
	 * With $settings, only the sizes the owner chose to compress (the main file and the pre-scaling
	 * original are always included; a file shared by a chosen and an unchosen size is included).
	 *
	 * @param int        $attachment_id The attachment.
	 * @param array|null $settings      The settings whose `sizes` choice applies; null: every size.
	 * @return array relative name => absolute path.
	 */
	public static function files( $attachment_id, $settings = null ) {
		$main = get_attached_file( $attachment_id );
		if ( ! $main ) {
			return array();
		}
		$dir      = trailingslashit( dirname( $main ) );
		$files    = array( wp_basename( $main ) => $main );
		$metadata = wp_get_attachment_metadata( $attachment_id );
		if ( is_array( $metadata ) ) {
			if ( ! empty( $metadata['original_image'] ) ) {
				$files[ $metadata['original_image'] ] = $dir . $metadata['original_image'];
			}
			if ( ! empty( $metadata['sizes'] ) && is_array( $metadata['sizes'] ) ) {
				foreach ( $metadata['sizes'] as $size_name => $size ) {
					if ( is_array( $settings ) && ! compresso_size_enabled( (string) $size_name, $settings ) ) {
						continue;
					}
					if ( ! empty( $size['file'] ) ) {
						$files[ $size['file'] ] = $dir . $size['file'];
					}
				}
			}
		}
		return array_filter( $files, 'is_file' );
	}

	/**
	 * The cron job (the runner's or WP-Cron's): the attachment's event stays in the schedule, leased,
	 * while it runs (Compresso_Runner), and is removed when the work is over, so a request that dies
	 * leaves it to the next one. A leftover event (its request died after the work) sends nothing: for
	 * an attachment restored since (no record) or whose failure is recorded, nothing is done; for one
	 * done, optimize() finds every file's hash recorded.
	 *
	 * @param int $attachment_id The attachment.
	 * @return array The attachment's record afterwards.
	 */
	public static function run_scheduled( $attachment_id ) {
		$attachment_id = (int) $attachment_id;
		$args          = array( $attachment_id );
		wp_cache_delete( $attachment_id, 'post_meta' );
		$state = self::state( $attachment_id );
		if ( in_array( $state['status'], array( 'new', 'error' ), true ) ) {
			return $state;
		}
		Compresso_Runner::hold( self::CRON_HOOK, $args );
		$state = self::attempt( $attachment_id );
		// Not in a `finally`: work that threw did not end, and its event must come due again.
		Compresso_Runner::release( self::CRON_HOOK, $args );
		return $state;
	}

	/**
	 * optimize() with its tries counted: a try is counted before it starts and forgotten when it ends (with
	 * the attachment done or its failure recorded), so the count only grows when requests die while
	 * working on the attachment (PHP killed, a fatal error, the time limit). After MAX_ATTEMPTS such
	 * tries the attachment is marked failed, with a message for the media library, and not tried again
	 * until someone asks (Try again in the media library, a bulk run's retry).
	 *
	 * @param int $attachment_id The attachment.
	 * @return array The attachment's record afterwards.
	 */
	public static function attempt( $attachment_id ) {
		$attachment_id = (int) $attachment_id;
		wp_cache_delete( $attachment_id, 'post_meta' );
		$attempts = (int) get_post_meta( $attachment_id, self::ATTEMPTS_META, true );
		if ( $attempts >= self::MAX_ATTEMPTS ) {
			delete_post_meta( $attachment_id, self::ATTEMPTS_META );
			return self::fail(
				$attachment_id,
				self::state( $attachment_id ),
				new WP_Error(
					'compresso_gave_up',
					sprintf(
						/* translators: %d: number of attempts */
						__( 'Compresso stopped trying after %d attempts: each time, the request compressing this image ended before it finished (PHP was stopped by its time limit, its memory limit or a crash). Check the site\'s PHP error log, then click Try again.', 'compresso' ),
						$attempts
					)
				)
			);
		}
		update_post_meta( $attachment_id, self::ATTEMPTS_META, $attempts + 1 );
		$state = self::optimize( $attachment_id );
		delete_post_meta( $attachment_id, self::ATTEMPTS_META );
		return $state;
	}

	/**
	 * The cron job: compresses every file of the attachment not yet compressed, makes the WebP/AVIF
	 * siblings the settings ask for, backs up originals first. Stops at the first error the server
	 * gives (kept in the record); on QUOTA_EXCEEDED it queues itself again for after the reset.
	 *
	 * One request at a time per attachment (the runner, WP-Cron, a bulk tick and the media library's
	 * button may meet on the same one): a second caller waits for the first to finish, then finds its
	 * files' hashes recorded and sends nothing.
	 *
	 * @return array The attachment's record afterwards.
	 */
	public static function optimize( $attachment_id ) {
		$attachment_id = (int) $attachment_id;
		$lock          = self::LOCK_PREFIX . $attachment_id;
		$waited        = 0;
		while ( ! compresso_lock( $lock, self::LOCK_TIMEOUT ) ) {
			if ( $waited >= self::LOCK_TIMEOUT * 4 ) {
				return self::state( $attachment_id );
			}
			usleep( 250000 );
			++$waited;
		}
		try {
			return self::optimize_locked( $attachment_id );
		} finally {
			compresso_unlock( $lock );
		}
	}

	private static function optimize_locked( $attachment_id ) {
		// What a request that held the lock before this one recorded.
		wp_cache_delete( $attachment_id, 'post_meta' );
		$settings      = compresso_get_settings();
		$client        = compresso_api_client();
		$state         = self::state( $attachment_id );
		$main          = get_attached_file( $attachment_id );
		$metadata      = wp_get_attachment_metadata( $attachment_id );
		$formats       = array_keys( array_filter( array( 'webp' => ! empty( $settings['webp'] ), 'avif' => ! empty( $settings['avif'] ) ) ) );
		$state['error'] = null;
		unset( $state['retry_at'] );

		// Smart PNG-to-JPEG first: when it converts, the files below are the new JPEGs (already done).
		$converted = Compresso_Png_To_Jpeg::maybe_convert( $attachment_id, $client, $settings, $state );
		if ( is_wp_error( $converted ) ) {
			return self::fail( $attachment_id, $state, $converted );
		}
		$main     = get_attached_file( $attachment_id );
		$metadata = wp_get_attachment_metadata( $attachment_id );

		// Only the sizes the owner chose (the original and the main file always).
		foreach ( self::files( $attachment_id, $settings ) as $name => $path ) {
			$record = isset( $state['files'][ $name ] ) ? $state['files'][ $name ] : array();
			$hash   = hash_file( 'sha256', $path );
			if ( isset( $record['sha256'] ) && $record['sha256'] === $hash && self::siblings_done( $path, $record, $formats ) ) {
				continue;
			}
			if ( ! isset( $record['sha256'] ) || $record['sha256'] !== $hash ) {
				$done = self::compress_file( $client, $settings, $path, $path === $main );
				if ( is_wp_error( $done ) ) {
					return self::fail( $attachment_id, $state, $done );
				}
				++$state['requests'];
				$record = array_merge( $done, array( 'siblings' => array() ) );
				if ( $path === $main && ! empty( $done['width'] ) && is_array( $metadata ) ) {
					$metadata['width']  = $done['width'];
					$metadata['height'] = $done['height'];
				}
			}
			foreach ( $formats as $format ) {
				if ( array_key_exists( $format, $record['siblings'] ) && ( false === $record['siblings'][ $format ] || is_file( $path . '.' . $format ) ) ) {
					continue;
				}
				$sibling = self::make_sibling( $client, $settings, $path, $format );
				if ( is_wp_error( $sibling ) ) {
					$state['files'][ $name ] = $record;
					return self::fail( $attachment_id, $state, $sibling );
				}
				++$state['requests'];
				// False (not smaller than the file) is kept too, so it is not asked for again.
				$record['siblings'][ $format ] = $sibling;
			}
			$state['files'][ $name ] = $record;
			self::save_state( $attachment_id, $state );
		}
		if ( is_array( $metadata ) ) {
			self::update_filesizes( $attachment_id, $metadata );
		}
		$state['status'] = 'done';
		self::save_state( $attachment_id, $state );
		return $state;
	}

	/**
	 * @return bool Whether every wanted sibling of the file exists.
	 */
	private static function siblings_done( $path, array $record, array $formats ) {
		foreach ( $formats as $format ) {
			// A sibling that would not have been smaller is recorded as false and not asked for again.
			if ( ! isset( $record['siblings'][ $format ] ) || ( $record['siblings'][ $format ] && ! is_file( $path . '.' . $format ) ) ) {
				return false;
			}
		}
		return true;
	}

	/**
	 * Compresses one file in place (after backing it up) when the result is smaller.
	 *
	 * @return array|WP_Error The file's record.
	 */
	private static function compress_file( Compresso_Api_Client $client, array $settings, $path, $is_main ) {
		$bytes = file_get_contents( $path ); // phpcs:ignore WordPress.WP.AlternativeFunctions.file_get_contents_file_get_contents
		if ( false === $bytes ) {
			return new WP_Error( 'compresso_unreadable', sprintf( /* translators: %s: file name */ __( '%s could not be read.', 'compresso' ), wp_basename( $path ) ) );
		}
		$original_hash = hash( 'sha256', $bytes );
		$options       = array(
			'quality'    => $settings['quality'],
			'strip_exif' => true,
		);
		if ( $is_main && ! empty( $settings['max_dimension'] ) ) {
			$options['max_dimension'] = (int) $settings['max_dimension'];
		}
		$out = $client->compress( $bytes, wp_basename( $path ), $options );
		if ( is_wp_error( $out ) ) {
			return $out;
		}
		$record = array(
			'size_before'     => strlen( $bytes ),
			'size_after'      => strlen( $bytes ),
			'original_sha256' => null,
			'sha256'          => $original_hash,
		);
		if ( strlen( $out['bytes'] ) >= strlen( $bytes ) ) {
			// Already as small as the server can make it: the file stays as it was.
			return $record;
		}
		if ( ! empty( $settings['backups'] ) ) {
			$backup = Compresso_Backups::keep( $path );
			if ( is_wp_error( $backup ) ) {
				return $backup;
			}
			$record['original_sha256'] = $backup['sha256'];
		}
		$written = self::write_atomically( $path, $out['bytes'] );
		if ( is_wp_error( $written ) ) {
			return $written;
		}
		$record['size_after'] = strlen( $out['bytes'] );
		$record['sha256']     = hash( 'sha256', $out['bytes'] );
		$record['width']      = $out['result']['width'];
		$record['height']     = $out['result']['height'];
		return $record;
	}

	/**
	 * Writes `file.ext.webp` / `file.ext.avif` beside the file when it is smaller than the file.
	 *
	 * @return array|false|WP_Error The sibling's record, false when it would not be smaller.
	 */
	private static function make_sibling( Compresso_Api_Client $client, array $settings, $path, $format ) {
		$bytes = file_get_contents( $path ); // phpcs:ignore WordPress.WP.AlternativeFunctions.file_get_contents_file_get_contents
		$out   = $client->compress(
			$bytes,
			wp_basename( $path ),
			array(
				'quality'       => $settings['quality'],
				'output_format' => $format,
				'strip_exif'    => true,
			)
		);
		if ( is_wp_error( $out ) ) {
			return $out;
		}
		if ( strlen( $out['bytes'] ) >= strlen( $bytes ) ) {
			return false;
		}
		$written = self::write_atomically( $path . '.' . $format, $out['bytes'] );
		if ( is_wp_error( $written ) ) {
			return $written;
		}
		return array( 'size' => strlen( $out['bytes'] ) );
	}

	/**
	 * Writes to a temporary file and renames it over the target: a failure (a full disk) leaves the
	 * old file whole.
	 *
	 * @return true|WP_Error
	 */
	private static function write_atomically( $path, $bytes ) {
		$tmp = $path . '.compresso-tmp';
		if ( strlen( $bytes ) !== @file_put_contents( $tmp, $bytes ) || ! @rename( $tmp, $path ) ) { // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged, WordPress.WP.AlternativeFunctions.file_system_operations_file_put_contents
			@unlink( $tmp ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
			return new WP_Error( 'compresso_write_failed', sprintf( /* translators: %s: file name */ __( '%s could not be written (is the disk full?); the original was kept.', 'compresso' ), wp_basename( $path ) ) );
		}
		return true;
	}

	/**
	 * Records a failure; QUOTA_EXCEEDED (and RATE_LIMITED) queue the attachment again after the wait
	 * the server gave.
	 *
	 * @return array The record.
	 */
	private static function fail( $attachment_id, array $state, WP_Error $error ) {
		$data           = $error->get_error_data();
		$state['error'] = array(
			'code'    => $error->get_error_code(),
			'message' => $error->get_error_message(),
		);
		$state['status'] = 'error';
		if ( in_array( $error->get_error_code(), array( 'QUOTA_EXCEEDED', 'RATE_LIMITED' ), true ) ) {
			$wait            = is_array( $data ) && ! empty( $data['retry_after'] ) ? (int) $data['retry_after'] : HOUR_IN_SECONDS;
			$state['status'] = 'waiting';
			// Kept so that a lost retry event is put back at the same time (requeue_lost()).
			$state['retry_at'] = time() + $wait;
			self::save_state( $attachment_id, $state );
			// The retry replaces the lease this request may hold on the event.
			Compresso_Runner::release( self::CRON_HOOK, array( (int) $attachment_id ) );
			wp_schedule_single_event( time() + $wait, self::CRON_HOOK, array( (int) $attachment_id ) );
			return $state;
		}
		self::save_state( $attachment_id, $state );
		return $state;
	}

	/**
	 * Keeps the file sizes WordPress records (6.0+) true to the files on disk.
	 */
	private static function update_filesizes( $attachment_id, array $metadata ) {
		$main = get_attached_file( $attachment_id );
		if ( isset( $metadata['filesize'] ) && is_file( $main ) ) {
			$metadata['filesize'] = filesize( $main );
		}
		if ( ! empty( $metadata['sizes'] ) ) {
			$dir = trailingslashit( dirname( $main ) );
			foreach ( $metadata['sizes'] as $size_name => $size ) {
				if ( isset( $size['filesize'], $size['file'] ) && is_file( $dir . $size['file'] ) ) {
					$metadata['sizes'][ $size_name ]['filesize'] = filesize( $dir . $size['file'] );
				}
			}
		}
		wp_update_attachment_metadata( $attachment_id, $metadata );
	}

	/**
	 * Restores every compressed file of the attachment from its backup (checked by hash before and
	 * after), removes the WebP/AVIF siblings, and forgets the record.
	 *
	 * @return true|WP_Error
	 */
	public static function restore( $attachment_id ) {
		// Every backup is checked before anything is touched: a restore that cannot be completed does
		// not begin (the media library names the file whose backup is missing or damaged).
		foreach ( Compresso_Backups::problems( $attachment_id ) as $name => $problem ) {
			return new WP_Error(
				'compresso_backup_' . $problem,
				sprintf(
					'missing' === $problem
						/* translators: %s: file name */
						? __( 'The backup of %s is missing; nothing was restored.', 'compresso' )
						/* translators: %s: file name */
						: __( 'The backup of %s does not match its checksum; nothing was restored.', 'compresso' ),
					$name
				)
			);
		}
		$state    = self::state( $attachment_id );
		$files    = self::files( $attachment_id );
		$metadata = wp_get_attachment_metadata( $attachment_id );
		$main     = get_attached_file( $attachment_id );
		$dir      = $main ? trailingslashit( dirname( $main ) ) : '';
		foreach ( $state['files'] as $name => $record ) {
			// A file no longer in the metadata (the version before an edit in the image editor, which
			// WordPress keeps for its own "Restore original image") is restored too.
			$path = isset( $files[ $name ] ) ? $files[ $name ] : $dir . $name;
			if ( '' === $dir || ! is_file( $path ) ) {
				continue;
			}
			foreach ( array( 'webp', 'avif' ) as $format ) {
				if ( is_file( $path . '.' . $format ) ) {
					wp_delete_file( $path . '.' . $format );
				}
			}
			if ( empty( $record['original_sha256'] ) ) {
				continue;
			}
			$restored = Compresso_Backups::restore( $path, $record['original_sha256'] );
			if ( is_wp_error( $restored ) ) {
				return $restored;
			}
			if ( $path === $main && is_array( $metadata ) ) {
				$size = wp_getimagesize( $path );
				if ( $size ) {
					$metadata['width']  = $size[0];
					$metadata['height'] = $size[1];
				}
			}
		}
		if ( ! empty( $state['png_to_jpeg']['converted'] ) ) {
			// Converted from PNG: the PNGs, MIME type, metadata and references come back.
			$undone = Compresso_Png_To_Jpeg::undo( $attachment_id, $state );
			if ( is_wp_error( $undone ) ) {
				return $undone;
			}
			$metadata = wp_get_attachment_metadata( $attachment_id );
		}
		if ( is_array( $metadata ) ) {
			self::update_filesizes( $attachment_id, $metadata );
		}
		delete_post_meta( $attachment_id, self::META );
		delete_post_meta( $attachment_id, self::PENDING_META );
		return true;
	}
}
