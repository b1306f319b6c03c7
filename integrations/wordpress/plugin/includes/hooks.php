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
