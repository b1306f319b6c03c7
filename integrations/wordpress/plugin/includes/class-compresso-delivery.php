<?php
/**
 * Delivery of the WebP/AVIF siblings as <picture>: the <img> is kept exactly as the theme or block made
 * it (every class, style and attribute stays on it, so styling does not change) and wrapped with one
 * <source> per format whose srcset points at the siblings. Through the content filter and the
 * attachment-image filter; no output buffering of the whole page.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Wraps images that have siblings in <picture>.
 */
class Compresso_Delivery {

	/** Formats in the order browsers should try them. */
	const FORMATS = array(
		'avif' => 'image/avif',
		'webp' => 'image/webp',
	);

	/**
	 * wp_content_img_tag: images in post content.
	 *
	 * @param string $html          The <img> tag.
	 * @param string $context       Where it is (the_content, widget_block_content, ...).
	 * @param int    $attachment_id The attachment, 0 when unknown.
	 * @return string
	 */
	public static function filter_content_img( $html, $context, $attachment_id ) {
		return self::wrap( $html, 'content:' . $context );
	}

	/**
	 * wp_get_attachment_image: images themes print through the attachment functions.
	 *
	 * @param string $html The <img> tag.
	 * @return string
	 */
	public static function filter_attachment_image( $html ) {
		return self::wrap( $html, 'attachment' );
	}

	/**
	 * @param string $html    An <img> tag.
	 * @param string $context Where it is; passed to the compresso_picture_enabled filter so a page
	 *                        builder or a theme can turn <picture> off where it breaks its markup.
	 * @return string The tag, or <picture> with <source>s around it.
	 */
	public static function wrap( $html, $context ) {
		// Block themes filter the whole template again ('template') after the post content: an <img>
		// already wrapped in this request is left alone there, not wrapped a second time. Only there: the
		// same <img> twice in a post (or a filter run twice) is wrapped each time.
		static $wrapped = array();
		if ( 'content:template' === $context && isset( $wrapped[ $html ] ) ) {
			return $html;
		}
		$settings = compresso_get_settings();
		if ( ! self::picture_on( $settings, $context ) || ! apply_filters( 'compresso_picture_enabled', true, $context, $html ) ) {
			return $html;
		}
		$formats = array();
		foreach ( array_keys( self::FORMATS ) as $format ) {
			if ( ! empty( $settings[ $format ] ) ) {
				$formats[] = $format;
			}
		}
		$out = self::picture(
			$html,
			$formats,
			static function ( $url, $format ) {
				$path = self::path_of( $url );
				return null !== $path && is_file( $path . '.' . $format );
			}
		);
		if ( $out !== $html ) {
			$wrapped[ $html ] = true;
		}
		return $out;
	}

	/**
	 * Whether the settings deliver <picture> in a context: delivery is 'picture' (not 'rewrite' or
	 * 'off'), and the context's own switch is on (post content, or the attachment functions themes use).
	 *
	 * @param array  $settings The plugin's settings.
	 * @param string $context  'content:<core context>' or 'attachment'.
	 * @return bool
	 */
	public static function picture_on( array $settings, $context ) {
		if ( ( isset( $settings['delivery'] ) ? $settings['delivery'] : 'picture' ) !== 'picture' ) {
			return false;
		}
		if ( 0 === strpos( (string) $context, 'content:' ) ) {
			return ! isset( $settings['picture_content'] ) || ! empty( $settings['picture_content'] );
		}
		if ( 'attachment' === $context ) {
			return ! isset( $settings['picture_attachment'] ) || ! empty( $settings['picture_attachment'] );
		}
		return true;
	}

	/**
	 * The <picture> markup for an <img> tag (a pure function of its arguments).
	 *
	 * @param string   $html        An <img> tag.
	 * @param string[] $formats     The formats to offer ('avif', 'webp'); offered AVIF first.
	 * @param callable $has_sibling function( $url, $format ): bool, whether $url has a sibling file.
	 * @return string The tag unchanged, or <picture> with one <source> per format around it.
	 */
	public static function picture( $html, array $formats, callable $has_sibling ) {
		if ( ! preg_match( '/^<img\s/i', ltrim( $html ) ) ) {
			return $html;
		}
		$src    = self::attribute( $html, 'src' );
		$srcset = self::attribute( $html, 'srcset' );
		$sizes  = self::attribute( $html, 'sizes' );
		if ( '' === $src ) {
			return $html;
		}
		$candidates = '' !== $srcset ? array_map( 'trim', explode( ',', $srcset ) ) : array( $src );
		$sources    = '';
		foreach ( self::FORMATS as $format => $mime ) {
			if ( ! in_array( $format, $formats, true ) ) {
				continue;
			}
			$out  = array();
			$used = false;
			foreach ( $candidates as $candidate ) {
				$parts = preg_split( '/\s+/', $candidate, 2 );
				$url   = $parts[0];
				// A size whose sibling was not smaller keeps its own URL in the source: dropping it
				// would make the browser pick a larger sibling for that width.
				$has   = (bool) call_user_func( $has_sibling, $url, $format );
				$used  = $used || $has;
				$out[] = ( $has ? $url . '.' . $format : $url ) . ( isset( $parts[1] ) ? ' ' . $parts[1] : '' );
			}
			if ( ! $used ) {
				continue;
			}
			$sources .= sprintf(
				'<source type="%1$s" srcset="%2$s"%3$s>',
				esc_attr( $mime ),
				esc_attr( implode( ', ', $out ) ),
				'' !== $sizes ? ' sizes="' . esc_attr( $sizes ) . '"' : ''
			);
		}
		if ( '' === $sources ) {
			return $html;
		}
		return '<picture class="compresso-picture">' . $sources . $html . '</picture>';
	}

	/**
	 * @return string The attribute's decoded value, '' when absent.
	 */
	private static function attribute( $html, $name ) {
		if ( preg_match( '/\s' . preg_quote( $name, '/' ) . '\s*=\s*("([^"]*)"|\'([^\']*)\')/i', $html, $m ) ) {
			return html_entity_decode( isset( $m[3] ) && '' !== $m[3] ? $m[3] : $m[2], ENT_QUOTES );
		}
		return '';
	}

	/**
	 * @return string|null The file behind an uploads URL, null for any other URL.
	 */
	private static function path_of( $url ) {
		static $uploads = null;
		if ( null === $uploads ) {
			$uploads = wp_get_upload_dir();
		}
		$url  = preg_replace( '/[?#].*$/', '', $url );
		$base = set_url_scheme( trailingslashit( $uploads['baseurl'] ), 'http' );
		$url  = set_url_scheme( $url, 'http' );
		if ( 0 !== strpos( $url, $base ) ) {
			return null;
		}
		$relative = rawurldecode( substr( $url, strlen( $base ) ) );
		if ( false !== strpos( $relative, '..' ) ) {
			return null;
		}
		return trailingslashit( $uploads['basedir'] ) . $relative;
	}
}
