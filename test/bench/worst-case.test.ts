import { describe, expect, it } from 'vitest';
import { worstCaseQuality } from './worst-case.ts';

/** Images whose score rises by 1 per quality step from their own offset: score = q − offset. */
function linear(offsets: Record<string, number>) {
  return async (name: string, q: number) => ({ score: q - offsets[name]!, bytes: q * 10 });
}

describe('worstCaseQuality', () => {
  it('is the largest of the per-image smallest Q reaching the floor, and sums bytes at it', async () => {
    // Floor 70: a needs Q 77, b Q 93 (exact, not a multiple of 5), c Q 40.
    const result = await worstCaseQuality(['a', 'b', 'c'], 70, linear({ a: 7, b: 23, c: -30 }));
    expect(result.q).toBe(93);
    expect(result.hardest).toBe('b');
    expect(result.bytes).toBe(3 * 930);
  });

  it('is null when an image misses the floor even at 100', async () => {
    const result = await worstCaseQuality(['a', 'hopeless'], 70, linear({ a: 0, hopeless: 31 }));
    expect(result).toMatchObject({ q: null, bytes: null, hardest: 'hopeless' });
  });
});
