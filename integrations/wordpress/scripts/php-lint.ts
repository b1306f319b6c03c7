// `npm run lint` for the PHP: `php -l` (syntax check, the machine's php-cli) over every file of the
// plugin. It fails, never skips, when php is missing: .ci/run installs Debian's php-cli.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const pluginDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'plugin');
const files = readdirSync(pluginDir, { recursive: true, encoding: 'utf8' })
  .filter((name) => name.endsWith('.php'))
  .map((name) => join(pluginDir, name));

let failed = 0;
for (const file of files) {
  const result = spawnSync('php', ['-l', file], { encoding: 'utf8' });
  if (result.error) {
    process.stderr.write(
      `php-lint: cannot run php (${result.error.message}); install php-cli (Debian: apt-get install php-cli)\n`,
    );
    process.exit(1);
  }
  if (result.status !== 0) {
    failed++;
    process.stderr.write(`${relative(process.cwd(), file)}: ${result.stdout}${result.stderr}`);
  }
}
process.stdout.write(`php-lint: ${files.length} files, ${failed} with errors\n`);
process.exitCode = failed ? 1 : 0;
