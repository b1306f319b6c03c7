<?php
/**
 * The plugin's client for a Compresso server's /api/v1, over the WordPress HTTP API.
 *
 * The tables below mirror the contract table of @compresso/schema (routes, options, result headers,
 * error codes); a drift test compares them with the contract's JSON export and the server's
 * openapi.json, so a change on the server that this client does not follow fails a test.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

/**
 * Calls a Compresso server. Every failure is a WP_Error whose code is the server's own error code
 * (INVALID_API_KEY, QUOTA_EXCEEDED, ...) or one of the client's codes (CONNECTION_ERROR, TIMEOUT, ...).
 */
class Compresso_Api_Client {

	/** Routes the plugin calls: name => [method, path]. */
	const ROUTES = array(
		'compress' => array( 'POST', '/api/v1/compress' ),
		'info'     => array( 'POST', '/api/v1/info' ),
		'usage'    => array( 'GET', '/api/v1/usage' ),
	);

	/** Form fields of /compress and their kinds (the contract's option table). */
	const OPTIONS = array(
		'quality'       => 'quality',
		'output_format' => 'format',
		'max_dimension' => 'integer',
		'strip_exif'    => 'boolean',
		'png_to_jpeg'   => 'boolean',
	);

	/** Output formats the server writes. */
	const OUTPUT_FORMATS = array( 'jpeg', 'png', 'webp', 'avif', 'gif' );

	/** Result fields => [response header, type, required]. */
	const RESULT_HEADERS = array(
		'input_size'         => array( 'X-Input-Size', 'integer', true ),
		'output_size'        => array( 'X-Output-Size', 'integer', true ),
		'savings_percent'    => array( 'X-Savings-Percent', 'number', true ),
		'width'              => array( 'X-Width', 'integer', true ),
		'height'             => array( 'X-Height', 'integer', true ),
		'input_width'        => array( 'X-Input-Width', 'integer', true ),
		'input_height'       => array( 'X-Input-Height', 'integer', true ),
		'input_format'       => array( 'X-Input-Format', 'string', true ),
		'output_format'      => array( 'X-Output-Format', 'string', true ),
		'quality'            => array( 'X-Quality', 'integer', true ),
		'auto_quality'       => array( 'X-Auto-Quality', 'boolean', true ),
		'optimized'          => array( 'X-Optimized', 'boolean', true ),
		'metadata_stripped'  => array( 'X-Metadata-Stripped', 'boolean', true ),
		'score'              => array( 'X-Score', 'number', false ),
		'chroma_subsampling' => array( 'X-Chroma-Subsampling', 'string', false ),
		'lossless'           => array( 'X-Lossless', 'boolean', false ),
		'near_lossless'      => array( 'X-Near-Lossless', 'boolean', false ),
		'effort'             => array( 'X-Effort', 'integer', false ),
		'auto_steps'         => array( 'X-Auto-Steps', 'integer', false ),
	);

	/** The server's error codes => HTTP status. */
	const ERROR_STATUS = array(
		'INVALID_OPTION'          => 400,
		'INVALID_REQUEST'         => 400,
		'MISSING_FILE'            => 400,
		'URL_NOT_ALLOWED'         => 400,
		'UNAUTHENTICATED'         => 401,
		'INVALID_API_KEY'         => 401,
		'PLAN_REQUIRED'           => 403,
		'FORBIDDEN'               => 403,
		'NOT_FOUND'               => 404,
		'METHOD_NOT_ALLOWED'      => 405,
		'REQUEST_TIMEOUT'         => 408,
		'CONFLICT'                => 409,
		'IDEMPOTENCY_KEY_IN_USE'  => 409,
		'FILE_TOO_LARGE'          => 413,
		'UNSUPPORTED_FORMAT'      => 415,
		'NOT_AN_IMAGE'            => 415,
		'EMPTY_FILE'              => 422,
		'CORRUPT_IMAGE'           => 422,
		'IMAGE_TOO_LARGE'         => 422,
		'TOO_MANY_FRAMES'         => 422,
		'PROCESSING_TIMEOUT'      => 422,
		'URL_FETCH_FAILED'        => 422,
		'IDEMPOTENCY_KEY_REUSED'  => 422,
		'CONTENT_POLICY_VIOLATION' => 422,
		'INSTRUCTION_NOT_UNDERSTOOD' => 422,
		'QUOTA_EXCEEDED'          => 429,
		'RATE_LIMITED'            => 429,
		'INTERNAL_ERROR'          => 500,
		'PROVIDER_NOT_CONFIGURED' => 501,
		'SERVICE_UNAVAILABLE'     => 503,
		'PROVIDER_ERROR'          => 502,
		'PROVIDER_RATE_LIMITED'   => 503,
		'PROVIDER_TIMEOUT'        => 504,
	);

	/** The clients' own codes, for failures that never reached an answer from the server. */
	const CLIENT_ERROR_CODES = array(
		'CONNECTION_ERROR',
		'TIMEOUT',
		'ABORTED',
		'MISSING_API_KEY',
		'INVALID_INPUT',
		'INVALID_RESPONSE',
		'MISSING_DEPENDENCY',
		'CLIENT_ERROR',
	);

	/** MIME types of the formats the plugin sends. */
	const MIME_TYPES = array(
		'jpeg' => 'image/jpeg',
		'png'  => 'image/png',
		'webp' => 'image/webp',
		'avif' => 'image/avif',
		'gif'  => 'image/gif',
	);

	/** @var string */
	private $base_url;
	/** @var string */
	private $api_key;
	/** @var int */
	private $timeout;

	/**
	 * @param string $base_url The server's URL, e.g. https://api.example.com (no /api/v1).
	 * @param string $api_key  The account's API key.
	 * @param int    $timeout  Seconds to wait for an answer. An AVIF encode of a large image can take
	 *                         tens of seconds on the server, so compress calls get a generous default.
	 */
	public function __construct( $base_url, $api_key, $timeout = 120 ) {
		$this->base_url = untrailingslashit( (string) $base_url );
		$this->api_key  = (string) $api_key;
		$this->timeout  = max( 1, (int) $timeout );
	}

	/**
	 * Today's usage of the account's quota (also how a key is checked).
	 *
	 * @return array|WP_Error The Usage body: plan, day, used, limit, remaining, resets_at, resets_in_seconds.
	 */
	public function usage() {
		$response = $this->request( 'usage', array(), min( $this->timeout, 15 ) );
		if ( is_wp_error( $response ) ) {
			return $response;
		}
		$body = json_decode( wp_remote_retrieve_body( $response ), true );
		if ( ! is_array( $body ) || ! isset( $body['plan'], $body['limit'], $body['remaining'] ) ) {
			return new WP_Error( 'INVALID_RESPONSE', __( 'The server answered /api/v1/usage with something that is not a usage report.', 'compresso' ) );
		}
		return $body;
	}

	/**
	 * Compresses one image.
	 *
	 * @param string $bytes    The image file's bytes.
	 * @param string $filename Its file name (the server reads the format from the bytes, the name is kept for logs).
	 * @param array  $options  Any of OPTIONS: quality (1-100 or 'auto'), output_format, max_dimension,
	 *                         strip_exif, png_to_jpeg.
	 * @return array|WP_Error  array( 'bytes' => string, 'result' => array of RESULT_HEADERS fields, 'quota' => array ).
	 */
	public function compress( $bytes, $filename, array $options = array() ) {
		return $this->image_call( 'compress', $bytes, $filename, $options );
	}

	/**
	 * What /compress would do, without the bytes (the result fields only).
	 *
	 * @return array|WP_Error
	 */
	public function info( $bytes, $filename, array $options = array() ) {
		return $this->image_call( 'info', $bytes, $filename, $options );
	}

	/**
	 * @return array|WP_Error
	 */
	private function image_call( $route, $bytes, $filename, array $options ) {
		if ( ! is_string( $bytes ) || '' === $bytes ) {
			return new WP_Error( 'INVALID_INPUT', __( 'There is no image to send: the file is empty or could not be read.', 'compresso' ) );
		}
		$fields = array();
		foreach ( $options as $name => $value ) {
			if ( ! isset( self::OPTIONS[ $name ] ) ) {
				return new WP_Error( 'INVALID_INPUT', sprintf( /* translators: %s: option name */ __( 'Unknown compress option "%s".', 'compresso' ), $name ) );
			}
			if ( null === $value ) {
				continue;
			}
			$fields[ $name ] = is_bool( $value ) ? ( $value ? 'true' : 'false' ) : (string) $value;
		}
		$boundary = 'compresso-' . wp_generate_password( 24, false );
		$body     = self::multipart_body( $boundary, $fields, 'file', $filename, self::mime_type_of( $filename ), $bytes );
		$response = $this->request(
			$route,
			array(
				'headers' => array( 'Content-Type' => 'multipart/form-data; boundary=' . $boundary ),
				'body'    => $body,
			),
			$this->timeout
		);
		if ( is_wp_error( $response ) ) {
			return $response;
		}
		$result = self::result_from_headers( $response );
		if ( is_wp_error( $result ) ) {
			return $result;
		}
		$out = array(
			'result' => $result,
			'quota'  => self::quota_from_headers( $response ),
		);
		if ( 'compress' === $route ) {
			$out['bytes'] = wp_remote_retrieve_body( $response );
			if ( strlen( $out['bytes'] ) !== $result['output_size'] ) {
				return new WP_Error( 'INVALID_RESPONSE', __( 'The compressed image is not the size the server announced (X-Output-Size): the answer was cut short.', 'compresso' ) );
			}
		}
		return $out;
	}

	/**
	 * A multipart/form-data body (RFC 7578): text fields first, then the file part. Field names and the
	 * file name are quoted with CR, LF and double quotes escaped as browsers do, so a file name cannot
	 * break out of its header.
	 *
	 * @return string
	 */
	public static function multipart_body( $boundary, array $fields, $file_field, $filename, $mime, $bytes ) {
		$escape = static function ( $text ) {
			return str_replace( array( "\r", "\n", '"' ), array( '%0D', '%0A', '%22' ), (string) $text );
		};
		$body   = '';
		foreach ( $fields as $name => $value ) {
			$body .= '--' . $boundary . "\r\n";
			$body .= 'Content-Disposition: form-data; name="' . $escape( $name ) . "\"\r\n\r\n";
			$body .= $value . "\r\n";
		}
		$body .= '--' . $boundary . "\r\n";
		$body .= 'Content-Disposition: form-data; name="' . $escape( $file_field ) . '"; filename="' . $escape( wp_basename( $filename ) ) . "\"\r\n";
		$body .= 'Content-Type: ' . $mime . "\r\n\r\n";
		$body .= $bytes . "\r\n";
		$body .= '--' . $boundary . "--\r\n";
		return $body;
	}

	/**
	 * @return string
	 */
	private static function mime_type_of( $filename ) {
		$ext = strtolower( pathinfo( (string) $filename, PATHINFO_EXTENSION ) );
		$map = array(
			'jpg'  => 'jpeg',
			'jpeg' => 'jpeg',
			'jpe'  => 'jpeg',
			'png'  => 'png',
			'webp' => 'webp',
			'avif' => 'avif',
			'gif'  => 'gif',
		);
		return isset( $map[ $ext ] ) ? self::MIME_TYPES[ $map[ $ext ] ] : 'application/octet-stream';
	}

	/**
	 * Sends one request and turns every failure into a WP_Error with the contract's code.
	 *
	 * wp_remote_request, not wp_safe_remote_request: a self-hosted server on a private address or on
	 * loopback is a normal set-up, and the URL comes from an administrator's setting, not from a visitor.
	 *
	 * @return array|WP_Error The HTTP response (a 2xx).
	 */
	private function request( $route, array $args, $timeout ) {
		if ( '' === $this->api_key ) {
			return new WP_Error( 'MISSING_API_KEY', __( 'No API key is set: add one under Settings → Compresso.', 'compresso' ) );
		}
		if ( ! preg_match( '#^https?://[^/\s]+#i', $this->base_url ) ) {
			return new WP_Error( 'INVALID_INPUT', __( 'The server URL is not an http(s) URL.', 'compresso' ) );
		}
		list( $method, $path ) = self::ROUTES[ $route ];
		$args                  = array_merge(
			array(
				'method'      => $method,
				'timeout'     => $timeout,
				'redirection' => 0,
				'user-agent'  => 'compresso-wordpress/' . ( defined( 'COMPRESSO_VERSION' ) ? COMPRESSO_VERSION : 'dev' ) . '; WordPress/' . get_bloginfo( 'version' ),
			),
			$args
		);
		$args['headers']       = array_merge(
			isset( $args['headers'] ) ? $args['headers'] : array(),
			array(
				'Authorization' => 'Bearer ' . $this->api_key,
				'Accept'        => 'application/json, image/*',
			)
		);
		$response              = wp_remote_request( $this->base_url . $path, $args );
		if ( is_wp_error( $response ) ) {
			$message = $response->get_error_message();
			// The transports (cURL, streams) report a timeout only in their message text.
			$code = preg_match( '/timed out|timeout/i', $message ) ? 'TIMEOUT' : 'CONNECTION_ERROR';
			return new WP_Error( $code, sprintf( /* translators: 1: server URL, 2: transport message */ __( 'No answer from the Compresso server at %1$s: %2$s', 'compresso' ), $this->base_url, $message ) );
		}
		$status = (int) wp_remote_retrieve_response_code( $response );
		if ( $status >= 200 && $status < 300 ) {
			return $response;
		}
		return self::error_from_response( $response, $status );
	}

	/**
	 * The server's error body {"error": {code, message, details?, request_id}} as a WP_Error with the
	 * same code; the status, details, request id and Retry-After go into its data.
	 *
	 * @return WP_Error
	 */
	private static function error_from_response( $response, $status ) {
		$body  = json_decode( wp_remote_retrieve_body( $response ), true );
		$error = is_array( $body ) && isset( $body['error'] ) && is_array( $body['error'] ) ? $body['error'] : null;
		$data  = array( 'status' => $status );
		$retry = wp_remote_retrieve_header( $response, 'retry-after' );
		if ( '' !== $retry ) {
			$data['retry_after'] = (int) $retry;
		}
		if ( null === $error || ! isset( $error['code'], $error['message'] ) || ! is_string( $error['code'] ) ) {
			return new WP_Error(
				'INVALID_RESPONSE',
				/* translators: %d: HTTP status */
				sprintf( __( 'The server answered HTTP %d without a Compresso error body: is the URL that of a Compresso server?', 'compresso' ), $status ),
				$data
			);
		}
		if ( isset( $error['details'] ) ) {
			$data['details'] = $error['details'];
		}
		if ( isset( $error['request_id'] ) ) {
			$data['request_id'] = $error['request_id'];
		}
		return new WP_Error( $error['code'], (string) $error['message'], $data );
	}

	/**
	 * The result fields from the response headers, typed; INVALID_RESPONSE when a required one is missing.
	 *
	 * @return array|WP_Error
	 */
	private static function result_from_headers( $response ) {
		$result = array();
		foreach ( self::RESULT_HEADERS as $field => $spec ) {
			list( $header, $type, $required ) = $spec;
			$raw                               = wp_remote_retrieve_header( $response, strtolower( $header ) );
			if ( is_array( $raw ) ) {
				$raw = end( $raw );
			}
			if ( '' === $raw || null === $raw ) {
				if ( $required ) {
					/* translators: %s: header name */
					return new WP_Error( 'INVALID_RESPONSE', sprintf( __( 'The server did not send the %s header.', 'compresso' ), $header ) );
				}
				continue;
			}
			if ( 'integer' === $type ) {
				$result[ $field ] = (int) $raw;
			} elseif ( 'number' === $type ) {
				$result[ $field ] = (float) $raw;
			} elseif ( 'boolean' === $type ) {
				$result[ $field ] = 'true' === strtolower( (string) $raw );
			} else {
				$result[ $field ] = (string) $raw;
			}
		}
		return $result;
	}

	/**
	 * @return array limit, remaining, reset_seconds (null when the server did not say).
	 */
	private static function quota_from_headers( $response ) {
		$read = static function ( $name ) use ( $response ) {
			$value = wp_remote_retrieve_header( $response, $name );
			return '' === $value ? null : (int) $value;
		};
		return array(
			'limit'         => $read( 'ratelimit-limit' ),
			'remaining'     => $read( 'ratelimit-remaining' ),
			'reset_seconds' => $read( 'ratelimit-reset' ),
		);
	}
}
