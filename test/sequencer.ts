import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The test files that take longest, longest first, measured in a full `vitest run` on the shared
 * 2-core machine (see the commit that last changed this list: 10–58 s each in a 358-s run). They start first, so the two workers
 * (maxWorkers 2) share them out and the short files fill in around them; without this, a clean clone
 * (no results cache) runs the largest files first, and a long file that happened to start last ran on
 * alone while the other worker sat idle. The order is fixed by this list, not by the last run's cache,
 * so every run of the same tree orders them the same way. A file missing from the list only loses its
 * head start.
 */
export const SLOW_FIRST = [
  'integrations/shopify/src/admin-bulk.test.ts',
  'integrations/shopify/src/dashboard.test.ts',
  'integrations/wordpress/src/bulk.test.ts',
  'integrations/shopify/src/bulk-catalog.test.ts',
  'test/scale/scale.test.ts',
  'integrations/wordpress/src/bulk-screen.test.ts',
  'integrations/wordpress/src/upload.test.ts',
  'integrations/wordpress/src/runner.test.ts',
  'integrations/wordpress/src/media.test.ts',
  'integrations/wordpress/src/php74.test.ts',
  'integrations/wordpress/src/settings.test.ts',
  'integrations/wordpress/src/zip.test.ts',
  'test/conformance/queue.test.ts',
  'integrations/shopify/src/faults-kill.test.ts',
  'integrations/wordpress/src/delivery.test.ts',
  'integrations/wordpress/src/admin-screens.test.ts',
];

export default class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    // The rest keep vitest's own order (the results cache when there is one, else the largest file first).
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification) => {
      const index = SLOW_FIRST.indexOf(relative(this.ctx.config.root, spec.moduleId).split('\\').join('/'));
      return index < 0 ? SLOW_FIRST.length : index;
    };
    return sorted
      .map((spec, position) => ({ spec, position, rank: rank(spec) }))
      .sort((a, b) => a.rank - b.rank || a.position - b.position)
      .map(({ spec }) => spec);
  }
}
