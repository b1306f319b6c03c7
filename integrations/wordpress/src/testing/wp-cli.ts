import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { WordPress } from './wordpress.ts';

/**
 * A stand-in for WP-CLI (Playground has no `wp` binary): the `WP_CLI` class the plugin's commands
 * call (log, warning, success, error — which throws, as the real one exits), its progress bars, and
 * `compresso_test_cli( $command, $args, $assoc )`, which runs one `Compresso_Cli` command and returns
 * its exit status, its lines and its progress bars. Any other exception a command throws goes on up.
 */
const STAND_IN = `<?php
namespace WP_CLI\\Utils {
	function make_progress_bar( $label, $count ) {
		return new \\Compresso_Test_Progress( $label, $count );
	}
}
namespace {
	class Compresso_Test_Cli_Exit extends Exception {}
	class Compresso_Test_Progress {
		public static $bars = array();
		public $label; public $count; public $ticks = 0; public $finished = false;
		public function __construct( $label, $count ) { $this->label = $label; $this->count = $count; self::$bars[] = $this; }
		public function tick() { ++$this->ticks; }
		public function finish() { $this->finished = true; }
	}
	class WP_CLI {
		public static $lines = array();
		public static function log( $m ) { self::$lines[] = array( 'log', $m ); }
		public static function warning( $m ) { self::$lines[] = array( 'warning', $m ); }
		public static function success( $m ) { self::$lines[] = array( 'success', $m ); }
		public static function error( $m ) { self::$lines[] = array( 'error', $m ); throw new Compresso_Test_Cli_Exit( $m ); }
	}
	function compresso_test_cli( $command, $args = array(), $assoc = array() ) {
		WP_CLI::$lines = array();
		Compresso_Test_Progress::$bars = array();
		require_once COMPRESSO_PLUGIN_DIR . 'includes/class-compresso-cli.php';
		$exit = 0;
		try {
			( new Compresso_Cli() )->$command( $args, $assoc );
		} catch ( Compresso_Test_Cli_Exit $e ) {
			$exit = 1;
		}
		return array(
			'exit' => $exit,
			'lines' => WP_CLI::$lines,
			'bars' => array_map( function ( $b ) { return array( 'label' => $b->label, 'count' => $b->count, 'ticks' => $b->ticks, 'finished' => $b->finished ); }, Compresso_Test_Progress::$bars ),
		);
	}
}
`;

/** Writes the stand-in into the site and returns the path a PHP script `require_once`s it from. */
export function installWpCliStandIn(wp: WordPress): string {
  const vfsPath = '/wordpress/wp-content/compresso-test-wp-cli.php';
  const host = wp.hostPath(vfsPath);
  mkdirSync(dirname(host), { recursive: true });
  writeFileSync(host, STAND_IN);
  return vfsPath;
}
