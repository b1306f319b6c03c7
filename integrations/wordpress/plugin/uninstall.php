<?php
/**
 * Uninstall: removes the plugin's options. (Backups are kept unless the owner asked for their removal.)
 *
 * @package Compresso
 */

if ( ! defined( 'WP_UNINSTALL_PLUGIN' ) ) {
	exit;
}

delete_option( 'compresso_settings' );
delete_option( 'compresso_show_setup_notice' );
