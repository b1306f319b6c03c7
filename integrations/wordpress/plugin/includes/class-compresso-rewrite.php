<?php
/**
 * Rewrite delivery: the web server answers a request for file.jpg with file.jpg.avif or file.jpg.webp
 * (the siblings the optimizer writes) when the browser's Accept header takes that format and the
 * sibling exists, with `Vary: Accept` so caches keep one copy per format. Apache rules are written into
 * the uploads directory's .htaccess between markers (and removed again); nginx cannot read such a
 * file, so its snippet is shown for the owner to add to the server block.
 *
 * The rule and snippet builders are pure functions (unit-tested with PHPUnit); only sync() and
 * remove() touch the file system.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Server rules for rewrite delivery.
 */
class Compresso_Rewrite {

	/** The marker name around the plugin's block in .htaccess (# BEGIN Compresso / # END Compresso). */
	const MARKER = 'Compresso';

	/** Formats in the order the server should prefer them, with their MIME types. */
	const FORMATS = array(
		'avif' => 'image/avif',
		'webp' => 'image/webp',
	);

	/**
	 * The Apache rules for the uploads directory's .htaccess (per-directory context).
	 *
	 * @param string[] $formats The formats being generated ('avif', 'webp'), any order.
	 * @return string[] Lines, without the markers; empty when no format is on.
	 */
	public static function apache_rules( array $formats ) {
		$formats = self::ordered( $formats );
		if ( ! $formats ) {
			return array();
		}
		$lines = array(
			'# Rewrite delivery: file.jpg is answered with file.jpg.' . implode( ' or file.jpg.', $formats ) . ' when the browser',
			'# accepts that format and the file exists. Written by the plugin; removed when delivery changes.',
			'<IfModule mod_mime.c>',
		);
		foreach ( $formats as $format ) {
			$lines[] = '	AddType ' . self::FORMATS[ $format ] . ' .' . $format;
		}
		$lines[] = '</IfModule>';
		$lines[] = '<IfModule mod_rewrite.c>';
		$lines[] = '	RewriteEngine On';
		foreach ( $formats as $format ) {
			$lines[] = '	RewriteCond %{HTTP_ACCEPT} ' . self::FORMATS[ $format ];
			$lines[] = '	RewriteCond %{REQUEST_FILENAME}.' . $format . ' -f';
			$lines[] = '	RewriteRule ^(.+\.(?:jpe?g|png|gif))$ $1.' . $format . ' [NC,T=' . self::FORMATS[ $format ] . ',L]';
		}
		$lines[] = '</IfModule>';
		$lines[] = '<IfModule mod_headers.c>';
		// The answer for file.jpg depends on Accept whether or not it was rewritten: a cache must keep
		// one copy per Accept. After an internal rewrite the file matched is file.jpg.webp, hence the
		// optional second extension.
		$lines[] = '	<FilesMatch "(?i)\.(jpe?g|png|gif)(\.(' . implode( '|', $formats ) . '))?$">';
		$lines[] = '		Header merge Vary Accept';
		$lines[] = '	</FilesMatch>';
		$lines[] = '</IfModule>';
		return $lines;
	}

	/**
	 * The nginx snippet (nginx reads no .htaccess): two `map` blocks for the http {} context and a
	 * location for the server {} block.
	 *
	 * @param string   $uploads_path The uploads directory's URL path, e.g. /wp-content/uploads.
	 * @param string[] $formats      The formats being generated.
	 * @return string '' when no format is on.
	 */
	public static function nginx_snippet( $uploads_path, array $formats ) {
		$formats = self::ordered( $formats );
		if ( ! $formats ) {
			return '';
		}
		$path = '/' . trim( (string) $uploads_path, '/' );
		// One map picks the preferred format the browser takes; a second one (when both formats are
		// made) falls back to WebP for a file whose AVIF sibling was not made (not smaller).
		$snippet = "# Compresso: in the http {} block (e.g. /etc/nginx/conf.d/compresso.conf)\n"
			. "map \$http_accept \$compresso_suffix {\n    default \"\";\n";
		foreach ( $formats as $format ) {
			$snippet .= '    "~*' . self::FORMATS[ $format ] . '" ".' . $format . "\";\n";
		}
		$snippet .= "}\n";
		$tries    = '$uri$compresso_suffix ';
		foreach ( array_slice( $formats, 1 ) as $format ) {
			$snippet .= 'map $http_accept $compresso_' . $format . " {\n    default \"\";\n"
				. '    "~*' . self::FORMATS[ $format ] . '" ".' . $format . "\";\n}\n";
			$tries   .= '$uri$compresso_' . $format . ' ';
		}
		return $snippet
			. "\n# Compresso: in the site's server {} block, before other locations that match images\n"
			. 'location ~* ^' . $path . "/.+\\.(?:jpe?g|png|gif)$ {\n"
			. "    add_header Vary Accept;\n"
			. '    try_files ' . $tries . "\$uri =404;\n"
			. "}\n"
			. "# If nginx's mime.types has no \"image/avif avif;\" line (older versions), add it there.\n";
	}

	/**
	 * Puts the plugin's block into a .htaccess text, replacing the block already there; an empty
	 * list removes the block and its markers. Everything outside the markers is kept as it was.
	 *
	 * @param string   $contents The file's current text ('' when it does not exist).
	 * @param string[] $lines    The rules (apache_rules()), or array() to remove them.
	 * @return string The new text.
	 */
	public static function with_block( $contents, array $lines ) {
		$begin   = '# BEGIN ' . self::MARKER;
		$end     = '# END ' . self::MARKER;
		$pattern = '/(?:^|\R)' . preg_quote( $begin, '/' ) . '\R.*?' . preg_quote( $end, '/' ) . '[^\S\r\n]*(?=\R|$)/s';
		$rest    = preg_replace( $pattern, '', (string) $contents );
		$rest    = ltrim( (string) $rest, "\r\n" );
		if ( ! $lines ) {
			return $rest;
		}
		$block = $begin . "\n" . implode( "\n", $lines ) . "\n" . $end . "\n";
		return $block . ( '' === $rest ? '' : "\n" . $rest );
	}

	/**
	 * The uploads directory's .htaccess path.
	 *
	 * @return string
	 */
	public static function htaccess_path() {
		$uploads = wp_get_upload_dir();
		return trailingslashit( $uploads['basedir'] ) . '.htaccess';
	}

	/**
	 * Writes or removes the Apache block to match the settings.
	 *
	 * @param array $settings The plugin's settings.
	 * @return true|WP_Error An error when the file cannot be written (the settings screen says so).
	 */
	public static function sync( array $settings ) {
		$on = isset( $settings['delivery'] ) && 'rewrite' === $settings['delivery'];
		return self::write( $on ? self::apache_rules( self::formats_of( $settings ) ) : array() );
	}

	/**
	 * Removes the Apache block (deactivation, uninstall, delivery switched away from rewrite).
	 *
	 * @return true|WP_Error
	 */
	public static function remove() {
		return self::write( array() );
	}

	/**
	 * The formats the settings generate.
	 *
	 * @param array $settings The plugin's settings.
	 * @return string[]
	 */
	public static function formats_of( array $settings ) {
		$formats = array();
		foreach ( array_keys( self::FORMATS ) as $format ) {
			if ( ! empty( $settings[ $format ] ) ) {
				$formats[] = $format;
			}
		}
		return $formats;
	}

	/**
	 * The URL path of the uploads directory (for the nginx snippet).
	 *
	 * @return string
	 */
	public static function uploads_path() {
		$uploads = wp_get_upload_dir();
		$path    = wp_parse_url( $uploads['baseurl'], PHP_URL_PATH );
		return is_string( $path ) ? $path : '/wp-content/uploads';
	}

	/**
	 * @param string[] $lines The block, or array() to remove it.
	 * @return true|WP_Error
	 */
	private static function write( array $lines ) {
		$path    = self::htaccess_path();
		$exists  = is_file( $path );
		$current = $exists ? (string) file_get_contents( $path ) : ''; // phpcs:ignore WordPress.WP.AlternativeFunctions.file_get_contents_file_get_contents
		$next    = self::with_block( $current, $lines );
		if ( $next === $current || ( ! $exists && '' === $next ) ) {
			return true;
		}
		if ( '' === $next ) {
			wp_delete_file( $path );
			return is_file( $path ) ? new WP_Error( 'HTACCESS_NOT_WRITABLE', $path ) : true;
		}
		if ( ! wp_mkdir_p( dirname( $path ) ) || false === file_put_contents( $path, $next ) ) { // phpcs:ignore WordPress.WP.AlternativeFunctions.file_system_operations_file_put_contents
			return new WP_Error(
				'HTACCESS_NOT_WRITABLE',
				/* translators: %s: file path */
				sprintf( __( 'Could not write the rewrite rules to %s: the web server cannot write that file.', 'compresso' ), $path )
			);
		}
		return true;
	}

	/**
	 * @param string[] $formats Formats in any order.
	 * @return string[] The known ones, in preference order (AVIF first).
	 */
	private static function ordered( array $formats ) {
		return array_values( array_intersect( array_keys( self::FORMATS ), $formats ) );
	}
}
