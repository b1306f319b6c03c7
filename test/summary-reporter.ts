import { writeFileSync } from 'node:fs';
import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends every run with one plain line, `N passed, N failed, N skipped`, so a CI log shows at a glance
 * whether tests ran at all (a run that executed nothing prints `0 passed, 0 failed`). Under `npm test`
 * (test/run-all.ts) it writes the counts to COMPRESSO_SUMMARY_FILE instead, and the runner prints the
 * line with the failed checks added.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      let failedHere = 0;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failedHere++;
        else skipped++;
      }
      // A file that failed to load, or whose beforeAll/afterAll threw, has no failed test of its own
      // (vitest marks its tests skipped) but is still a failure: count it once, so the closing line
      // can never read "0 failed" on a red run.
      if (module.state() === 'failed' && failedHere === 0) failedHere = 1;
      failed += failedHere;
    }
    failed += unhandledErrors.length;
    const file = process.env.COMPRESSO_SUMMARY_FILE;
    if (file) {
      writeFileSync(file, JSON.stringify({ passed, failed, skipped }));
      return;
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
