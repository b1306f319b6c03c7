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
require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-runner.php';
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
 * Takes a named lock (a row in the options table) for this request, or says it is held. The insert is
 * INSERT IGNORE, which the database decides alone: add_option() is no lock (it upserts, so two requests
 * can both "add"). A lock older than $timeout seconds was left by a request that died; one request
 * takes it over (the update names the old value, so only one can match).
 *
 * @param string $name    The lock's option name.
 * @param int    $timeout Seconds after which the lock is taken to be stale.
 * @return bool Whether this request holds it now.
 */
function compresso_lock( $name, $timeout ) {
	global $wpdb;
	$now = time();
	// phpcs:ignore WordPress.DB.DirectDatabaseQuery -- a lock must bypass the options cache.
	$inserted = $wpdb->query( $wpdb->prepare( "INSERT IGNORE INTO {$wpdb->options} (option_name, option_value, autoload) VALUES (%s, %s, 'no')", $name, (string) $now ) );
	compresso_forget_option( $name );
	if ( 1 === (int) $inserted ) {
		return true;
	}
	$held = compresso_lock_held_since( $name );
	if ( $held && $held > $now - $timeout ) {
		return false;
	}
	// phpcs:ignore WordPress.DB.DirectDatabaseQuery
	$taken = $wpdb->query( $wpdb->prepare( "UPDATE {$wpdb->options} SET option_value = %s WHERE option_name = %s AND option_value = %s", (string) $now, $name, (string) $held ) );
	return 1 === (int) $taken;
}

/**
 * @param string $name The lock's option name.
 * @return int Unix time the lock was taken, 0 when nobody holds it.
 */
function compresso_lock_held_since( $name ) {
	global $wpdb;
	// phpcs:ignore WordPress.DB.DirectDatabaseQuery
	return (int) $wpdb->get_var( $wpdb->prepare( "SELECT option_value FROM {$wpdb->options} WHERE option_name = %s", $name ) );
}

/**
 * @param string $name The lock's option name.
 */
function compresso_unlock( $name ) {
	global $wpdb;
	// phpcs:ignore WordPress.DB.DirectDatabaseQuery
	$wpdb->delete( $wpdb->options, array( 'option_name' => $name ) );
	compresso_forget_option( $name );
}

/**
 * Drops what this request's object cache remembers of an option written around the options API.
 */
function compresso_forget_option( $name ) {
	wp_cache_delete( $name, 'options' );
	$notoptions = wp_cache_get( 'notoptions', 'options' );
	if ( is_array( $notoptions ) && isset( $notoptions[ $name ] ) ) {
		unset( $notoptions[ $name ] );
		wp_cache_set( 'notoptions', $notoptions, 'options' );
	}
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
