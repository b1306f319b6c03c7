// The plugin's PHP checked without WordPress: PHPUnit (Debian's phpunit 9) over the pure functions
// (rewrite rules, the .htaccess block, the nginx snippet, the self-test's plan and verdict, <picture>
// markup, the multipart body), and the PHP 7.4 compatibility check by tokens
// (scripts/php74-compat.php) over every plugin file, itself checked on snippets of PHP 8 code it must
// catch and 7.4 code it must pass. Needs php-cli and phpunit (.ci/run installs both); fails, never
// skips, without them.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  watch,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as phpWasmNode from '@php-wasm/node';
import * as phpWasmUniversal from '@php-wasm/universal';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// php-wasm's declarations re-export './lib' without an extension, which `nodenext` resolution cannot
// follow: the few members used here, as documented by the packages.
interface PhpWasm {
  run(request: { code: string }): Promise<{ text: string; exitCode: number }>;
  mkdir(path: string): void;
  mount(vfsPath: string, handler: unknown): Promise<unknown>;
  exit(): void;
}
const { createNodeFsMountHandler, loadNodeRuntime } = phpWasmNode as unknown as {
  createNodeFsMountHandler(hostPath: string): unknown;
  loadNodeRuntime(version: string, options: { emscriptenOptions: { processId: number } }): Promise<number>;
};
const { PHP } = phpWasmUniversal as unknown as { PHP: new (runtime: number) => PhpWasm };

const root = join(import.meta.dirname, '..');
const pluginDir = join(root, 'plugin');
const checker = join(root, 'scripts', 'php74-compat.php');

function run(command: string, args: string[]) {
  const result = spawnSync(command, args, { encoding: 'utf8', cwd: root });
  if (result.error) {
    throw new Error(
      `cannot run ${command} (${result.error.message}): install it (Debian: apt-get install -y php-cli phpunit; .ci/run does)`,
    );
  }
  return result;
}

interface Finding {
  file: string;
  line: number;
  rule: string;
  code: string;
}

function check(files: string[]): { status: number | null; findings: Finding[] } {
  const result = run('php', [checker, ...files]);
  return { status: result.status, findings: JSON.parse(result.stdout) as Finding[] };
}

const scratch = mkdtempSync(join(tmpdir(), 'compresso-php74-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('PHPUnit (the plugin’s pure functions)', () => {
  it('passes every test', () => {
    const result = run('phpunit', ['-c', 'phpunit/phpunit.xml.dist', '--do-not-cache-result']);
    const output = `${result.stdout}${result.stderr}`;
    expect(result.status, output).toBe(0);
    const counts = /OK \((\d+) tests?, (\d+) assertions?\)/.exec(output);
    expect(counts, output).not.toBeNull();
    // As many tests as the files declare: a test file that failed to load would lower the count.
    const declared = readdirSync(join(root, 'phpunit'))
      .filter((name) => name.endsWith('Test.php'))
      .map((name) => readFileSync(join(root, 'phpunit', name), 'utf8').match(/function test_/g)?.length ?? 0)
      .reduce((sum, n) => sum + n, 0);
    expect(Number(counts?.[1])).toBe(declared);
    expect(declared).toBeGreaterThanOrEqual(28);
  });
});

describe('PHP 7.4 compatibility (by tokens)', () => {
  it('finds nothing PHP 7.4 cannot run in the plugin', () => {
    const files = readdirSync(pluginDir, { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.php'))
      .map((name) => join(pluginDir, name));
    expect(files.length).toBeGreaterThanOrEqual(10);
    const { status, findings } = check(files);
    expect(findings).toEqual([]);
    expect(status).toBe(0);
  });

  // Each snippet is valid PHP 8 and invalid (or missing a function) on PHP 7.4.
  const newer: Record<string, [string, RegExp]> = {
    match: ['$x = match ( $a ) { 1 => "a", default => "b" };', /match expression/],
    nullsafe: ['$x = $a?->b;', /nullsafe/],
    'named arguments': ['foo( bar: 1 );', /named argument/],
    'constructor promotion': ['class A { public function __construct( private int $x ) {} }', /promotion/],
    'union parameter type': ['function f( int|string $x ) {}', /union type/],
    'union return type': ['function f( $x ): int|false { return 1; }', /union return type/],
    'union property type': ['class A { public int|string $x; }', /union property type/],
    'mixed type': ['function f( mixed $x ) {}', /mixed type/],
    'static return type': ['class A { public function f(): static { return $this; } }', /static return type/],
    'never return type': ['function f(): never { exit; }', /never return type/],
    enum: ['enum Suit { case Hearts; }', /enum/],
    readonly: ['class A { public readonly int $x; }', /readonly/],
    attributes: ['#[Attribute] class A {}', /attribute/],
    'throw expression': ['$x = $y ?? throw new Exception();', /throw as an expression/],
    'catch without variable': ['try {} catch ( Exception ) {}', /catch without a variable/],
    'trailing comma in parameters': ['function f( $a, $b, ) {}', /trailing comma/],
    '$object::class': ['$n = $o::class;', /::class/],
    'explicit octal': ['$n = 0o17;', /octal/],
    'first-class callable': ['$f = strlen(...);', /first-class callable/],
    'new in initializer': ['function f( $a = new B() ) {}', /new in a default value/],
    str_contains: ['if ( str_contains( "ab", "a" ) ) {}', /str_contains\(\) without a polyfill/],
    str_starts_with: ['if ( \\str_starts_with( "ab", "a" ) ) {}', /str_starts_with\(\) without a polyfill/],
    str_ends_with: ['if ( str_ends_with( "ab", "b" ) ) {}', /str_ends_with\(\) without a polyfill/],
    array_is_list: ['$b = array_is_list( array() );', /array_is_list/],
    WeakMap: ['$m = new WeakMap();', /WeakMap/],
    // Newer than the PHP running the check (8.2 here): its tokenizer refuses it, reported as such.
    'typed class constant (8.3)': ['class A { const int X = 1; }', /typed class constant|syntax error/],
  };
  // One php run for every snippet (a run costs ~0.3 s on the shared machine).
  const files = Object.fromEntries(
    Object.entries(newer).map(([name, [code]]) => {
      const file = join(scratch, `${name.replace(/\W+/g, '-')}.php`);
      writeFileSync(file, `<?php\n${code}\n`);
      return [name, file];
    }),
  );
  let batch: { status: number | null; findings: Finding[] };
  beforeAll(() => {
    batch = check(Object.values(files));
  });
  for (const [name, [, rule]] of Object.entries(newer)) {
    it(`catches ${name}`, () => {
      const findings = batch.findings.filter((f) => f.file === files[name]);
      expect(findings.map((f) => f.rule).join(' | ')).toMatch(rule);
      expect(findings[0]?.line).toBe(2);
      expect(batch.status).toBe(1);
    });
  }

  it('passes PHP 7.4 code that looks alike (arrow functions, ??=, nullable types, ternaries, methods named like new functions, a polyfill)', () => {
    const file = join(scratch, 'php74.php');
    writeFileSync(
      file,
      `<?php
      $f = fn( $x ) => $x * 2; $a ??= 1; $n = 1_000;
      class A { public ?int $x = null; private static $y;
        public function f( ?array $a = null, int $b = A | B, &$c = null, ...$rest ): ?self {
          return $this->g( $a ? X : Y, [ 'k' => 1 ], static function ( $v ) use ( $b ) { return $v; } );
        } }
      switch ( $a ) { case X: break; default: break; }
      foo( $a, ...$rest ); $o->str_contains( 1 ); A::str_contains( 2 ); $c = A::class;
      function g( $a, $b = array( 1, 2 ) ) { throw new Exception(); }
      if ( ! function_exists( 'str_ends_with' ) ) { function str_ends_with( $h, $n ) { return true; } }
      str_ends_with( 'a', 'b' ); try { g( 1 ); } catch ( Exception $e ) {} $m = 017;
      `,
    );
    expect(check([file]).findings).toEqual([]);
  });
});

// PHP 7.4 itself, as WebAssembly: the php-wasm build (7.4.33) that WordPress Playground runs, already
// installed with @wp-playground/cli. Its parser reads every plugin file (token_get_all with TOKEN_PARSE
// is a full parse), and the pure functions run on it and answer as on the machine's PHP 8.
describe('real PHP 7.4 (php-wasm 7.4.33)', () => {
  // One script, run on both PHPs: the pure functions' answers for a few inputs.
  const SMOKE = `<?php
    require '/pkg/phpunit/bootstrap.php';
    $checks = Compresso_Self_Test::plan( 'rewrite', 'https://example.com/u/a.jpg', 'image/jpeg', array( 'webp', 'avif' ), 'n' );
    foreach ( $checks as $i => $c ) { $checks[ $i ] += array( 'status' => 200, 'type' => 'webp' === $c['key'] ? 'image/jpeg' : $c['expected'], 'vary' => 'Accept', 'cache' => '', 'error' => '' ); }
    echo json_encode( array(
      'php' => PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION,
      'apache' => Compresso_Rewrite::apache_rules( array( 'webp', 'avif' ) ),
      'nginx' => Compresso_Rewrite::nginx_snippet( '/wp-content/uploads', array( 'avif', 'webp' ) ),
      'block' => Compresso_Rewrite::with_block( "x\n", array( 'a' ) ),
      'verdict' => Compresso_Self_Test::verdict( 'rewrite', $checks ),
      'picture' => Compresso_Delivery::picture( '<img src="https://e.com/a.jpg" srcset="https://e.com/a.jpg 10w" alt="">', array( 'webp' ), function () { return true; } ),
      'multipart' => Compresso_Api_Client::multipart_body( 'b', array( 'q' => '1' ), 'file', 'a"b.jpg', 'image/jpeg', 'x' ),
    ) );`;
  let php74: PhpWasm;
  beforeAll(async () => {
    php74 = new PHP(await loadNodeRuntime('7.4', { emscriptenOptions: { processId: 1 } }));
    await php74.mkdir('/pkg');
    await php74.mount('/pkg', createNodeFsMountHandler(root));
  });
  afterAll(() => php74?.exit());

  it('parses every plugin file', async () => {
    const files = readdirSync(pluginDir, { recursive: true, encoding: 'utf8' }).filter((name) =>
      name.endsWith('.php'),
    );
    const result = await php74.run({
      code: `<?php
        $out = array( 'version' => PHP_VERSION, 'errors' => array() );
        foreach ( ${JSON.stringify(files)} as $file ) {
          try { token_get_all( file_get_contents( '/pkg/plugin/' . $file ), TOKEN_PARSE ); }
          catch ( ParseError $e ) { $out['errors'][] = $file . ':' . $e->getLine() . ' ' . $e->getMessage(); }
        }
        echo json_encode( $out );`,
    });
    const out = JSON.parse(result.text) as { version: string; errors: string[] };
    expect(out.version).toBe('7.4.33');
    expect(out.errors).toEqual([]);
    expect(files.length).toBeGreaterThanOrEqual(10);
  });

  it('refuses PHP 8 syntax (the parse above can fail)', async () => {
    const result = await php74.run({
      code: `<?php try { token_get_all( '<?php $x = $a?->b;', TOKEN_PARSE ); echo 'parsed'; } catch ( ParseError $e ) { echo 'ParseError'; }`,
    });
    expect(result.text).toBe('ParseError');
  });

  it('runs the pure functions with the same answers as PHP 8', async () => {
    const on74 = JSON.parse((await php74.run({ code: SMOKE })).text) as Record<string, unknown>;
    const file = join(scratch, 'smoke.php');
    writeFileSync(file, SMOKE.replaceAll('/pkg/', `${root}/`));
    const on8 = JSON.parse(run('php', [file]).stdout) as Record<string, unknown>;
    expect(on74.php).toBe('7.4');
    expect(String(on8.php)).toMatch(/^8\./);
    expect({ ...on74, php: '' }).toEqual({ ...on8, php: '' });
    expect(on74.verdict).toMatchObject({ verdict: 'cache_ignores_vary' });
  });
});

// The server rules as the plugin makes them — the Apache block exactly as it writes it into
// uploads/.htaccess, the nginx snippet exactly as the settings screen shows it — served by a real
// Apache 2.4 and a real nginx (Debian's apache2 and nginx, each started by the test as one foreground
// process with a config of its own on a free loopback port; no service is started): what each browser
// receives for a file with both copies, with a WebP copy only, and with none.
const LEGACY = 'image/png,image/*;q=0.8,*/*;q=0.5';
const WEBP = 'image/webp,image/apng,image/*,*/*;q=0.8';
const AVIF = 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8';

function pluginOutput(code: string): string {
  return run('php', [
    '-r',
    `define( 'ABSPATH', '/' ); require '${pluginDir}/includes/class-compresso-rewrite.php'; ${code}`,
  ]).stdout;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  const port = await new Promise<number>((resolve) =>
    probe.listen(0, '127.0.0.1', () => resolve((probe.address() as { port: number }).port)),
  );
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

function serverSuite(
  name: string,
  binary: string,
  configure: (dir: string, port: number) => { args: string[]; pidFile: string },
) {
  describe(`the rewrite rules on a real ${name}`, () => {
    const dir = join(scratch, name.replace(/\W+/g, '-'));
    let child: ChildProcess | undefined;
    let base = '';

    beforeAll(async () => {
      const uploads = join(dir, 'www', 'wp-content', 'uploads', '2026', '11');
      mkdirSync(uploads, { recursive: true });
      mkdirSync(join(dir, 'logs'));
      const photo = join(root, '..', '..', '..', 'shared', 'corpus', 'photo-skimage-rocket.jpg');
      for (const file of ['both.jpg', 'webp-only.jpg', 'none.jpg']) copyFileSync(photo, join(uploads, file));
      writeFileSync(join(uploads, 'both.jpg.webp'), 'RIFF\0\0\0\0WEBPVP8 ');
      writeFileSync(join(uploads, 'both.jpg.avif'), '\0\0\0\x1cftypavif');
      writeFileSync(join(uploads, 'webp-only.jpg.webp'), 'RIFF\0\0\0\0WEBPVP8 ');
      const port = await freePort();
      const { args, pidFile } = configure(dir, port);
      // The server's workers drop to `nobody` when started as root: everything readable by all.
      for (const path of readdirSync(dir, { recursive: true, encoding: 'utf8' }))
        chmodSync(join(dir, path), 0o755);
      chmodSync(dir, 0o755);
      chmodSync(scratch, 0o755);
      child = spawn(binary, args, { stdio: 'inherit' });
      const failed = new Promise<never>((_, reject) => {
        child?.on('exit', (code) =>
          reject(new Error(`${binary} exited (${code}); see ${dir}/logs/error.log`)),
        );
        child?.on('error', (error) =>
          reject(new Error(`cannot run ${binary} (${error.message}); .ci/run installs it with apt-get`)),
        );
      });
      // Ready once it has written its PID file, which both servers do after opening their port.
      const ready = new Promise<void>((resolve) => {
        const watcher = watch(dir, () => {
          if (existsSync(pidFile)) {
            watcher.close();
            resolve();
          }
        });
        if (existsSync(pidFile)) {
          watcher.close();
          resolve();
        }
      });
      await Promise.race([ready, failed]);
      base = `http://127.0.0.1:${port}/wp-content/uploads/2026/11`;
    }, 30_000);
    afterAll(() => {
      child?.kill('SIGTERM');
    });

    async function get(file: string, accept: string) {
      const response = await fetch(`${base}/${file}`, { headers: { accept } });
      const body = Buffer.from(await response.arrayBuffer());
      return {
        status: response.status,
        type: response.headers.get('content-type'),
        vary: response.headers.get('vary'),
        body: body.subarray(0, 12).toString('latin1'),
      };
    }

    it('answers each browser with the best copy it takes, the original otherwise, always with Vary: Accept', async () => {
      expect(await get('both.jpg', LEGACY)).toMatchObject({
        status: 200,
        type: 'image/jpeg',
        vary: 'Accept',
      });
      expect(await get('both.jpg', WEBP)).toMatchObject({ status: 200, type: 'image/webp', vary: 'Accept' });
      expect(await get('both.jpg', AVIF)).toMatchObject({
        status: 200,
        type: 'image/avif',
        vary: 'Accept',
        body: '\0\0\0\x1cftypavif',
      });
      expect(await get('webp-only.jpg', AVIF)).toMatchObject({
        type: 'image/webp',
        vary: 'Accept',
        body: 'RIFF\0\0\0\0WEBP',
      });
      expect(await get('webp-only.jpg', LEGACY)).toMatchObject({ type: 'image/jpeg', vary: 'Accept' });
      const none = await get('none.jpg', AVIF);
      expect(none).toMatchObject({ status: 200, type: 'image/jpeg', vary: 'Accept' });
      expect(none.body.startsWith('\xff\xd8')).toBe(true);
      // The copies by their own URL (what <picture> asks for) keep their type.
      expect(await get('both.jpg.webp', LEGACY)).toMatchObject({ status: 200, type: 'image/webp' });
      expect(await get('both.jpg.avif', LEGACY)).toMatchObject({ status: 200, type: 'image/avif' });
    });
  });
}

serverSuite('Apache 2.4', '/usr/sbin/apache2', (dir, port) => {
  const rules = pluginOutput(
    `echo Compresso_Rewrite::with_block( '', Compresso_Rewrite::apache_rules( array( 'webp', 'avif' ) ) );`,
  );
  expect(rules).toContain('# BEGIN Compresso');
  writeFileSync(join(dir, 'www', 'wp-content', 'uploads', '.htaccess'), rules);
  const modules = '/usr/lib/apache2/modules';
  writeFileSync(
    join(dir, 'httpd.conf'),
    [
      `ServerRoot ${dir}`,
      `PidFile ${dir}/httpd.pid`,
      `Listen 127.0.0.1:${port}`,
      'ServerName localhost',
      // One process (-X) serves one connection at a time: no keep-alive holding it between requests.
      'KeepAlive Off',
      ...['mpm_prefork', 'authz_core', 'mime', 'rewrite', 'headers'].map(
        (m) => `LoadModule ${m}_module ${modules}/mod_${m}.so`,
      ),
      'TypesConfig /etc/mime.types',
      `ErrorLog ${dir}/logs/error.log`,
      'User nobody',
      'Group nogroup',
      `DocumentRoot ${dir}/www`,
      `<Directory ${dir}/www>`,
      '  AllowOverride All',
      '  Require all granted',
      '</Directory>',
      '',
    ].join('\n'),
  );
  return { args: ['-X', '-f', join(dir, 'httpd.conf')], pidFile: join(dir, 'httpd.pid') };
});

serverSuite('nginx', '/usr/sbin/nginx', (dir, port) => {
  const snippet = pluginOutput(
    `echo Compresso_Rewrite::nginx_snippet( '/wp-content/uploads', array( 'webp', 'avif' ) );`,
  );
  // The snippet's two parts, where it says they go.
  const split = snippet.indexOf("# Compresso: in the site's server {} block");
  expect(split).toBeGreaterThan(0);
  mkdirSync(join(dir, 'tmp'));
  writeFileSync(
    join(dir, 'nginx.conf'),
    [
      `pid ${dir}/nginx.pid;`,
      `error_log ${dir}/logs/error.log;`,
      'worker_processes 1;',
      'events {}',
      'http {',
      '  include /etc/nginx/mime.types;',
      '  access_log off;',
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${dir}/tmp/${t};`),
      snippet.slice(0, split),
      '  server {',
      `    listen 127.0.0.1:${port};`,
      `    root ${dir}/www;`,
      snippet.slice(split),
      '  }',
      '}',
      '',
    ].join('\n'),
  );
  return {
    args: ['-c', join(dir, 'nginx.conf'), '-p', dir, '-g', 'daemon off;'],
    pidFile: join(dir, 'nginx.pid'),
  };
});
