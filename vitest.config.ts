import { defineConfig } from 'vitest/config';

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
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
