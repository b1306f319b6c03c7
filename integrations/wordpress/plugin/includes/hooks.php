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

// Uploads queue work (a WP-Cron event) and return; the plugin's runner (a signed loopback request to
// admin-ajax.php started at shutdown) runs it at once, WP-Cron runs it when loopbacks are blocked.
// wp_generate_attachment_metadata, not wp_update_attachment_metadata: core calls the latter after every
// sub-size it makes, the former once, with 'create' or 'update'.
add_filter( 'wp_generate_attachment_metadata', array( 'Compresso_Optimizer', 'on_generate_metadata' ), 20, 3 );
add_action( Compresso_Optimizer::CRON_HOOK, array( 'Compresso_Optimizer', 'run_scheduled' ) );
// An upload's event another request's write of the schedule dropped is put back (once a minute at most).
add_action( 'shutdown', array( 'Compresso_Optimizer', 'maybe_sweep' ), 5 );
add_action( 'shutdown', array( 'Compresso_Optimizer', 'kick' ) );
add_action( 'wp_ajax_' . Compresso_Runner::ACTION, array( 'Compresso_Runner', 'handle' ) );
add_action( 'wp_ajax_nopriv_' . Compresso_Runner::ACTION, array( 'Compresso_Runner', 'handle' ) );
add_action( 'shutdown', array( 'Compresso_Runner', 'maybe_start' ) );

// Delivery: <picture> around images that have WebP/AVIF siblings, in content and through the
// attachment functions (a filter per context, compresso_picture_enabled, turns it off for builders).
add_filter( 'wp_content_img_tag', array( 'Compresso_Delivery', 'filter_content_img' ), 20, 3 );
add_filter( 'wp_get_attachment_image', array( 'Compresso_Delivery', 'filter_attachment_image' ), 20, 1 );

// An image saved from the WordPress image editor (a new `-e123…` main file) is compressed again, once.
add_filter( 'wp_update_attachment_metadata', array( 'Compresso_Optimizer', 'on_update_metadata' ), 20, 2 );

// Lazy loading: only what core leaves out (images without a size, widgets core does not filter,
// attachment images added after core's content filter); before the <picture> wrap (priority 20).
add_filter( 'wp_content_img_tag', array( 'Compresso_Lazy', 'filter_content_img' ), 15, 3 );
add_filter( 'widget_custom_html_content', array( 'Compresso_Lazy', 'filter_widget' ), 20 );
add_filter( 'widget_text', array( 'Compresso_Lazy', 'filter_widget' ), 20 );
add_filter( 'wp_get_loading_optimization_attributes', array( 'Compresso_Lazy', 'filter_loading_attributes' ), 20, 4 );

// Media library: the Compresso column, row actions, attachment details, and their admin-post actions.
add_filter( 'manage_media_columns', array( 'Compresso_Media', 'add_column' ) );
add_action( 'manage_media_custom_column', array( 'Compresso_Media', 'render_column' ), 10, 2 );
add_filter( 'media_row_actions', array( 'Compresso_Media', 'row_actions' ), 10, 2 );
add_filter( 'attachment_fields_to_edit', array( 'Compresso_Media', 'attachment_fields' ), 20, 2 );
add_action( 'admin_post_compresso_compress', array( 'Compresso_Media', 'handle_compress' ) );
add_action( 'admin_post_compresso_restore', array( 'Compresso_Media', 'handle_restore' ) );
add_action( 'admin_notices', array( 'Compresso_Media', 'result_notice' ) );

// After the settings are saved: the Apache rewrite rules written or removed, then the delivery self-test
// (what browsers really receive through the site's public URL), switching to <picture> when needed.
add_filter( 'compresso_settings_saved_messages', array( 'Compresso_Self_Test', 'after_save' ), 10, 2 );
// The bulk optimizer: a durable run processed by WP-Cron ticks that chain through a loopback request;
// the compresso/v1 REST namespace and Media → Compresso bulk drive it; every API answer's RateLimit-*
// headers keep the quota shown there current.
add_action( Compresso_Bulk::CRON_HOOK, array( 'Compresso_Bulk', 'tick' ), 10, 0 );
add_action( 'shutdown', array( 'Compresso_Bulk', 'kick' ) );
add_action( 'http_api_debug', array( 'Compresso_Bulk', 'observe_response' ), 10, 5 );
add_action( 'rest_api_init', 'compresso_register_rest_routes' );
add_action( 'admin_menu', 'compresso_add_bulk_page' );
add_action( 'admin_enqueue_scripts', 'compresso_enqueue_bulk_page' );
if ( defined( 'WP_CLI' ) && WP_CLI ) {
	WP_CLI::add_command( 'compresso', 'Compresso_Cli' );
}
