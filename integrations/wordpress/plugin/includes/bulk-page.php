<?php
/**
 * Media → Compresso bulk: the admin screen of the bulk optimizer. The screen itself is a React app
 * (build/bulk.js, built from src/bulk.js with @wordpress/scripts) talking to the compresso/v1 REST
 * namespace through @wordpress/api-fetch, which sends the REST nonce core gives it.
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

define( 'COMPRESSO_BULK_PAGE', 'compresso-bulk' );

/**
 * Adds Media → Compresso bulk (for users who may upload; starting a run needs manage_options).
 */
function compresso_add_bulk_page() {
	add_media_page(
		__( 'Compresso bulk optimization', 'compresso' ),
		__( 'Compresso bulk', 'compresso' ),
		'upload_files',
		COMPRESSO_BULK_PAGE,
		'compresso_render_bulk_page'
	);
}

/**
 * The admin_enqueue_scripts action: the screen's script and styles, on that screen only.
 *
 * @param string $hook_suffix The screen.
 */
function compresso_enqueue_bulk_page( $hook_suffix ) {
	if ( 'media_page_' . COMPRESSO_BULK_PAGE !== $hook_suffix ) {
		return;
	}
	$asset_file = COMPRESSO_PLUGIN_DIR . 'build/bulk.asset.php';
	if ( ! is_file( $asset_file ) ) {
		return;
	}
	$asset = require $asset_file;
	wp_enqueue_script( 'compresso-bulk', plugins_url( 'build/bulk.js', COMPRESSO_PLUGIN_FILE ), $asset['dependencies'], $asset['version'], true );
	wp_set_script_translations( 'compresso-bulk', 'compresso' );
	wp_enqueue_style( 'wp-components' );
	wp_add_inline_script(
		'compresso-bulk',
		'window.compressoBulk = ' . wp_json_encode(
			array(
				'canManage'   => current_user_can( 'manage_options' ),
				'connected'   => compresso_is_connected(),
				'settingsUrl' => admin_url( 'options-general.php?page=' . COMPRESSO_SETTINGS_PAGE ),
			)
		) . ';',
		'before'
	);
}

/**
 * The screen: a container the script fills, and what to do when the script did not load.
 */
function compresso_render_bulk_page() {
	if ( ! current_user_can( 'upload_files' ) ) {
		return;
	}
	?>
	<div class="wrap">
		<h1><?php esc_html_e( 'Compresso bulk optimization', 'compresso' ); ?></h1>
		<p><?php esc_html_e( 'Optimizes every image already in your media library, in the background: you can close this page, the run goes on. Images already optimized are skipped and cost nothing.', 'compresso' ); ?></p>
		<div id="compresso-bulk-root">
			<?php if ( ! is_file( COMPRESSO_PLUGIN_DIR . 'build/bulk.js' ) ) : ?>
				<div class="notice notice-error inline"><p><?php esc_html_e( 'This copy of the plugin is missing its built screen (build/bulk.js). Install the plugin from its compresso.zip, or run npm run build in its package.', 'compresso' ); ?></p></div>
			<?php else : ?>
				<noscript><?php esc_html_e( 'This screen needs JavaScript.', 'compresso' ); ?></noscript>
			<?php endif; ?>
		</div>
	</div>
	<?php
}
