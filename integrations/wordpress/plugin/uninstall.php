<?php
/**
 * Uninstall: removes the plugin's options, its per-attachment records, its scheduled events and its
 * rewrite rules in the uploads folder's .htaccess. The
 * backups of originals are kept (they are the only copy of the originals): they are removed only when
 * the owner ticked "Delete the kept originals when the plugin is deleted" (setting
 * delete_backups_on_uninstall) or the site defines COMPRESSO_DELETE_BACKUPS_ON_UNINSTALL as true.
 *
 * @package Compresso
 */

if ( ! defined( 'WP_UNINSTALL_PLUGIN' ) ) {
	exit;
}

// Read before the settings are removed: the owner's "delete the kept originals" choice.
$compresso_settings       = get_option( 'compresso_settings', array() );
$compresso_delete_backups = ( is_array( $compresso_settings ) && ! empty( $compresso_settings['delete_backups_on_uninstall'] ) )
	|| ( defined( 'COMPRESSO_DELETE_BACKUPS_ON_UNINSTALL' ) && COMPRESSO_DELETE_BACKUPS_ON_UNINSTALL );

delete_option( 'compresso_settings' );
delete_option( 'compresso_show_setup_notice' );
delete_post_meta_by_key( '_compresso' );
delete_post_meta_by_key( '_compresso_pending' );
// Tries counted by a request that died working on an attachment (Compresso_Optimizer::attempt()).
delete_post_meta_by_key( '_compresso_attempts' );
wp_unschedule_hook( 'compresso_optimize_attachment' );
delete_option( 'compresso_delivery_report' );
// The rewrite rules in the uploads folder's .htaccess (the plugin is not loaded during uninstall).
require_once __DIR__ . '/includes/class-compresso-rewrite.php';
Compresso_Rewrite::remove();
delete_option( 'compresso_bulk' );
delete_option( 'compresso_bulk_lock' );
delete_option( 'compresso_runner_lock' );
delete_option( 'compresso_sweep_after' );
delete_option( 'compresso_sweep_lock' );
// Per-attachment marks left by a request that died mid-image.
global $wpdb;
$wpdb->query( $wpdb->prepare( "DELETE FROM {$wpdb->options} WHERE option_name LIKE %s", $wpdb->esc_like( 'compresso_optimizing_' ) . '%' ) ); // phpcs:ignore WordPress.DB.DirectDatabaseQuery
delete_option( 'compresso_bulk_retry' );
delete_option( 'compresso_quota' );
wp_unschedule_hook( 'compresso_bulk_tick' );

if ( $compresso_delete_backups ) {
	$compresso_backups = WP_CONTENT_DIR . '/compresso-backups';
	if ( is_dir( $compresso_backups ) ) {
		$compresso_items = new RecursiveIteratorIterator(
			new RecursiveDirectoryIterator( $compresso_backups, FilesystemIterator::SKIP_DOTS ),
			RecursiveIteratorIterator::CHILD_FIRST
		);
		foreach ( $compresso_items as $compresso_item ) {
			$compresso_item->isDir() ? rmdir( $compresso_item->getPathname() ) : wp_delete_file( $compresso_item->getPathname() ); // phpcs:ignore WordPress.WP.AlternativeFunctions.file_system_operations_rmdir
		}
		rmdir( $compresso_backups ); // phpcs:ignore WordPress.WP.AlternativeFunctions.file_system_operations_rmdir
	}
}
