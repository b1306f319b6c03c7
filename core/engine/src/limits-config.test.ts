import { describe, expect, it } from 'vitest';
import { createEngine } from './engine.ts';
import { DEFAULT_LIMITS, resolveLimits } from './limits.ts';

describe('resolveLimits', () => {
  it('fills the defaults and keeps overrides', () => {
    expect(resolveLimits()).toEqual(DEFAULT_LIMITS);
    expect(resolveLimits({ maxFrames: 10, timeoutSeconds: 0.5 })).toEqual({
      ...DEFAULT_LIMITS,
      maxFrames: 10,
      timeoutSeconds: 0.5,
    });
  });

  it('names every bad limit in one message', () => {
    const bad = { maxPixels: -1, maxFrames: 2.5, timeoutSeconds: 0, maxBytes: 10 } as never;
    expect(() => resolveLimits(bad)).toThrow(
      /maxBytes: not a limit.*maxPixels: expected a positive integer, received -1; maxFrames: expected a positive integer, received 2\.5; timeoutSeconds: expected/,
    );
  });

  it('createEngine refuses bad limits at creation', () => {
    expect(() => createEngine({ limits: { maxInputBytes: Number.NaN } })).toThrow(/maxInputBytes/);
  });

  it('a bad option is a rejected promise, not a synchronous throw', async () => {
    const engine = createEngine();
    let promise: Promise<unknown> | undefined;
    expect(() => {
      promise = engine.optimize(new Uint8Array(1), { quality: 0 });
    }).not.toThrow();
    await expect(promise).rejects.toMatchObject({ code: 'INVALID_OPTION' });
  });
});
