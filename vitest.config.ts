import { defineConfig } from 'vitest/config';
import SlowFirstSequencer from './test/sequencer.ts';

export default defineConfig({
  test: {
    include: [
      'core/*/src/**/*.test.ts',
      'integrations/*/src/**/*.test.ts',
      'test/**/*.test.ts',
      'examples/**/*.test.ts',
    ],
    reporters: ['default', './test/summary-reporter.ts'],
    // Image work is CPU-bound on 2 cores: two test files at a time keeps timings honest.
    maxWorkers: 2,
    // The files that take minutes start first, in a fixed order (test/sequencer.ts), so the two workers
    // end together instead of one running the last long file alone.
    sequence: { sequencer: SlowFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
