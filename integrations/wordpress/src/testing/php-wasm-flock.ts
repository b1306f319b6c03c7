/**
 * A one-line fix to `@php-wasm/node` (3.1.56, the newest on npm) that the harness applies before it
 * boots Playground, because without it OPcache's file cache never serves a script.
 *
 * Its `flock(fd, op)` checks the operation with `check_lock_params(fd, l_type)`, which expects an fcntl
 * lock type: `LOCK_SH` is 1, the value of `F_WRLCK`, so a shared lock on a file opened read-only is
 * refused with EBADF. flock(2) asks nothing of the access mode (a read-only descriptor can take either
 * lock), and OPcache reads a cached script exactly that way: `zend_file_cache_script_load()` opens the
 * `.bin` read-only and takes `LOCK_SH`, gives up when that fails, and compiles the script again. In
 * Playground (`opcache.file_cache_only=1`, the cache on the host under `/internal/shared/opcache`) every
 * request therefore parsed and optimised every WordPress file it loaded: about 1.2 s of CPU for a bare
 * `wp-load.php`, a third of it in the compiler and the optimizer, measured with `--cpu-prof`.
 *
 * The fix skips that check for flock() only (fcntl() keeps it, where it is right). It is written into
 * the installed package, atomically (temporary file and rename; concurrent test files write the same
 * bytes), once per process, before any Playground worker thread loads the package. When the package no
 * longer has the line (a release that fixed it, or changed it), nothing is written; when the package
 * cannot be written (a read-only install), the tests run without the fix, as before it.
 */
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const BUGGY = 'const paramsCheckErrno = locking.check_lock_params(fd, op);';
const MARK = 'compresso-test-harness: flock(2) takes no access mode';
const FIXED = `const paramsCheckErrno = 0; /* ${MARK}; check_lock_params() takes an fcntl lock type, and LOCK_SH === F_WRLCK */`;

/** The package files Playground's worker threads load (ESM and CommonJS builds). */
function packageFiles(): string[] {
  const require = createRequire(import.meta.url);
  // Resolved from the CLI, as its worker threads resolve it.
  const fromCli = createRequire(require.resolve('@wp-playground/cli'));
  const dir = dirname(fromCli.resolve('@php-wasm/node'));
  return ['index.js', 'index.cjs'].map((name) => join(dir, name)).filter((path) => existsSync(path));
}

export interface FlockFixResult {
  /** Files that had the bug and were fixed now. */
  fixed: string[];
  /** Files fixed before (by an earlier run or another test file). */
  already: string[];
  /** Files with neither the line nor the fix (the package changed). */
  unknown: string[];
  /** Files with the bug that could not be written (a read-only install). */
  unwritable: string[];
}

let done: FlockFixResult | undefined;

export function fixPhpWasmFlock(): FlockFixResult {
  if (done) return done;
  const result: FlockFixResult = { fixed: [], already: [], unknown: [], unwritable: [] };
  for (const path of packageFiles()) {
    const source = readFileSync(path, 'utf8');
    if (source.includes(MARK)) {
      result.already.push(path);
      continue;
    }
    // Exactly one occurrence, in flock(): fcntl() calls check_lock_params with l_type.
    if (source.split(BUGGY).length !== 2) {
      result.unknown.push(path);
      continue;
    }
    const tmp = `${path}.${process.pid}.tmp`;
    try {
      writeFileSync(tmp, source.replace(BUGGY, FIXED));
      renameSync(tmp, path);
      result.fixed.push(path);
    } catch {
      // A read-only install: the tests still pass without the fix, only slower.
      rmSync(tmp, { force: true });
      result.unwritable.push(path);
    }
  }
  done = result;
  return result;
}
