import { describe, expect, it } from 'vitest';
import { createEngine } from './engine.ts';
import { GPS_EXIF, noise } from './test-support/fixtures.ts';
import { loopTurnsBefore } from './test-support/loop-turns.ts';

describe('the event loop', () => {
  it('keeps ticking while large JPEGs are detected, checked, stripped and re-encoded', async () => {
    const engine = createEngine({ concurrency: 2 });
    // 1.6 MP of noise with GPS EXIF: every main-thread step runs (detection, header checks, the lossless
    // metadata cut for never-larger), and libvips has a second of work on the libuv pool.
    const jpeg = await noise(1600, 1000).jpeg({ quality: 92 }).withExif(GPS_EXIF).toBuffer();
    const work = (async () => {
      const results = await Promise.all([
        engine.optimize(jpeg, { quality: 100 }),
        engine.optimize(jpeg, { output_format: 'webp', max_dimension: 800 }),
      ]);
      await engine.inspect(jpeg);
      return results;
    })();
    // The event loop went on turning while the images were worked on: the encodes are on the libuv
    // pool, not on the main thread. (Was: worst timer lag under 200 ms, which a loaded machine decides.)
    expect(await loopTurnsBefore(work)).toBe(10);
    const results = await work;
    // The paths meant to run did: never-larger cut the metadata out, the WebP was resized.
    expect(results[0]?.info).toMatchObject({ output_format: 'jpeg', metadata_stripped: true });
    expect(results[1]?.info).toMatchObject({ output_format: 'webp', width: 800 });
  });
});
