<?php
/**
 * Backups of originals, kept outside the uploads tree (wp-content/compresso-backups/), each with its
 * SHA-256 so a restore checks the backup before it copies and the file after.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Keeps and restores original files.
 */
class Compresso_Backups {

	/**
	 * @return string The backup root, with a trailing slash. Outside uploads/: site backups that copy
	 *                the uploads tree do not copy the originals twice, and the web server does not list them.
	 */
	public static function root() {
		$root = apply_filters( 'compresso_backup_dir', WP_CONTENT_DIR . '/compresso-backups' );
		return trailingslashit( $root );
	}

	/**
	 * The backup path for an uploaded file (same relative path as under uploads/).
	 *
	 * @param string $file Absolute path of a file under the uploads directory.
	 * @return string|WP_Error
	 */
	public static function path_for( $file ) {
		$uploads = wp_get_upload_dir();
		$base    = trailingslashit( $uploads['basedir'] );
		if ( 0 !== strpos( $file, $base ) ) {
			return new WP_Error( 'compresso_outside_uploads', __( 'The file is not in the uploads directory.', 'compresso' ) );
		}
		return self::root() . substr( $file, strlen( $base ) );
	}

	/**
	 * Copies a file to its backup, once (an existing backup is the true original and is never replaced).
	 *
	 * @param string $file Absolute path under uploads/.
	 * @return array|WP_Error array( 'path' => backup path, 'sha256' => hash of the original ).
	 */
	public static function keep( $file ) {
		$backup = self::path_for( $file );
		if ( is_wp_error( $backup ) ) {
			return $backup;
		}
		if ( file_exists( $backup ) ) {
			return array(
				'path'   => $backup,
				'sha256' => hash_file( 'sha256', $backup ),
			);
		}
		self::protect_root();
		if ( ! wp_mkdir_p( dirname( $backup ) ) ) {
			return new WP_Error( 'compresso_backup_failed', __( 'The backup folder could not be created (is the disk full or read-only?).', 'compresso' ) );
		}
		$hash = hash_file( 'sha256', $file );
		// Copy to a temporary name and rename: a half-written backup never looks like a whole one.
		$tmp = $backup . '.part';
		if ( ! @copy( $file, $tmp ) || hash_file( 'sha256', $tmp ) !== $hash || ! @rename( $tmp, $backup ) ) { // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
			@unlink( $tmp ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
			return new WP_Error( 'compresso_backup_failed', __( 'The original could not be backed up (is the disk full?); it was left untouched.', 'compresso' ) );
		}
		return array(
			'path'   => $backup,
			'sha256' => $hash,
		);
	}

	/**
	 * Puts a backup back in place, checking its hash before and the restored file's after.
	 *
	 * @param string $file   Absolute path under uploads/.
	 * @param string $sha256 The original's hash, as recorded when it was backed up.
	 * @return true|WP_Error
	 */
	public static function restore( $file, $sha256 ) {
		$backup = self::path_for( $file );
		if ( is_wp_error( $backup ) ) {
			return $backup;
		}
		if ( ! file_exists( $backup ) ) {
			return new WP_Error( 'compresso_backup_missing', sprintf( /* translators: %s: file name */ __( 'The backup of %s is missing.', 'compresso' ), wp_basename( $file ) ) );
		}
		if ( hash_file( 'sha256', $backup ) !== $sha256 ) {
			return new WP_Error( 'compresso_backup_damaged', sprintf( /* translators: %s: file name */ __( 'The backup of %s does not match its checksum; the current file was left in place.', 'compresso' ), wp_basename( $file ) ) );
		}
		$tmp = $file . '.compresso-restore';
		if ( ! @copy( $backup, $tmp ) || ! @rename( $tmp, $file ) ) { // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
			@unlink( $tmp ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
			return new WP_Error( 'compresso_restore_failed', sprintf( /* translators: %s: file name */ __( '%s could not be written back (is the disk full?).', 'compresso' ), wp_basename( $file ) ) );
		}
		if ( hash_file( 'sha256', $file ) !== $sha256 ) {
			return new WP_Error( 'compresso_restore_failed', sprintf( /* translators: %s: file name */ __( 'The restored %s does not match the original checksum.', 'compresso' ), wp_basename( $file ) ) );
		}
		@unlink( $backup ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
		return true;
	}

	/**
	 * Every backup of the attachment checked against its checksum.
	 *
	 * @param int $attachment_id The attachment.
	 * @return array file name => 'missing' | 'damaged' (only files with a problem).
	 */
	public static function problems( $attachment_id ) {
		$state = Compresso_Optimizer::state( $attachment_id );
		$main  = get_attached_file( $attachment_id );
		if ( ! $main ) {
			return array();
		}
		$dir    = trailingslashit( dirname( $main ) );
		$expect = array();
		foreach ( $state['files'] as $name => $record ) {
			if ( ! empty( $record['original_sha256'] ) ) {
				$expect[ $name ] = $record['original_sha256'];
			}
		}
		if ( ! empty( $state['png_to_jpeg']['converted'] ) ) {
			foreach ( $state['png_to_jpeg']['backups'] as $name => $backup ) {
				$expect[ $name ] = $backup['sha256'];
			}
		}
		$problems = array();
		foreach ( $expect as $name => $sha256 ) {
			$backup = self::path_for( $dir . $name );
			if ( is_wp_error( $backup ) || ! is_file( $backup ) ) {
				$problems[ $name ] = 'missing';
			} elseif ( hash_file( 'sha256', $backup ) !== $sha256 ) {
				$problems[ $name ] = 'damaged';
			}
		}
		return $problems;
	}

	/**
	 * A web server that serves wp-content/ must not list or serve the originals.
	 */
	private static function protect_root() {
		$root = self::root();
		if ( file_exists( $root . 'index.php' ) ) {
			return;
		}
		wp_mkdir_p( $root );
		file_put_contents( $root . 'index.php', "<?php\n// Silence is golden.\n" ); // phpcs:ignore WordPress.WP.AlternativeFunctions.file_system_operations_file_put_contents
		file_put_contents( $root . '.htaccess', "Require all denied\n" ); // phpcs:ignore WordPress.WP.AlternativeFunctions.file_system_operations_file_put_contents
	}
}
