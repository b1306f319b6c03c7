<?php
/**
 * WP-CLI: `wp compresso optimize`, `wp compresso restore`, `wp compresso stats`. Loaded and registered
 * only when WP-CLI runs (WP_CLI defined).
 *
 * The commands work in the foreground, image after image, with a progress bar: a CLI run is not limited
 * by a web request's time, and stops cleanly (with the code) when the quota runs out.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Optimizes, restores and reports on the media library's images.
 */
class Compresso_Cli {

	/**
	 * Optimizes images: the ones given, or every image in the media library. Images already optimized
	 * are skipped without a request.
	 *
	 * ## OPTIONS
	 *
	 * [<id>...]
	 * : Attachment IDs.
	 *
	 * [--all]
	 * : Every image in the media library.
	 *
	 * ## EXAMPLES
	 *
	 *     wp compresso optimize --all
	 *     wp compresso optimize 12 13
	 *
	 * @param array $args       Positional arguments.
	 * @param array $assoc_args Flags.
	 */
	public function optimize( $args, $assoc_args ) {
		if ( ! compresso_is_connected() ) {
			WP_CLI::error( 'Compresso is not connected to a server: save a server URL and API key in Settings → Compresso first.' );
		}
		$ids      = $this->ids( $args, $assoc_args, 'optimize' );
		$progress = $this->progress( 'Optimizing images', count( $ids ) );
		$counts   = array(
			'optimized' => 0,
			'skipped'   => 0,
			'failed'    => 0,
			'requests'  => 0,
		);
		foreach ( $ids as $id ) {
			$before = Compresso_Optimizer::state( $id );
			$state  = $this->optimize_one( $id );
			$sent   = (int) $state['requests'] - (int) $before['requests'];
			$counts['requests'] += max( 0, $sent );
			if ( 'waiting' === $state['status'] ) {
				// The optimizer queued this image again for after the reset; the rest wait for another run.
				$this->tick( $progress );
				$this->finish( $progress );
				WP_CLI::error( sprintf( '%s: %s Run the command again after that; images already done will be skipped.', $state['error']['code'], $state['error']['message'] ) );
			}
			if ( 'done' === $state['status'] ) {
				++$counts[ $sent > 0 ? 'optimized' : 'skipped' ];
			} else {
				++$counts['failed'];
				WP_CLI::warning( sprintf( '#%d %s: %s %s', $id, wp_basename( (string) get_attached_file( $id ) ), $state['error']['code'], $state['error']['message'] ) );
			}
			$this->tick( $progress );
		}
		$this->finish( $progress );
		$summary = sprintf( '%d optimized, %d already optimized, %d failed; %d API requests.', $counts['optimized'], $counts['skipped'], $counts['failed'], $counts['requests'] );
		if ( $counts['failed'] ) {
			WP_CLI::error( $summary );
		}
		WP_CLI::success( $summary );
	}

	/**
	 * One image, asked for by hand. Tries that died before (PHP killed while the background runner
	 * worked on it) are forgotten: the owner asked for this one, so an image marked failed after them, or
	 * a count that would make Compresso give up on it, does not stop it. This try is counted like the
	 * runner's (Compresso_Optimizer::attempt()), so a PHP death during the command is not lost. The
	 * image's queued event, if it had one, stays in the schedule, leased, while the command works on it:
	 * after such a death the background runner takes it up when the lease runs out, with the death
	 * counted; when the work ends the event is gone (a new one the optimizer scheduled, after a quota
	 * reset, stays).
	 *
	 * @param int $id The attachment.
	 * @return array The attachment's record afterwards.
	 */
	private function optimize_one( $id ) {
		$args   = array( $id );
		$queued = false !== wp_next_scheduled( Compresso_Optimizer::CRON_HOOK, $args );
		wp_clear_scheduled_hook( Compresso_Optimizer::CRON_HOOK, $args );
		if ( $queued ) {
			Compresso_Runner::lease( Compresso_Optimizer::CRON_HOOK, $args );
		}
		delete_post_meta( $id, Compresso_Optimizer::ATTEMPTS_META );
		$state = Compresso_Optimizer::attempt( $id );
		// Not in a `finally`: work that threw did not end, and its event must come due again.
		Compresso_Runner::release( Compresso_Optimizer::CRON_HOOK, $args );
		return $state;
	}

	/**
	 * Puts the original files back from their backups (checked by hash) and removes WebP/AVIF siblings.
	 *
	 * ## OPTIONS
	 *
	 * [<id>...]
	 * : Attachment IDs.
	 *
	 * [--all]
	 * : Every optimized image.
	 *
	 * @param array $args       Positional arguments.
	 * @param array $assoc_args Flags.
	 */
	public function restore( $args, $assoc_args ) {
		$ids      = $this->ids( $args, $assoc_args, 'restore' );
		$ids      = array_values(
			array_filter(
				$ids,
				static function ( $id ) {
					return '' !== get_post_meta( $id, Compresso_Optimizer::META, true );
				}
			)
		);
		$progress = $this->progress( 'Restoring originals', count( $ids ) );
		$failed   = 0;
		foreach ( $ids as $id ) {
			$done = Compresso_Optimizer::restore( $id );
			if ( is_wp_error( $done ) ) {
				++$failed;
				WP_CLI::warning( sprintf( '#%d: %s %s', $id, $done->get_error_code(), $done->get_error_message() ) );
			}
			$this->tick( $progress );
		}
		$this->finish( $progress );
		$summary = sprintf( '%d restored, %d failed.', count( $ids ) - $failed, $failed );
		if ( $failed ) {
			WP_CLI::error( $summary );
		}
		WP_CLI::success( $summary );
	}

	/**
	 * The library's images, how many are optimized, the bytes saved, and what the rest will cost.
	 *
	 * @param array $args       Unused.
	 * @param array $assoc_args Unused.
	 */
	public function stats( $args, $assoc_args ) {
		$stats = Compresso_Bulk::stats();
		$saved = $stats['bytes_before'] - $stats['bytes_after'];
		WP_CLI::log( sprintf( 'Images: %d (%d optimized, %d to do).', $stats['images'], $stats['optimized'], $stats['pending'] ) );
		WP_CLI::log( sprintf( 'Saved: %s of %s (%s%%).', size_format( $saved ), size_format( $stats['bytes_before'] ), $stats['bytes_before'] ? number_format( 100 * $saved / $stats['bytes_before'], 1 ) : '0' ) );
		WP_CLI::log( sprintf( 'One upload costs up to %d API requests (%d files: the original and %d sizes; formats: %s).', $stats['requests_per_upload'], 1 + count( $stats['sizes'] ), count( $stats['sizes'] ), $stats['formats'] ? implode( ', ', $stats['formats'] ) : 'none besides the original' ) );
		WP_CLI::log( sprintf( 'The images left need %d API requests.', $stats['requests_for_library'] ) );
		if ( null !== $stats['quota']['limit'] ) {
			WP_CLI::log( sprintf( 'Quota: %s of %d requests left today.', null === $stats['quota']['remaining'] ? '?' : $stats['quota']['remaining'], $stats['quota']['limit'] ) );
		}
	}

	/**
	 * @return int[] The IDs the command works on.
	 */
	private function ids( array $args, array $assoc_args, $command ) {
		if ( ! empty( $assoc_args['all'] ) ) {
			$ids   = array();
			$after = 0;
			do {
				$page  = Compresso_Bulk::image_ids( $after, 0, 500 );
				$ids   = array_merge( $ids, $page );
				$after = $page ? end( $page ) : 0;
			} while ( count( $page ) === 500 );
			return $ids;
		}
		if ( ! $args ) {
			WP_CLI::error( sprintf( 'Give attachment IDs or --all, e.g. wp compresso %s --all', $command ) );
		}
		$ids = array();
		foreach ( $args as $arg ) {
			$id = absint( $arg );
			if ( ! $id || (string) $id !== (string) $arg || 'attachment' !== get_post_type( $id ) || ! in_array( get_post_mime_type( $id ), Compresso_Optimizer::MIME_TYPES, true ) ) {
				WP_CLI::error( sprintf( '"%s" is not the ID of an image in the media library.', $arg ) );
			}
			$ids[] = $id;
		}
		return $ids;
	}

	/**
	 * @return object|null A progress bar, when this WP-CLI has them.
	 */
	private function progress( $label, $count ) {
		if ( function_exists( 'WP_CLI\Utils\make_progress_bar' ) ) {
			return \WP_CLI\Utils\make_progress_bar( $label, $count );
		}
		WP_CLI::log( sprintf( '%s: %d', $label, $count ) );
		return null;
	}

	private function tick( $progress ) {
		if ( $progress ) {
			$progress->tick();
		}
	}

	private function finish( $progress ) {
		if ( $progress ) {
			$progress->finish();
		}
	}
}
