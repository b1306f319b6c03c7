<?php
/**
 * Plugin Name:       Compresso
 * Plugin URI:        https://github.com/compresso/compresso
 * Description:       Compresses every image you upload through a Compresso server (hosted or your own), with WebP/AVIF delivery.
 * Version:           0.1.0
 * Requires at least: 6.2
 * Requires PHP:      7.4
 * Author:            Compresso
 * License:           GPL-2.0-or-later
 * License URI:       https://www.gnu.org/licenses/gpl-2.0.html
 * Text Domain:       compresso
 *
 * @package Compresso
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

define( 'COMPRESSO_VERSION', '0.1.0' );
define( 'COMPRESSO_PLUGIN_FILE', __FILE__ );
define( 'COMPRESSO_PLUGIN_DIR', plugin_dir_path( __FILE__ ) );

require_once COMPRESSO_PLUGIN_DIR . 'includes/load.php';

register_activation_hook( __FILE__, 'compresso_activate' );
register_deactivation_hook( __FILE__, 'compresso_deactivate' );
