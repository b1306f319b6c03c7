<?php
/**
 * Wires the plugin's functions to WordPress hooks, in one place.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

add_action( 'admin_menu', 'compresso_add_settings_page' );
add_action( 'admin_post_compresso_save_settings', 'compresso_handle_save_settings' );
add_action( 'admin_notices', 'compresso_setup_notice' );

// Uploads queue work and return; WP-Cron (kicked by a loopback request at shutdown) compresses.
// wp_generate_attachment_metadata, not wp_update_attachment_metadata: core calls the latter after every
// sub-size it makes, the former once, with 'create' or 'update'.
add_filter( 'wp_generate_attachment_metadata', array( 'Compresso_Optimizer', 'on_generate_metadata' ), 20, 3 );
add_action( Compresso_Optimizer::CRON_HOOK, array( 'Compresso_Optimizer', 'optimize' ) );
add_action( 'shutdown', array( 'Compresso_Optimizer', 'kick' ) );
