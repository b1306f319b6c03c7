import { describe, expect, it } from 'vitest';
import { Semaphore } from './semaphore.ts';

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe('Semaphore', () => {
  it('holds at most `limit` tasks and starts the rest in arrival order', async () => {
    const gate = new Semaphore(2);
    const started: number[] = [];
    const gates = [0, 1, 2, 3].map(() => deferred());
    const runs = gates.map((d, i) =>
      gate.run(async () => {
        started.push(i);
        await d.promise;
        return i;
      }),
    );
    await Promise.resolve();
    expect(started).toEqual([0, 1]);
    expect([gate.active, gate.waiting]).toEqual([2, 2]);
    gates[1]!.resolve();
    await runs[1];
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([0, 1, 2]);
    expect([gate.active, gate.waiting]).toEqual([2, 1]);
    for (const d of gates) d.resolve();
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3]);
    expect([gate.active, gate.waiting]).toEqual([0, 0]);
  });

  it('frees the slot when a task throws', async () => {
    const gate = new Semaphore(1);
    await expect(gate.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await gate.run(async () => 'next')).toBe('next');
    expect(gate.active).toBe(0);
  });

  it('rejects a limit that is not a positive integer', () => {
    expect(() => new Semaphore(0)).toThrow(RangeError);
    expect(() => new Semaphore(1.5)).toThrow(RangeError);
  });
});
