<?php
/**
 * Loads the plugin's files, each one role: the API client, settings, the queue, backups, the optimizer,
 * delivery, and the hooks that wire them to WordPress.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-api-client.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-backups.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-optimizer.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-delivery.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-png-to-jpeg.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-lazy.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-media.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-rewrite.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-self-test.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/settings.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/settings-delivery.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-bulk.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/rest-api.php';
require_once COMPRESSO_PLUGIN_DIR . 'includes/bulk-page.php';
if ( defined( 'WP_CLI' ) && WP_CLI ) {
	require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-cli.php';
}
require_once COMPRESSO_PLUGIN_DIR . 'includes/hooks.php';

/**
 * A client for the server and key in the settings.
 *
 * @return Compresso_Api_Client
 */
function compresso_api_client() {
	return new Compresso_Api_Client( compresso_get_setting( 'server_url' ), compresso_get_api_key() );
}

/**
 * @return bool Whether a server URL and key are saved (they are saved only after a live check passed).
 */
function compresso_is_connected() {
	return '' !== (string) compresso_get_setting( 'server_url' ) && '' !== compresso_get_api_key();
}

/**
 * On activation: default settings, and a flag that shows the notice leading to the settings screen.
 */
function compresso_activate() {
	if ( false === get_option( COMPRESSO_OPTION ) ) {
		add_option( COMPRESSO_OPTION, compresso_default_settings(), '', false );
	}
	update_option( 'compresso_show_setup_notice', 1, false );
}

/**
 * On deactivation: nothing scheduled and no rewrite rule is left behind. Settings stay (uninstall removes them).
 */
function compresso_deactivate() {
	wp_unschedule_hook( Compresso_Optimizer::CRON_HOOK );
	// Rewrite rules would point browsers at copies nothing keeps up to date any more.
	Compresso_Rewrite::remove();
	wp_unschedule_hook( Compresso_Bulk::CRON_HOOK );
}
