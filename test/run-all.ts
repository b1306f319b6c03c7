// `npm test`: type-check, lint, then every test, and always one closing line `N passed, N failed,
// N skipped` — also when a check fails. The checks used to be chained with `&&` before vitest, so a
// type error ended the run before the summary reporter existed and a CI log had no closing line.
// Every step runs whatever the one before it did (a lint slip should not hide a failing test); each
// failed check counts as one failed in the closing line, next to the tests' own counts.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Step {
  name: string;
  command: string;
  args: string[];
}

export interface Counts {
  passed: number;
  failed: number;
  skipped: number;
}

/** Where the summary reporter writes its counts instead of printing them (see summary-reporter.ts). */
export const SUMMARY_FILE_ENV = 'COMPRESSO_SUMMARY_FILE';

function run(step: Step, env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(step.command, step.args, { stdio: 'inherit', env });
    child.on('error', (error) => {
      process.stderr.write(`${step.name}: ${error.message}\n`);
      resolve(127);
    });
    child.on('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

/** Runs the checks, then the tests; returns the closing counts (printed as the last line). */
export async function runAll(checks: Step[], tests: Step): Promise<Counts> {
  const failedSteps: string[] = [];
  for (const step of checks) {
    if ((await run(step, process.env)) !== 0) failedSteps.push(step.name);
  }
  const dir = mkdtempSync(join(tmpdir(), 'compresso-summary-'));
  const file = join(dir, 'summary.json');
  let counts: Counts = { passed: 0, failed: 0, skipped: 0 };
  try {
    const code = await run(tests, { ...process.env, [SUMMARY_FILE_ENV]: file });
    try {
      counts = JSON.parse(readFileSync(file, 'utf8')) as Counts;
    } catch {
      // The test runner ended before its reporter wrote anything (a crash, a bad config).
    }
    // A failed exit with no failure counted (no report, or a reporter that saw none) is one failure.
    if (code !== 0 && counts.failed === 0) failedSteps.push(`${tests.name} (exit ${code})`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  counts.failed += failedSteps.length;
  if (failedSteps.length) process.stdout.write(`\nfailed: ${failedSteps.join(', ')}\n`);
  process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`);
  return counts;
}

if (import.meta.main) {
  const counts = await runAll(
    [
      {
        name: 'type-check and lint (packages)',
        command: 'turbo',
        args: ['run', 'typecheck', 'lint', '--output-logs=errors-only', '--no-daemon'],
      },
      { name: 'lint (biome check .)', command: 'biome', args: ['check', '.'] },
      { name: 'type-check (root tsconfig.json)', command: 'tsc', args: ['-p', 'tsconfig.json'] },
    ],
    { name: 'vitest', command: 'vitest', args: ['run', ...process.argv.slice(2)] },
  );
  process.exitCode = counts.failed ? 1 : 0;
}
