<?php
/**
 * The REST namespace compresso/v1: the bulk optimizer (start, pause, resume, cancel, retry, status) and
 * the library's stats with the cost estimate. Cookie-authenticated requests need the `wp_rest` nonce
 * (X-WP-Nonce), as every WordPress REST route; reading needs `upload_files`, changing a run
 * `manage_options`.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

define( 'COMPRESSO_REST_NAMESPACE', 'compresso/v1' );

/**
 * @return bool|WP_Error
 */
function compresso_rest_can_read() {
	return current_user_can( 'upload_files' ) ? true : new WP_Error( 'rest_forbidden', __( 'You are not allowed to see the image optimization of this site.', 'compresso' ), array( 'status' => rest_authorization_required_code() ) );
}

/**
 * @return bool|WP_Error
 */
function compresso_rest_can_manage() {
	return current_user_can( 'manage_options' ) ? true : new WP_Error( 'rest_forbidden', __( 'Only an administrator can start, pause or cancel the bulk optimization.', 'compresso' ), array( 'status' => rest_authorization_required_code() ) );
}

/**
 * @param array|WP_Error $result What a Compresso_Bulk action returned.
 * @return WP_REST_Response|WP_Error
 */
function compresso_rest_answer( $result ) {
	return is_wp_error( $result ) ? $result : rest_ensure_response( $result );
}

/**
 * The rest_api_init action.
 */
function compresso_register_rest_routes() {
	$actions = array(
		'start'  => array( 'Compresso_Bulk', 'start' ),
		'pause'  => array( 'Compresso_Bulk', 'pause' ),
		'resume' => array( 'Compresso_Bulk', 'resume' ),
		'cancel' => array( 'Compresso_Bulk', 'cancel' ),
	);
	foreach ( $actions as $name => $callable ) {
		register_rest_route(
			COMPRESSO_REST_NAMESPACE,
			'/bulk/' . $name,
			array(
				'methods'             => WP_REST_Server::CREATABLE,
				'permission_callback' => 'compresso_rest_can_manage',
				'callback'            => static function () use ( $callable ) {
					return compresso_rest_answer( call_user_func( $callable ) );
				},
			)
		);
	}
	register_rest_route(
		COMPRESSO_REST_NAMESPACE,
		'/bulk/retry',
		array(
			'methods'             => WP_REST_Server::CREATABLE,
			'permission_callback' => 'compresso_rest_can_manage',
			'args'                => array(
				'ids' => array(
					'description' => __( 'Attachment IDs to try again; none for every image that failed.', 'compresso' ),
					'type'        => 'array',
					'items'       => array( 'type' => 'integer' ),
					'default'     => array(),
				),
			),
			'callback'            => static function ( WP_REST_Request $request ) {
				return compresso_rest_answer( Compresso_Bulk::retry( (array) $request['ids'] ) );
			},
		)
	);
	register_rest_route(
		COMPRESSO_REST_NAMESPACE,
		'/bulk',
		array(
			'methods'             => WP_REST_Server::READABLE,
			'permission_callback' => 'compresso_rest_can_read',
			'callback'            => static function () {
				return rest_ensure_response( Compresso_Bulk::status() );
			},
		)
	);
	register_rest_route(
		COMPRESSO_REST_NAMESPACE,
		'/stats',
		array(
			'methods'             => WP_REST_Server::READABLE,
			'permission_callback' => 'compresso_rest_can_read',
			'args'                => array(
				'refresh' => array(
					'description' => __( 'Ask the server for the quota first (costs one request of it).', 'compresso' ),
					'type'        => 'boolean',
					'default'     => false,
				),
			),
			'callback'            => static function ( WP_REST_Request $request ) {
				$quota = Compresso_Bulk::quota();
				if ( compresso_is_connected() && ( $request['refresh'] || null === $quota['limit'] || null === $quota['plan'] ) ) {
					$refreshed = Compresso_Bulk::refresh_quota();
					if ( is_wp_error( $refreshed ) && 'QUOTA_EXCEEDED' !== $refreshed->get_error_code() ) {
						return $refreshed;
					}
				}
				return rest_ensure_response( Compresso_Bulk::stats() );
			},
		)
	);
}
