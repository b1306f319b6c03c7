<?php
/**
 * The delivery self-test: after the settings are saved, the plugin asks its own site for one optimized
 * image through the public URL WordPress prints for it (so through any cache or CDN in front), as a
 * browser without WebP, one with WebP and one with AVIF would, and reports what each really received
 * (Content-Type, Vary, the cache's own headers). When rewrite delivery is not honoured (the rules are
 * not in effect, Vary: Accept is missing, or a cache in front serves one format to every browser) it
 * switches delivery to <picture>, which works through any cache, and says why.
 *
 * plan() and verdict() are pure functions (unit-tested with PHPUnit); run() does the requests.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Checks what browsers receive.
 */
class Compresso_Self_Test {

	/** The last report (shown on the settings screen). */
	const OPTION = 'compresso_delivery_report';

	/** The Accept header of a browser that takes neither WebP nor AVIF (Firefox before 65). */
	const ACCEPT_LEGACY = 'image/png,image/*;q=0.8,*/*;q=0.5';
	/** A browser that takes WebP but not AVIF (Chrome before 85). */
	const ACCEPT_WEBP = 'image/webp,image/apng,image/*,*/*;q=0.8';
	/** A browser that takes AVIF and WebP (Chrome today). */
	const ACCEPT_AVIF = 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8';

	/** The query parameter that makes a URL no cache has seen (to ask the origin itself). */
	const BYPASS_PARAM = 'compresso-self-test';

	/** Response headers that tell a cache's part (shown in the report). */
	const CACHE_HEADERS = array( 'x-cache', 'x-cache-status', 'cf-cache-status', 'x-proxy-cache', 'age', 'via' );

	/**
	 * The requests to make, in order. In rewrite mode the browser without WebP goes first and again
	 * last: a cache that keeps one copy per URL then hands the JPEG to the WebP browser or the WebP
	 * file to the old browser, whichever came first. The last request carries a query string no
	 * cache has seen, so it shows what the origin server itself answers.
	 *
	 * @param string   $mode          'picture' or 'rewrite'.
	 * @param string   $url           The image's public URL.
	 * @param string   $original_type Its MIME type (image/jpeg, image/png, image/gif).
	 * @param string[] $siblings      The formats that have a sibling file ('avif', 'webp').
	 * @param string   $nonce         A random token for the cache-bypassing URL.
	 * @return array[] Each: key, label, url, accept, expected (a MIME type).
	 */
	public static function plan( $mode, $url, $original_type, array $siblings, $nonce = '' ) {
		$checks = array();
		$add    = static function ( $key, $label, $check_url, $accept, $expected ) use ( &$checks ) {
			$checks[] = array(
				'key'      => $key,
				'label'    => $label,
				'url'      => $check_url,
				'accept'   => $accept,
				'expected' => $expected,
			);
		};
		$has_webp = in_array( 'webp', $siblings, true );
		$has_avif = in_array( 'avif', $siblings, true );
		if ( 'picture' === $mode ) {
			$add( 'original', 'The original (browsers without WebP/AVIF)', $url, self::ACCEPT_LEGACY, $original_type );
			if ( $has_avif ) {
				$add( 'sibling_avif', 'The AVIF copy (<source type="image/avif">)', $url . '.avif', self::ACCEPT_AVIF, 'image/avif' );
			}
			if ( $has_webp ) {
				$add( 'sibling_webp', 'The WebP copy (<source type="image/webp">)', $url . '.webp', self::ACCEPT_WEBP, 'image/webp' );
			}
			return $checks;
		}
		$for_webp = $has_webp ? 'image/webp' : $original_type;
		$for_avif = $has_avif ? 'image/avif' : $for_webp;
		$add( 'legacy', 'A browser without WebP or AVIF', $url, self::ACCEPT_LEGACY, $original_type );
		if ( $has_webp ) {
			$add( 'webp', 'A browser that takes WebP', $url, self::ACCEPT_WEBP, $for_webp );
		}
		$add( 'avif', 'A browser that takes AVIF and WebP', $url, self::ACCEPT_AVIF, $for_avif );
		$add( 'legacy_again', 'A browser without WebP or AVIF, after the others', $url, self::ACCEPT_LEGACY, $original_type );
		$bypass = $url . ( false === strpos( $url, '?' ) ? '?' : '&' ) . self::BYPASS_PARAM . '=' . rawurlencode( '' === $nonce ? 'x' : $nonce );
		$add( 'origin', 'The origin server itself (a URL no cache has seen), as a browser that takes AVIF and WebP', $bypass, self::ACCEPT_AVIF, $for_avif );
		return $checks;
	}

	/**
	 * The verdict on what was received.
	 *
	 * @param string  $mode    'picture' or 'rewrite'.
	 * @param array[] $results plan()'s checks, each with what was received: status (int, 0 when the
	 *                         request failed), type (MIME type, lower case, no parameters), vary,
	 *                         cache (the cache headers, '' when none), error ('' or the failure).
	 * @return array verdict (a stable code), ok (bool), switch (bool: rewrite delivery should give way
	 *               to <picture>), failed (the keys of the checks that did not get what they expected).
	 */
	public static function verdict( $mode, array $results ) {
		$failed = array();
		foreach ( $results as $result ) {
			if ( ! empty( $result['error'] ) || 200 !== (int) $result['status'] ) {
				return self::outcome( 'unreachable', false, false, array( $result['key'] ) );
			}
			if ( $result['type'] !== $result['expected'] ) {
				$failed[] = $result['key'];
			}
		}
		if ( 'picture' === $mode ) {
			return self::outcome( $failed ? 'picture_wrong_type' : 'picture_ok', ! $failed, false, $failed );
		}
		$by_key = array();
		foreach ( $results as $result ) {
			$by_key[ $result['key'] ] = $result;
		}
		$origin = isset( $by_key['origin'] ) ? $by_key['origin'] : null;
		$legacy = isset( $by_key['legacy'] ) ? $by_key['legacy'] : null;
		if ( null === $origin || null === $legacy ) {
			return self::outcome( 'rewrite_not_active', false, true, $failed );
		}
		// The origin answers a browser that takes modern formats with the original: no rule applied.
		if ( $origin['type'] === $legacy['expected'] && $origin['expected'] !== $legacy['expected'] ) {
			return self::outcome( 'rewrite_not_active', false, true, $failed );
		}
		if ( $failed ) {
			// The origin chooses right, yet a browser got the other format: something between them keeps
			// one copy per URL.
			$code = in_array( 'origin', $failed, true ) ? 'rewrite_wrong_type' : 'cache_ignores_vary';
			return self::outcome( $code, false, true, $failed );
		}
		foreach ( $results as $result ) {
			if ( ! self::varies_on_accept( $result['vary'] ) ) {
				return self::outcome( 'vary_missing', false, true, array( $result['key'] ) );
			}
		}
		return self::outcome( 'rewrite_ok', true, false, array() );
	}

	/**
	 * @param string $vary A Vary header value.
	 * @return bool Whether it names Accept (or *).
	 */
	public static function varies_on_accept( $vary ) {
		foreach ( explode( ',', strtolower( (string) $vary ) ) as $name ) {
			if ( in_array( trim( $name ), array( 'accept', '*' ), true ) ) {
				return true;
			}
		}
		return false;
	}

	/**
	 * What the report tells the site owner for a verdict.
	 *
	 * @param string $verdict  A verdict code.
	 * @param bool   $switched Whether delivery was switched to <picture>.
	 * @return string
	 */
	public static function message( $verdict, $switched ) {
		$switch = $switched ? ' ' . __( 'Compresso has switched delivery to <picture>, which works through any cache; choose rewrite delivery again once this is fixed.', 'compresso' ) : '';
		switch ( $verdict ) {
			case 'picture_ok':
				return __( 'Delivery check passed: pages use <picture>, and the site serves the WebP/AVIF copies with their own type and the original as it was.', 'compresso' );
			case 'picture_wrong_type':
				return __( 'Delivery check: a copy is not served with its image type (see the table). Most browsers still show it, but the server should send image/webp and image/avif for .webp and .avif files.', 'compresso' );
			case 'rewrite_ok':
				return __( 'Delivery check passed: each browser receives the format it takes at the same address, and every answer carries "Vary: Accept" so caches keep one copy per format.', 'compresso' );
			case 'rewrite_not_active':
				return __( 'Delivery check failed: the server sends the original even to browsers that take WebP/AVIF, so the rewrite rules are not in effect. On nginx, add the snippet below to the server configuration; on Apache, mod_rewrite and AllowOverride must be enabled.', 'compresso' ) . $switch;
			case 'cache_ignores_vary':
				return __( 'Delivery check failed: your server chooses the right format, but a cache or CDN in front of it gave a browser the format another browser asked for earlier. It keeps one copy per address and ignores "Vary: Accept" (most CDN plans do), so some visitors would get images their browser cannot show.', 'compresso' ) . $switch;
			case 'rewrite_wrong_type':
				return __( 'Delivery check failed: the server does not answer with the format expected for each browser (see the table).', 'compresso' ) . $switch;
			case 'vary_missing':
				return __( 'Delivery check failed: the format is chosen per browser but the answer lacks "Vary: Accept", so any cache on the way would hand one format to every browser.', 'compresso' ) . $switch;
			case 'unreachable':
				return __( 'Delivery check could not load the image through the site\'s public address (see the table). Some hosts block a site from requesting itself; <picture> delivery works without this check.', 'compresso' );
			case 'no_sample':
				return __( 'Delivery check: no optimized image with a WebP/AVIF copy yet. Upload an image, then save the settings again to check what browsers receive.', 'compresso' );
			case 'no_formats':
				return __( 'Delivery check: neither WebP nor AVIF copies are being made, so there is nothing to deliver.', 'compresso' );
			case 'off':
				return __( 'Delivery is off: pages keep the original images; WebP/AVIF copies are made but not served.', 'compresso' );
		}
		return (string) $verdict;
	}

	/**
	 * An image to test with: the newest attachment whose file has a sibling in a format being made.
	 *
	 * @param string[] $formats The formats being made.
	 * @return array|null id, url, path, type, siblings.
	 */
	public static function sample( array $formats ) {
		$ids = get_posts(
			array(
				'post_type'      => 'attachment',
				'post_status'    => 'inherit',
				'post_mime_type' => array( 'image/jpeg', 'image/png', 'image/gif' ),
				'posts_per_page' => 50,
				'orderby'        => 'ID',
				'order'          => 'DESC',
				'fields'         => 'ids',
			)
		);
		$best = null;
		foreach ( $ids as $id ) {
			$path = get_attached_file( $id );
			if ( ! $path || ! is_file( $path ) ) {
				continue;
			}
			$siblings = array();
			foreach ( $formats as $format ) {
				if ( is_file( $path . '.' . $format ) ) {
					$siblings[] = $format;
				}
			}
			if ( ! $siblings ) {
				continue;
			}
			$candidate = array(
				'id'       => (int) $id,
				'url'      => wp_get_attachment_url( $id ),
				'path'     => $path,
				'type'     => get_post_mime_type( $id ),
				'siblings' => $siblings,
			);
			if ( count( $siblings ) === count( $formats ) ) {
				$best = $candidate;
				break;
			}
			if ( null === $best ) {
				$best = $candidate;
			}
		}
		return apply_filters( 'compresso_self_test_sample', $best, $formats );
	}

	/**
	 * One request as a browser would make it.
	 *
	 * @param string $url    The URL.
	 * @param string $accept The Accept header.
	 * @return array status, type, vary, cache, error.
	 */
	public static function probe( $url, $accept ) {
		$response = wp_remote_get(
			$url,
			array(
				'timeout'     => 20,
				'redirection' => 3,
				'headers'     => array(
					'Accept'        => $accept,
					'User-Agent'    => 'Compresso delivery self-test (WordPress; +' . home_url( '/' ) . ')',
					'Cache-Control' => 'no-transform',
				),
			)
		);
		if ( is_wp_error( $response ) ) {
			return array(
				'status' => 0,
				'type'   => '',
				'vary'   => '',
				'cache'  => '',
				'error'  => $response->get_error_code() . ': ' . $response->get_error_message(),
			);
		}
		$type  = strtolower( trim( explode( ';', (string) wp_remote_retrieve_header( $response, 'content-type' ) )[0] ) );
		$cache = array();
		foreach ( self::CACHE_HEADERS as $name ) {
			$value = wp_remote_retrieve_header( $response, $name );
			if ( is_array( $value ) ) {
				$value = implode( ', ', $value );
			}
			if ( '' !== (string) $value ) {
				$cache[] = $name . ': ' . $value;
			}
		}
		$vary = wp_remote_retrieve_header( $response, 'vary' );
		return array(
			'status' => (int) wp_remote_retrieve_response_code( $response ),
			'type'   => $type,
			'vary'   => is_array( $vary ) ? implode( ', ', $vary ) : (string) $vary,
			'cache'  => implode( '; ', $cache ),
			'error'  => '',
		);
	}

	/**
	 * Runs the test for the settings and returns the report (not stored, nothing switched).
	 *
	 * @param array $settings The plugin's settings.
	 * @return array time, mode, url, verdict, ok, switch, failed, checks.
	 */
	public static function run( array $settings ) {
		$mode    = isset( $settings['delivery'] ) ? $settings['delivery'] : 'picture';
		$formats = Compresso_Rewrite::formats_of( $settings );
		$report  = array(
			'time'     => time(),
			'mode'     => $mode,
			'url'      => '',
			'verdict'  => 'off',
			'ok'       => null,
			'switch'   => false,
			'switched' => false,
			'failed'   => array(),
			'checks'   => array(),
		);
		if ( 'off' === $mode ) {
			return $report;
		}
		if ( ! $formats ) {
			$report['verdict'] = 'no_formats';
			return $report;
		}
		$sample = self::sample( $formats );
		if ( null === $sample ) {
			$report['verdict'] = 'no_sample';
			return $report;
		}
		$report['url'] = $sample['url'];
		$checks        = self::plan( $mode, $sample['url'], $sample['type'], $sample['siblings'], wp_generate_password( 12, false ) );
		foreach ( $checks as $i => $check ) {
			$checks[ $i ] = array_merge( $check, self::probe( $check['url'], $check['accept'] ) );
			if ( '' !== $checks[ $i ]['error'] ) {
				// A site that cannot reach itself would make the save wait for every timeout.
				$checks = array_slice( $checks, 0, $i + 1 );
				break;
			}
		}
		$verdict           = self::verdict( $mode, $checks );
		$report['checks']  = $checks;
		$report['verdict'] = $verdict['verdict'];
		$report['ok']      = $verdict['ok'];
		$report['switch']  = $verdict['switch'];
		$report['failed']  = $verdict['failed'];
		return $report;
	}

	/**
	 * After the settings are saved (the compresso_settings_saved_messages filter): writes or removes the
	 * Apache rules, runs the test, switches rewrite delivery that is not honoured to <picture>, stores
	 * the report and adds its message to the screen's notices.
	 *
	 * @param array $messages The save's notices, each array( type, text ).
	 * @param array $settings The settings just stored.
	 * @return array The notices.
	 */
	public static function after_save( $messages, $settings ) {
		$written = Compresso_Rewrite::sync( $settings );
		if ( is_wp_error( $written ) ) {
			$messages[] = array( 'error', $written->get_error_message() );
		}
		$report = self::run( $settings );
		if ( $report['switch'] && apply_filters( 'compresso_self_test_switch_to_picture', true, $report ) ) {
			$settings['delivery'] = 'picture';
			update_option( COMPRESSO_OPTION, $settings, false );
			Compresso_Rewrite::remove();
			$report['switched'] = true;
		}
		$report['message'] = self::message( $report['verdict'], $report['switched'] );
		update_option( self::OPTION, $report, false );
		$type       = true === $report['ok'] ? 'success' : ( false === $report['ok'] ? 'warning' : 'info' );
		$messages[] = array( $type, $report['message'] );
		return $messages;
	}

	/**
	 * @return array
	 */
	private static function outcome( $verdict, $ok, $switch, array $failed ) {
		return array(
			'verdict' => $verdict,
			'ok'      => $ok,
			'switch'  => $switch,
			'failed'  => $failed,
		);
	}
}
