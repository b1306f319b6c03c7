<?php
/**
 * PHPUnit bootstrap for the plugin's pure functions: the few WordPress functions they call, defined as
 * WordPress defines them (escaping, translation as identity, basename), and the plugin's classes
 * loaded without WordPress. Anything that needs a real WordPress is tested on Playground instead.
 *
 * @package Compresso
 */

define( 'ABSPATH', __DIR__ . '/' );

function __( $text, $domain = 'default' ) {
	return $text;
}

function esc_attr( $text ) {
	return htmlspecialchars( (string) $text, ENT_QUOTES, 'UTF-8' );
}

function wp_basename( $path, $suffix = '' ) {
	return urldecode( basename( str_replace( array( '%2F', '%5C' ), '/', urlencode( $path ) ), $suffix ) );
}

$compresso_plugin = dirname( __DIR__ ) . '/plugin/includes/';
require_once $compresso_plugin . 'class-compresso-api-client.php';
require_once $compresso_plugin . 'class-compresso-delivery.php';
require_once $compresso_plugin . 'class-compresso-rewrite.php';
require_once $compresso_plugin . 'class-compresso-self-test.php';
require_once $compresso_plugin . 'class-compresso-runner.php';
