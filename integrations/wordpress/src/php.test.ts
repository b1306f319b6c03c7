// The plugin's PHP checked without WordPress: PHPUnit (Debian's phpunit 9) over the pure functions
// (rewrite rules, the .htaccess block, the nginx snippet, the self-test's plan and verdict, <picture>
// markup, the multipart body), and the PHP 7.4 compatibility check by tokens
// (scripts/php74-compat.php) over every plugin file, itself checked on snippets of PHP 8 code it must
// catch and 7.4 code it must pass. Needs php-cli and phpunit (.ci/run installs both); fails, never
// skips, without them.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

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
