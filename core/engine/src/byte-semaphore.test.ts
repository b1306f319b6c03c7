import { describe, expect, it } from 'vitest';
import { ByteSemaphore, heldTogether, type MemoryClaim } from './byte-semaphore.ts';

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Let every settled promise chain run (admissions happen in `finally` blocks). */
const settle = () => new Promise((r) => setImmediate(r));

/** Jobs of the given sizes, each held open until released; records start order and the peak in use. */
function harness(gate: ByteSemaphore, sizes: (number | MemoryClaim)[]) {
  const started: number[] = [];
  let peak = 0;
  let peakHolders = 0;
  const holds = sizes.map(() => deferred());
  const runs = sizes.map((bytes, i) =>
    gate.run(bytes, async () => {
      started.push(i);
      peak = Math.max(peak, gate.inUse);
      peakHolders = Math.max(peakHolders, gate.active);
      await holds[i]!.promise;
      return i;
    }),
  );
  return {
    started,
    runs,
    release: async (i: number) => {
      holds[i]!.resolve();
      await runs[i];
      await settle();
    },
    peak: () => peak,
    peakHolders: () => peakHolders,
  };
}

describe('ByteSemaphore', () => {
  it('runs jobs while their bytes fit the budget; the rest wait, and start as bytes come back', async () => {
    const gate = new ByteSemaphore(100);
    const h = harness(gate, [40, 50, 30, 20]);
    await settle();
    // 40 + 50 fit; 30 more would make 120.
    expect(h.started).toEqual([0, 1]);
    expect([gate.inUse, gate.active, gate.waiting, gate.waitingBytes]).toEqual([90, 2, 2, 50]);
    await h.release(0);
    // 50 + 30 + 20 = 100: both waiting jobs fit once the 40 is back.
    expect(h.started).toEqual([0, 1, 2, 3]);
    expect([gate.inUse, gate.waiting, gate.waitingBytes]).toEqual([100, 0, 0]);
    for (const i of [1, 2, 3]) await h.release(i);
    expect(await Promise.all(h.runs)).toEqual([0, 1, 2, 3]);
    expect([gate.inUse, gate.active]).toEqual([0, 0]);
  });

  it('is first in, first out: a small job never overtakes a large one waiting at the head', async () => {
    const gate = new ByteSemaphore(100);
    // 0 holds 60; 1 (80) cannot fit; 2 (10) would fit but must wait behind 1.
    const h = harness(gate, [60, 80, 10]);
    await settle();
    expect(h.started).toEqual([0]);
    expect(gate.waiting).toBe(2);
    // A newcomer that would fit does not jump the line either.
    const late = gate.run(5, async () => 'late');
    await settle();
    expect(h.started).toEqual([0]);
    expect(gate.waiting).toBe(3);
    await h.release(0);
    expect(h.started).toEqual([0, 1, 2]);
    expect(await late).toBe('late');
    await h.release(1);
    await h.release(2);
  });

  it('never lets the bytes in use exceed the budget over a long mixed sequence', async () => {
    const gate = new ByteSemaphore(1000, 4);
    const sizes = Array.from({ length: 60 }, (_, i) => ((i * 7919) % 9) * 100 + 50);
    const h = harness(gate, sizes);
    await settle();
    // Release in an order unrelated to arrival: whatever started earliest among the unfinished.
    const finished = new Set<number>();
    while (finished.size < sizes.length) {
      const next = h.started.find((i) => !finished.has(i));
      expect(next).toBeDefined();
      finished.add(next!);
      await h.release(next!);
    }
    expect(h.started).toEqual(sizes.map((_, i) => i));
    expect(h.peak()).toBeLessThanOrEqual(1000);
    expect(h.peakHolders()).toBeLessThanOrEqual(4);
    expect([gate.inUse, gate.active, gate.waiting]).toEqual([0, 0, 0]);
  });

  it('runs a job larger than the whole budget alone, after those ahead of it, and then the rest', async () => {
    const gate = new ByteSemaphore(100);
    const h = harness(gate, [30, 500, 20]);
    await settle();
    expect(h.started).toEqual([0]);
    await h.release(0);
    // Nothing else runs: the oversized job goes alone.
    expect(h.started).toEqual([0, 1]);
    expect([gate.active, gate.inUse]).toEqual([1, 500]);
    await h.release(1);
    expect(h.started).toEqual([0, 1, 2]);
    await h.release(2);
    // Alone on an idle gate it starts at once.
    expect(await gate.run(10_000, async () => 'big')).toBe('big');
  });

  it('also caps the number of jobs at once', async () => {
    const gate = new ByteSemaphore(1000, 2);
    const h = harness(gate, [1, 1, 1]);
    await settle();
    expect(h.started).toEqual([0, 1]);
    await h.release(1);
    expect(h.started).toEqual([0, 1, 2]);
    await h.release(0);
    await h.release(2);
  });

  it('gives the bytes back when a job throws', async () => {
    const gate = new ByteSemaphore(100);
    await expect(gate.run(100, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect([gate.inUse, gate.active]).toEqual([0, 0]);
    expect(await gate.run(100, async () => 'next')).toBe('next');
  });

  it('refuses a budget, a holder count or a size that makes no sense', () => {
    expect(() => new ByteSemaphore(0)).toThrow(RangeError);
    expect(() => new ByteSemaphore(1.5)).toThrow(RangeError);
    expect(() => new ByteSemaphore(100, 0)).toThrow(RangeError);
    const gate = new ByteSemaphore(100);
    return expect(gate.run(-1, async () => 0)).rejects.toThrow(RangeError);
  });

  it('counts shared parts together up to the largest ceiling among the running jobs', () => {
    const a = { bytes: 500, shared: { bytes: 300, ceiling: 350 } };
    const b = { bytes: 400, shared: { bytes: 250, ceiling: 300 } };
    // Apart 900; their shared parts ask 550 of a place that holds at most 350: 200 less.
    expect(heldTogether([a, b])).toBe(700);
    // Within the ceiling, or with nothing shared, the bytes simply add up.
    expect(heldTogether([a])).toBe(500);
    expect(heldTogether([a, { bytes: 40 }])).toBe(540);
    expect(heldTogether([{ bytes: 500, shared: { bytes: 100, ceiling: 350 } }, b])).toBe(900);
    expect(heldTogether([])).toBe(0);
  });

  it('admits together jobs whose shared parts fit the ceiling, and waits for those that still do not', async () => {
    const claim = (bytes: number, shared: number): MemoryClaim => ({
      bytes,
      shared: { bytes: shared, ceiling: 300 },
    });
    const gate = new ByteSemaphore(700, 4);
    // 450 + 450 = 900 apart, 900 − (600 − 300) = 600 together: both run.
    const h = harness(gate, [claim(450, 300), claim(450, 300), claim(450, 300)]);
    await settle();
    expect(h.started).toEqual([0, 1]);
    expect(gate.inUse).toBe(600);
    // A third would make 1350 − (900 − 300) = 750, over 700: it waits.
    expect([gate.active, gate.waiting, gate.waitingBytes]).toEqual([2, 1, 450]);
    await h.release(0);
    expect(h.started).toEqual([0, 1, 2]);
    expect(gate.inUse).toBe(600);
    await h.release(1);
    expect(gate.inUse).toBe(450);
    await h.release(2);
    expect([gate.inUse, gate.active, gate.waiting, gate.waitingBytes]).toEqual([0, 0, 0, 0]);
  });

  it('refuses a shared part larger than its claim or negative', async () => {
    const gate = new ByteSemaphore(100);
    await expect(gate.run({ bytes: 10, shared: { bytes: 20, ceiling: 5 } }, async () => 0)).rejects.toThrow(
      /shared bytes/,
    );
    await expect(gate.run({ bytes: 10, shared: { bytes: 5, ceiling: -1 } }, async () => 0)).rejects.toThrow(
      RangeError,
    );
    expect([gate.inUse, gate.active]).toEqual([0, 0]);
  });
});
