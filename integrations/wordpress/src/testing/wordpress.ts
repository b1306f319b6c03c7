/**
 * A real WordPress for the plugin's tests, booted offline on WordPress Playground (PHP compiled to
 * WebAssembly, SQLite instead of MySQL), with the plugin mounted from this checkout. One per test file:
 * a boot costs tens of seconds on a shared 2-core machine, so a file boots once and its tests share it.
 *
 * `--wp=latest` would ask the internet for a WordPress zip; the builds package bundles them, so one is
 * unzipped into a temporary tree and Playground installs from those files. The tree is fresh per boot:
 * installation writes wp-config.php and the SQLite database into it.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as playgroundCli from '@wp-playground/cli';
import { unzipSync } from 'fflate';
import { fixPhpWasmFlock } from './php-wasm-flock.ts';

// The CLI's declarations re-export './run-cli' without an extension, which `nodenext` resolution cannot
// follow; this is the part of its documented programmatic API (runCLI) the harness uses.
interface RunCLIServer {
  serverUrl: string;
  playground: {
    run(request: { code: string }): Promise<{ text: string; errors: string; exitCode: number }>;
  };
  [Symbol.asyncDispose](): Promise<void>;
}
const runCLI = (playgroundCli as unknown as { runCLI(args: Record<string, unknown>): Promise<RunCLIServer> })
  .runCLI;

/** The WordPress build the tests run on (the newest stable one the builds package bundles). */
export const WORDPRESS_BUILD = '6.5';
/** The PHP the tests run on. */
export const PHP_VERSION = '8.3';
export const PLUGIN_SLUG = 'compresso';
export const PLUGIN_FILE = 'compresso/compresso.php';

const here = dirname(fileURLToPath(import.meta.url));
/** The plugin's own tree (what the zip ships). */
export const PLUGIN_DIR = join(here, '..', '..', 'plugin');

export interface PhpResult<T> {
  /** The value the script passed to compresso_test_out() (JSON-decoded). */
  value: T;
  /** Everything the script printed besides that value (notices, warnings). */
  output: string;
}

export interface WordPress {
  /** The site's URL on loopback (Playground's own HTTP server). */
  url: string;
  /** The absolute path of the WordPress tree on this machine (uploads land under wp-content/uploads). */
  root: string;
  /** The path on this machine of a path inside WordPress (/wordpress/...). */
  hostPath(vfsPath: string): string;
  /** Milliseconds the boot took (unzip + install + first request ready). */
  bootMs: number;
  /**
   * Runs PHP inside the booted WordPress (wp-load.php already required, as an admin user when
   * `asAdmin`). The script hands its result back with `compresso_test_out($value)`; a PHP fatal
   * error or a missing result throws with the script's output.
   */
  php<T = unknown>(code: string, options?: { asAdmin?: boolean }): Promise<PhpResult<T>>;
  close(): Promise<void>;
}

const OUT_MARK = '@@compresso-test-out@@';

/**
 * PHP that adds a file to the media library as an upload does (media_handle_sideload(): the attachment,
 * its generated sizes, the wp_generate_attachment_metadata filter the plugin queues on) and leaves its
 * ID in `$id`; the script fails with WordPress's message when it is refused. `source` is a path inside
 * the site (a mount), `name` the file name the upload gets.
 */
export function sideloadPhp(source: string, name: string): string {
  return `require_once ABSPATH . 'wp-admin/includes/image.php';
    require_once ABSPATH . 'wp-admin/includes/file.php';
    require_once ABSPATH . 'wp-admin/includes/media.php';
    $tmp = wp_tempnam( '${name}' );
    copy( '${source}', $tmp );
    $id = media_handle_sideload( array( 'name' => '${name}', 'tmp_name' => $tmp ), 0 );
    if ( is_wp_error( $id ) ) { throw new Exception( 'upload of ${name}: ' . $id->get_error_message() ); }`;
}

function unzipTo(zipPath: string, target: string): void {
  const files = unzipSync(new Uint8Array(readFileSync(zipPath)));
  for (const [name, data] of Object.entries(files)) {
    const path = join(target, name);
    if (name.endsWith('/')) {
      mkdirSync(path, { recursive: true });
      continue;
    }
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, data);
  }
}

function buildZip(version: string): string {
  // The package has no exports map for its zips: resolve its package.json and walk from there.
  const require = createRequire(import.meta.url);
  const pkg = require.resolve('@wp-playground/wordpress-builds/package.json');
  return join(dirname(pkg), 'src', 'wordpress', `wp-${version}.zip`);
}

function buildAssets(version: string): string {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve('@wp-playground/wordpress-builds/package.json');
  return join(dirname(pkg), 'public', `wp-${version}`);
}

export async function startWordPress(
  options: {
    plugin?: boolean;
    version?: string;
    php?: '7.4' | '8.0' | '8.1' | '8.2' | '8.3';
    /**
     * Copy the build's static files (wp-includes/js/dist, wp-admin/js, css, …) into the tree: the
     * bundled zip leaves them out (Playground serves them from elsewhere), so a browser loading an admin
     * screen that needs them (a React screen: wp-element, wp-components) gets 404s without this.
     */
    assets?: boolean;
    /** More host directories to mount after install (e.g. the image corpus at /corpus). */
    mounts?: { hostPath: string; vfsPath: string }[];
  } = {},
): Promise<WordPress> {
  const started = performance.now();
  // Before any Playground worker thread loads @php-wasm/node: without it OPcache's file cache is never
  // read, and every request compiles every PHP file it includes again (see php-wasm-flock.ts).
  fixPhpWasmFlock();
  const root = mkdtempSync(join(tmpdir(), 'compresso-wp-'));
  let cli: RunCLIServer | undefined;
  try {
    unzipTo(buildZip(options.version ?? WORDPRESS_BUILD), root);
    if (options.assets) cpSync(buildAssets(options.version ?? WORDPRESS_BUILD), root, { recursive: true });
    cli = await runCLI({
      command: 'server',
      php: options.php ?? PHP_VERSION,
      port: 0,
      wordpressInstallMode: 'install-from-existing-files',
      'mount-before-install': [{ hostPath: root, vfsPath: '/wordpress' }],
      mount: [
        ...(options.plugin === false
          ? []
          : [{ hostPath: PLUGIN_DIR, vfsPath: `/wordpress/wp-content/plugins/${PLUGIN_SLUG}` }]),
        ...(options.mounts ?? []),
      ],
      // Two workers: a request WordPress makes to itself (the cron kick) needs a second one free
      // while the first runs the script that made it.
      workers: 2,
      verbosity: 'quiet',
      blueprint: { steps: [] },
    });
  } catch (error) {
    rmSync(root, { recursive: true, force: true });
    throw error;
  }
  const server = cli;
  const url = server.serverUrl.replace(/\/$/, '');

  async function php<T>(code: string, opts: { asAdmin?: boolean } = {}): Promise<PhpResult<T>> {
    const body = code.replace(/^\s*<\?php/, '');
    const script = `<?php
      require '/wordpress/wp-load.php';
      function compresso_test_out( $value ) { echo "\\n${OUT_MARK}", wp_json_encode( $value ), "${OUT_MARK}\\n"; }
      ${opts.asAdmin ? 'wp_set_current_user( 1 );' : ''}
      ${body}`;
    const response = await server.playground.run({ code: script });
    const text = response.text;
    const start = text.indexOf(OUT_MARK);
    const end = text.indexOf(OUT_MARK, start + OUT_MARK.length);
    if (response.exitCode !== 0 || start < 0 || end < 0) {
      throw new Error(
        `PHP script failed (exit ${response.exitCode}):\n${text}\n${response.errors}\n--- script ---\n${script}`,
      );
    }
    const value = JSON.parse(text.slice(start + OUT_MARK.length, end)) as T;
    const output = (text.slice(0, start) + text.slice(end + OUT_MARK.length)).trim();
    return { value, output };
  }

  // The machine is offline: a request to the internet (core's update checks, Site Health's) fails at
  // once, as WP_HTTP_BLOCK_EXTERNAL makes it, instead of holding one of Playground's two workers for
  // its timeout (3–10 s each, a minute per WP-Cron run); the site itself and the Compresso server on
  // 127.0.0.1 stay reachable (WordPress always allows its own host and localhost).
  mkdirSync(join(root, 'wp-content/mu-plugins'), { recursive: true });
  writeFileSync(
    join(root, 'wp-content/mu-plugins/compresso-test-offline.php'),
    "<?php\nif ( ! defined( 'WP_HTTP_BLOCK_EXTERNAL' ) ) {\n\tdefine( 'WP_HTTP_BLOCK_EXTERNAL', true );\n}\n",
  );
  // One request from PHP to the site, waited for: the first loopback request of a freshly booted
  // Playground is slow to connect, and a non-blocking one (10 ms to connect, as core's spawn_cron()
  // and the plugin's runner give it) made before this was lost in each of four trials, leaving the upload it
  // was for to the next WP-Cron run a minute later. A PHP-FPM site's loopback connects in well under
  // 10 ms; this warms Playground's outbound networking so later ones arrive as they do there.
  const warm = await php<number>(
    `$r = wp_remote_get( home_url( '/' ), array( 'timeout' => 60 ) ); compresso_test_out( (int) wp_remote_retrieve_response_code( $r ) );`,
  );
  if (warm.value !== 200) {
    await server[Symbol.asyncDispose]();
    rmSync(root, { recursive: true, force: true });
    throw new Error(`the site did not answer its own first request: ${warm.value}`);
  }
  return {
    url,
    root,
    bootMs: Math.round(performance.now() - started),
    hostPath: (vfsPath: string) => join(root, vfsPath.replace(/^\/wordpress\/?/, '')),
    php,
    async close() {
      await server[Symbol.asyncDispose]();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * Activates the plugin as an admin does (activate_plugin(), which loads it inside that request), then
 * runs `andThen` (PHP, e.g. creating a user) in the same request; throws with WordPress's message when
 * the activation is refused. The plugin's functions are there from the next request on.
 */
export async function activatePlugin(wp: WordPress, andThen = ''): Promise<void> {
  const { value } = await wp.php<string>(
    `require_once ABSPATH . 'wp-admin/includes/plugin.php';
    $r = activate_plugin( '${PLUGIN_FILE}' );
    ${andThen}
    compresso_test_out( is_wp_error( $r ) ? $r->get_error_message() : 'ok' );`,
    { asAdmin: true },
  );
  if (value !== 'ok') throw new Error(`the plugin could not be activated: ${value}`);
}

/**
 * What a test that waited in vain for the plugin's background work needs to say why: the plugin's
 * events in the WP-Cron schedule (hook, arguments, seconds from now: a lease is a few minutes ahead),
 * its locks (the runner's, the bulk tick's, the attachment's: Unix time taken, 0 when free), core's
 * WP-Cron lock, and the attachment's record.
 */
export async function backgroundDiagnostics(wp: WordPress, attachmentId?: number): Promise<string> {
  const id = attachmentId ?? 0;
  const { value } = await wp.php<unknown>(`
    wp_cache_delete( 'alloptions', 'options' );
    $events = array();
    foreach ( _get_cron_array() as $at => $hooks ) {
      foreach ( Compresso_Runner::hooks() as $hook ) {
        foreach ( isset( $hooks[ $hook ] ) ? $hooks[ $hook ] : array() as $event ) {
          $events[] = array( 'hook' => $hook, 'args' => $event['args'], 'in' => $at - time() );
        }
      }
    }
    compresso_test_out( array(
      'now' => time(),
      'events' => $events,
      'runner_lock' => compresso_lock_held_since( Compresso_Runner::LOCK_OPTION ),
      'bulk_lock' => compresso_lock_held_since( Compresso_Bulk::LOCK_OPTION ),
      'attachment_lock' => ${id} ? compresso_lock_held_since( Compresso_Optimizer::LOCK_PREFIX . ${id} ) : null,
      'attempts' => ${id} ? (int) get_post_meta( ${id}, Compresso_Optimizer::ATTEMPTS_META, true ) : null,
      'doing_cron' => get_transient( 'doing_cron' ),
      'record' => ${id} ? Compresso_Optimizer::state( ${id} ) : null,
    ) );`);
  return JSON.stringify(value);
}
