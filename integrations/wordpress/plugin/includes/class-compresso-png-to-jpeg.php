<?php
/**
 * Smart PNG-to-JPEG: an uploaded PNG that is a photo (opaque, and much smaller as a JPEG) becomes a
 * JPEG attachment, and everything that points at it follows; restore undoes all of it.
 *
 * The decision is the server's format conversion (`png_to_jpeg=true` on /api/v1/compress): it answers
 * a JPEG only when no pixel is transparent (an alpha channel that is present but fully opaque counts
 * as opaque; it looks at every pixel) and the JPEG is at least 20% smaller than the best PNG it can
 * make. The plugin then also asks for its own threshold against the uploaded PNG (the
 * `png_to_jpeg_min_saving` setting, in percent). When both pass:
 *
 * - the PNG and each of its sizes are backed up (with their checksums), every size is converted by the
 *   server (`output_format=jpeg`), and the JPEGs are written under new names (`photo.png` →
 *   `photo.jpg`, `photo-300x200.png` → `photo-300x200.jpg`; a number is added when a name is taken);
 * - the attachment's file, MIME type and metadata (file, sizes, mime-type, filesize) are updated and the
 *   PNGs removed;
 * - every URL of the old files in post content and post meta (serialized and JSON-escaped values
 *   included) is rewritten to the JPEG's.
 *
 * Restore puts back the PNGs byte for byte (checked against their checksums), the file, MIME type and
 * metadata as they were, and the URLs in posts and meta. Conversion is done only when backups are on,
 * so it can always be undone.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Converts opaque PNG attachments to JPEG and back.
 */
class Compresso_Png_To_Jpeg {

	/** Default of the png_to_jpeg_min_saving setting, in percent of the uploaded PNG. */
	const DEFAULT_MIN_SAVING = 20;

	/**
	 * Before the optimizer's per-file loop: converts the attachment when it is a PNG that qualifies.
	 * The outcome is kept in the record ('png_to_jpeg'), so a PNG is asked about once.
	 *
	 * @param int                 $attachment_id The attachment.
	 * @param Compresso_Api_Client $client       The client.
	 * @param array               $settings      The settings.
	 * @param array               $state         The record (updated).
	 * @return true|WP_Error True when nothing failed (converted or not).
	 */
	public static function maybe_convert( $attachment_id, Compresso_Api_Client $client, array $settings, array &$state ) {
		if ( empty( $settings['png_to_jpeg'] ) || empty( $settings['backups'] ) || isset( $state['png_to_jpeg'] ) || 'image/png' !== get_post_mime_type( $attachment_id ) ) {
			return true;
		}
		$main     = get_attached_file( $attachment_id );
		$metadata = wp_get_attachment_metadata( $attachment_id );
		if ( ! $main || ! is_file( $main ) || ! is_array( $metadata ) ) {
			return true;
		}
		$bytes = file_get_contents( $main ); // phpcs:ignore WordPress.WP.AlternativeFunctions.file_get_contents_file_get_contents
		$out   = $client->compress(
			$bytes,
			wp_basename( $main ),
			array(
				'quality'     => $settings['quality'],
				'png_to_jpeg' => true,
				'strip_exif'  => true,
			)
		);
		if ( is_wp_error( $out ) ) {
			return $out;
		}
		++$state['requests'];
		$min_saving = isset( $settings['png_to_jpeg_min_saving'] ) ? (float) $settings['png_to_jpeg_min_saving'] : self::DEFAULT_MIN_SAVING;
		$saving     = strlen( $bytes ) > 0 ? ( 1 - strlen( $out['bytes'] ) / strlen( $bytes ) ) * 100 : 0;
		if ( 'jpeg' !== $out['result']['output_format'] ) {
			$state['png_to_jpeg'] = array( 'converted' => false, 'reason' => 'transparent_or_small_saving' );
			return true;
		}
		if ( $saving < $min_saving ) {
			$state['png_to_jpeg'] = array(
				'converted' => false,
				'reason'    => 'below_threshold',
				'saving'    => round( $saving, 1 ),
			);
			return true;
		}
		return self::convert( $attachment_id, $client, $settings, $state, $main, $metadata, $out['bytes'], $saving );
	}

	/**
	 * Does the conversion once the main file's JPEG is known.
	 *
	 * @return true|WP_Error
	 */
	private static function convert( $attachment_id, Compresso_Api_Client $client, array $settings, array &$state, $main, array $metadata, $main_jpeg, $saving ) {
		$dir   = trailingslashit( dirname( $main ) );
		$files = Compresso_Optimizer::files( $attachment_id );
		$names = self::new_names( $dir, array_keys( $files ) );
		if ( is_wp_error( $names ) ) {
			return $names;
		}
		// Every JPEG is made before anything is changed: a failure leaves the attachment as it was.
		$jpegs = array();
		foreach ( $files as $name => $path ) {
			if ( $path === $main ) {
				$jpegs[ $name ] = $main_jpeg;
				continue;
			}
			$out = $client->compress(
				file_get_contents( $path ), // phpcs:ignore WordPress.WP.AlternativeFunctions.file_get_contents_file_get_contents
				$name,
				array(
					'quality'       => $settings['quality'],
					'output_format' => 'jpeg',
					'strip_exif'    => true,
				)
			);
			if ( is_wp_error( $out ) ) {
				return $out;
			}
			++$state['requests'];
			$jpegs[ $name ] = $out['bytes'];
		}
		$backups = array();
		foreach ( $files as $name => $path ) {
			$backup = Compresso_Backups::keep( $path );
			if ( is_wp_error( $backup ) ) {
				return $backup;
			}
			$backups[ $name ] = array(
				'sha256' => $backup['sha256'],
				'size'   => filesize( $path ),
			);
		}
		$written = array();
		foreach ( $jpegs as $name => $bytes ) {
			$target = $dir . $names[ $name ];
			$tmp    = $target . '.compresso-tmp';
			if ( strlen( $bytes ) !== @file_put_contents( $tmp, $bytes ) || ! @rename( $tmp, $target ) ) { // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged, WordPress.WP.AlternativeFunctions.file_system_operations_file_put_contents
				@unlink( $tmp ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
				foreach ( $written as $done ) {
					@unlink( $done ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
				}
				return new WP_Error( 'compresso_write_failed', sprintf( /* translators: %s: file name */ __( '%s could not be written (is the disk full?); the PNG was kept.', 'compresso' ), $names[ $name ] ) );
			}
			$written[] = $target;
		}

		$old_file     = get_post_meta( $attachment_id, '_wp_attached_file', true );
		$old_metadata = $metadata;
		$new_main     = $dir . $names[ wp_basename( $main ) ];
		update_attached_file( $attachment_id, $new_main );
		$metadata['file'] = _wp_relative_upload_path( $new_main );
		if ( ! empty( $metadata['original_image'] ) && isset( $names[ $metadata['original_image'] ] ) ) {
			$metadata['original_image'] = $names[ $metadata['original_image'] ];
		}
		if ( isset( $metadata['filesize'] ) ) {
			$metadata['filesize'] = strlen( $main_jpeg );
		}
		if ( ! empty( $metadata['sizes'] ) ) {
			foreach ( $metadata['sizes'] as $size_name => $size ) {
				if ( empty( $size['file'] ) || ! isset( $names[ $size['file'] ] ) ) {
					continue;
				}
				$metadata['sizes'][ $size_name ]['file']      = $names[ $size['file'] ];
				$metadata['sizes'][ $size_name ]['mime-type'] = 'image/jpeg';
				if ( isset( $size['filesize'] ) ) {
					$metadata['sizes'][ $size_name ]['filesize'] = strlen( $jpegs[ $size['file'] ] );
				}
			}
		}
		wp_update_attachment_metadata( $attachment_id, $metadata );
		self::set_mime_type( $attachment_id, 'image/jpeg' );

		$map        = self::url_map( $dir, $names );
		$references = self::replace_references( $attachment_id, $map );
		foreach ( $files as $name => $path ) {
			foreach ( array( '', '.webp', '.avif' ) as $suffix ) {
				if ( is_file( $path . $suffix ) ) {
					wp_delete_file( $path . $suffix );
				}
			}
			unset( $state['files'][ $name ] );
		}

		// The JPEGs are the server's output: recorded as compressed, so they are not sent again.
		foreach ( $jpegs as $name => $bytes ) {
			$state['files'][ $names[ $name ] ] = array(
				'size_before'     => $backups[ $name ]['size'],
				'size_after'      => strlen( $bytes ),
				'original_sha256' => null,
				'sha256'          => hash( 'sha256', $bytes ),
				'siblings'        => array(),
				'from_png'        => $name,
			);
		}
		$state['png_to_jpeg'] = array(
			'converted'     => true,
			'saving'        => round( $saving, 1 ),
			'names'         => $names,
			'backups'       => $backups,
			'old_file'      => $old_file,
			'old_metadata'  => $old_metadata,
			'references'    => $references,
		);
		Compresso_Optimizer::save_state( $attachment_id, $state );
		return true;
	}

	/**
	 * Undoes a conversion: PNGs back from their backups (checked), JPEGs and their siblings removed,
	 * the file, MIME type, metadata and references put back.
	 *
	 * @param int   $attachment_id The attachment.
	 * @param array $state         Its record.
	 * @return true|WP_Error
	 */
	public static function undo( $attachment_id, array $state ) {
		$conversion = isset( $state['png_to_jpeg'] ) ? $state['png_to_jpeg'] : array();
		if ( empty( $conversion['converted'] ) ) {
			return true;
		}
		$uploads = wp_get_upload_dir();
		$dir     = trailingslashit( dirname( trailingslashit( $uploads['basedir'] ) . $conversion['old_file'] ) );
		// Check every backup first: a restore that cannot be completed does not begin.
		foreach ( $conversion['backups'] as $name => $backup ) {
			$path = Compresso_Backups::path_for( $dir . $name );
			if ( is_wp_error( $path ) ) {
				return $path;
			}
			if ( ! is_file( $path ) ) {
				return new WP_Error( 'compresso_backup_missing', sprintf( /* translators: %s: file name */ __( 'The backup of %s is missing.', 'compresso' ), $name ) );
			}
			if ( hash_file( 'sha256', $path ) !== $backup['sha256'] ) {
				return new WP_Error( 'compresso_backup_damaged', sprintf( /* translators: %s: file name */ __( 'The backup of %s does not match its checksum; the current file was left in place.', 'compresso' ), $name ) );
			}
		}
		foreach ( $conversion['backups'] as $name => $backup ) {
			$restored = Compresso_Backups::restore( $dir . $name, $backup['sha256'] );
			if ( is_wp_error( $restored ) ) {
				return $restored;
			}
		}
		foreach ( $conversion['names'] as $jpeg ) {
			foreach ( array( '', '.webp', '.avif' ) as $suffix ) {
				if ( is_file( $dir . $jpeg . $suffix ) ) {
					wp_delete_file( $dir . $jpeg . $suffix );
				}
			}
		}
		update_attached_file( $attachment_id, trailingslashit( $uploads['basedir'] ) . $conversion['old_file'] );
		wp_update_attachment_metadata( $attachment_id, $conversion['old_metadata'] );
		self::set_mime_type( $attachment_id, 'image/png' );
		self::replace_references( $attachment_id, array_flip( self::url_map( $dir, $conversion['names'] ) ) );
		return true;
	}

	/**
	 * New names: the same name with .jpg, with -1, -2, ... after the base name when one is taken.
	 *
	 * @return array|WP_Error old name => new name.
	 */
	private static function new_names( $dir, array $names ) {
		for ( $n = 0; $n < 100; $n++ ) {
			$out   = array();
			$taken = false;
			foreach ( $names as $name ) {
				$base = preg_replace( '/\.png$/i', '', $name );
				if ( $n > 0 ) {
					// photo-300x200 → photo-1-300x200; photo-scaled → photo-1-scaled; photo → photo-1.
					$base = preg_match( '/^(.*?)(-\d+x\d+|-scaled|-e\d{13}(?:-\d+x\d+)?)$/', $base, $m ) ? $m[1] . '-' . $n . $m[2] : $base . '-' . $n;
				}
				$out[ $name ] = $base . '.jpg';
				$taken        = $taken || file_exists( $dir . $out[ $name ] );
			}
			if ( ! $taken ) {
				return $out;
			}
		}
		return new WP_Error( 'compresso_no_name', __( 'No free file name was found for the JPEG.', 'compresso' ) );
	}

	/**
	 * @return array Old relative path under uploads => new one, for every file (longest first).
	 */
	private static function url_map( $dir, array $names ) {
		$uploads  = wp_get_upload_dir();
		$relative = ltrim( substr( $dir, strlen( trailingslashit( $uploads['basedir'] ) ) ), '/' );
		$map      = array();
		foreach ( $names as $old => $new ) {
			$map[ $relative . $old ] = $relative . $new;
		}
		uksort(
			$map,
			static function ( $a, $b ) {
				return strlen( $b ) - strlen( $a );
			}
		);
		return $map;
	}

	/**
	 * Rewrites every reference to the old files in post content and post meta (the attachment's own
	 * file and metadata records excepted). Paths are matched with their year/month folder, so a
	 * file of the same name in another folder is not touched; JSON-escaped slashes are matched too.
	 *
	 * @param int   $attachment_id The attachment.
	 * @param array $map           Old relative path => new one.
	 * @return array array( 'posts' => ids changed, 'meta' => meta ids changed ).
	 */
	private static function replace_references( $attachment_id, array $map ) {
		global $wpdb;
		$pairs = array();
		foreach ( $map as $old => $new ) {
			$pairs[ '/' . $old ]                        = '/' . $new;
			$pairs[ '\\/' . str_replace( '/', '\\/', $old ) ] = '\\/' . str_replace( '/', '\\/', $new );
		}
		$changed = array(
			'posts' => array(),
			'meta'  => array(),
		);
		// The shortest old path is a prefix of what every other one shares (folder + base name).
		$needles = array();
		foreach ( array_keys( $map ) as $old ) {
			$needles[] = '%' . $wpdb->esc_like( $old ) . '%';
			$needles[] = '%' . $wpdb->esc_like( str_replace( '/', '\\/', $old ) ) . '%';
		}
		$where = implode( ' OR ', array_fill( 0, count( $needles ), 'post_content LIKE %s' ) );
		$posts = $wpdb->get_results( $wpdb->prepare( "SELECT ID, post_content FROM {$wpdb->posts} WHERE {$where}", $needles ) ); // phpcs:ignore WordPress.DB.PreparedSQL.InterpolatedNotPrepared, WordPress.DB.DirectDatabaseQuery
		foreach ( $posts as $post ) {
			$content = strtr( $post->post_content, $pairs );
			if ( $content !== $post->post_content ) {
				$wpdb->update( $wpdb->posts, array( 'post_content' => $content ), array( 'ID' => $post->ID ) ); // phpcs:ignore WordPress.DB.DirectDatabaseQuery
				clean_post_cache( (int) $post->ID );
				$changed['posts'][] = (int) $post->ID;
			}
		}
		$where = implode( ' OR ', array_fill( 0, count( $needles ), 'meta_value LIKE %s' ) );
		$args  = array_merge( $needles, array( $attachment_id ) );
		$rows  = $wpdb->get_results( $wpdb->prepare( "SELECT meta_id, post_id, meta_key, meta_value FROM {$wpdb->postmeta} WHERE ( {$where} ) AND NOT ( post_id = %d AND meta_key IN ( '_wp_attached_file', '_wp_attachment_metadata', '_compresso', '_wp_attachment_backup_sizes' ) )", $args ) ); // phpcs:ignore WordPress.DB.PreparedSQL.InterpolatedNotPrepared, WordPress.DB.DirectDatabaseQuery
		foreach ( $rows as $row ) {
			$value = maybe_unserialize( $row->meta_value );
			$new   = self::replace_deep( $value, $pairs );
			if ( $new !== $value ) {
				update_metadata_by_mid( 'post', (int) $row->meta_id, $new );
				$changed['meta'][] = (int) $row->meta_id;
			}
		}
		return $changed;
	}

	/**
	 * @return mixed The value with the pairs replaced in every string inside it.
	 */
	private static function replace_deep( $value, array $pairs ) {
		if ( is_string( $value ) ) {
			return strtr( $value, $pairs );
		}
		if ( is_array( $value ) ) {
			foreach ( $value as $k => $v ) {
				$value[ $k ] = self::replace_deep( $v, $pairs );
			}
		}
		return $value;
	}

	/**
	 * Sets the attachment's MIME type without the side effects of wp_update_post().
	 */
	private static function set_mime_type( $attachment_id, $mime ) {
		global $wpdb;
		$wpdb->update( $wpdb->posts, array( 'post_mime_type' => $mime ), array( 'ID' => $attachment_id ) ); // phpcs:ignore WordPress.DB.DirectDatabaseQuery
		clean_post_cache( $attachment_id );
	}
}
