import { describe, expect, it } from 'vitest';
import { createEngine } from './engine.ts';
import { heicDecoderStats } from './heic.ts';
import { corpus } from './test-support/corpus.ts';

describe('engine.close', () => {
  it('waits for images in flight, then stops the worker threads', async () => {
    const engine = createEngine({ concurrency: 1 });
    const heic = corpus('photo-heic-rocket.heic');
    const pending = engine.optimize(heic, { output_format: 'jpeg', max_dimension: 128 });
    const closing = engine.close();
    const { info } = await pending;
    expect(info.output_format).toBe('jpeg');
    await closing;
    expect(engine.stats().active).toBe(0);
    expect(heicDecoderStats().threads).toBe(0);
  });
});
