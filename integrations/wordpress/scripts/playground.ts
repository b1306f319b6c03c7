// `npm run playground -w @compresso/wordpress`: a local WordPress (Playground, offline, the same boot the
// tests use) with this checkout's plugin mounted and active, to try it by hand against `npm start`.
// Prints the site's URL and the administrator's login; Ctrl-C stops it and removes the site.
import { PLUGIN_FILE, startWordPress } from '../src/testing/wordpress.ts';

const wp = await startWordPress({ assets: true });
await wp.php(
  `require_once ABSPATH . 'wp-admin/includes/plugin.php';
  activate_plugin( '${PLUGIN_FILE}' );
  wp_set_password( 'password', 1 );
  compresso_test_out( 'ok' );`,
  { asAdmin: true },
);
process.stdout.write(
  `WordPress with Compresso: ${wp.url}/wp-admin/ (user admin, password password), booted in ${wp.bootMs} ms.\n` +
    'Settings → Compresso: the server URL `npm start` printed and an API key. Ctrl-C to stop.\n',
);
const stop = async () => {
  await wp.close();
  process.exit(0);
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
