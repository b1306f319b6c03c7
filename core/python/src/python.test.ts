// The Python client's unittest suite, run once on the machine's python3 and reported here one vitest
// test per Python test, so `npm test` counts each of them and a failure shows its traceback.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

interface Outcome {
  id: string;
  outcome: 'passed' | 'failed' | 'skipped';
  detail: string;
  seconds: number;
}

const here = dirname(fileURLToPath(import.meta.url));
const runner = join(here, '..', 'tests', 'run_json.py');
const python = process.env.COMPRESSO_PYTHON ?? 'python3';

async function runSuite(
  testsDir?: string,
  extraEnv: Record<string, string> = {},
): Promise<{ code: number | null; stderr: string; outcomes: Outcome[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'compresso-python-'));
  const out = join(dir, 'outcomes.json');
  try {
    const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      // The suite starts `compresso serve` itself; it runs on the Node that runs these tests (24).
      const child = spawn(python, testsDir ? [runner, out, testsDir] : [runner, out], {
        env: { ...process.env, COMPRESSO_NODE: process.execPath, PYTHONDONTWRITEBYTECODE: '1', ...extraEnv },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (chunk: string) => {
        stderr = (stderr + chunk).slice(-20_000);
      });
      child.on('error', (err: NodeJS.ErrnoException) =>
        reject(
          err.code === 'ENOENT'
            ? new Error(
                `${python} not found: the Python client's tests need Python 3.8 or newer on PATH (or set COMPRESSO_PYTHON).`,
              )
            : err,
        ),
      );
      child.on('close', (exitCode) => resolve({ code: exitCode, stderr }));
    });
    let outcomes: Outcome[] = [];
    try {
      outcomes = (JSON.parse(readFileSync(out, 'utf8')) as { outcomes: Outcome[] }).outcomes;
    } catch {
      // No report: the runner itself failed; the stderr below says why.
    }
    return { code, stderr, outcomes };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const suite = await runSuite();

describe('compresso (Python client, core/python/tests)', () => {
  it('ran to the end', () => {
    expect(suite.outcomes.length, `no outcomes from ${runner}:\n${suite.stderr}`).toBeGreaterThan(50);
    const failed = suite.outcomes.some((o) => o.outcome !== 'passed');
    expect(suite.code, suite.stderr).toBe(failed ? 1 : 0);
  });
  for (const outcome of suite.outcomes) {
    it(outcome.id, () => {
      if (outcome.outcome !== 'passed') throw new Error(`${outcome.outcome}:\n${outcome.detail}`);
    });
  }
});

describe('run_json.py', () => {
  it('fails a hung test with TimeoutError and its stack, and goes on with the next', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'compresso-python-hang-'));
    try {
      writeFileSync(
        join(dir, 'test_hang.py'),
        [
          'import threading, unittest',
          'class Hang(unittest.TestCase):',
          '    def test_a_hangs(self):',
          '        threading.Event().wait()  # never set: a test waiting on a server that never answers',
          '    def test_b_runs(self):',
          '        self.assertEqual(1 + 1, 2)',
          '',
        ].join('\n'),
      );
      const run = await runSuite(dir, { COMPRESSO_PYTHON_TEST_TIMEOUT: '1' });
      expect(run.code, run.stderr).toBe(1);
      expect(run.outcomes.map((o) => [o.id, o.outcome])).toEqual([
        ['test_hang.Hang.test_a_hangs', 'failed'],
        ['test_hang.Hang.test_b_runs', 'passed'],
      ]);
      expect(run.outcomes[0]!.detail).toContain('TimeoutError: test still running after 1 s');
      expect(run.outcomes[0]!.detail).toContain('threading.Event().wait()');
      // Every thread's stack is dumped where the CI log shows it.
      expect(run.stderr).toMatch(/Current thread .*\n[\s\S]*test_hang\.py", line 4 in test_a_hangs/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
