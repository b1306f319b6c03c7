import { spawn } from 'node:child_process';

import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));

/** Runs runAll in a child process (it prints to stdout) with fake steps; returns stdout and exit code. */
function runAllWith(checks: string[], tests: string): Promise<{ stdout: string; code: number | null }> {
  const script = `
    import { runAll } from ${JSON.stringify(join(here, 'run-all.ts'))};
    const step = (name, source) => ({ name, command: process.execPath, args: ['--input-type=module', '-e', source] });
    const counts = await runAll(${JSON.stringify(checks)}.map((s, i) => step('check ' + i, s)), step('tests', ${JSON.stringify(tests)}));
    process.exitCode = counts.failed ? 1 : 0;
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ stdout, code }));
  });
}

// The fake test step writes what the summary reporter would write under npm test.
const reporting = (counts: object, exit = 0) =>
  `import { writeFileSync } from 'node:fs'; writeFileSync(process.env.COMPRESSO_SUMMARY_FILE, ${JSON.stringify(JSON.stringify(counts))}); process.exit(${exit});`;

describe('npm test (test/run-all.ts)', () => {
  it('prints the closing line when a check fails, counting the check as failed, and still runs the tests', async () => {
    const out = await runAllWith(
      ['process.exit(2)', 'process.exit(0)'],
      reporting({ passed: 7, failed: 0, skipped: 1 }),
    );
    expect(out.stdout.trimEnd().split('\n').at(-1)).toBe('7 passed, 1 failed, 1 skipped');
    expect(out.stdout).toContain('failed: check 0');
    expect(out.code).toBe(1);
  });

  it('adds nothing when every check passes, and exits 0 when nothing failed', async () => {
    const out = await runAllWith(['process.exit(0)'], reporting({ passed: 3, failed: 0, skipped: 0 }));
    expect(out.stdout.trimEnd().split('\n').at(-1)).toBe('3 passed, 0 failed, 0 skipped');
    expect(out.code).toBe(0);
  });

  it('counts a test run that ended without a report as one failure', async () => {
    const out = await runAllWith(['process.exit(0)'], 'process.exit(1)');
    expect(out.stdout.trimEnd().split('\n').at(-1)).toBe('0 passed, 1 failed, 0 skipped');
    expect(out.code).toBe(1);
  });

  it('takes the failures the test run reported as they are', async () => {
    const out = await runAllWith(['process.exit(1)'], reporting({ passed: 5, failed: 2, skipped: 0 }, 1));
    expect(out.stdout.trimEnd().split('\n').at(-1)).toBe('5 passed, 3 failed, 0 skipped');
  });
});
