import { describe, expect, it } from 'vitest';
import { runStore } from './runs.ts';
import { type Backend, testBackends } from './test-support.ts';

const T0 = Date.parse('2026-11-25T10:00:00.000Z');
const LEASE = 60_000;
const page = (done: number) => ({
  done,
  optimized: done - 1,
  skipped: 1,
  failed: 0,
  bytesBefore: 1000,
  bytesAfter: 400,
});

function describeRunStoreBattery(backend: Backend): void {
  describe(`bulk run store: ${backend.name}`, () => {
    it('one active run per site, even when ten starts race; a new one once it ended', async () => {
      const db = await backend.open();
      try {
        const runs = runStore(db);
        const started = await Promise.all(Array.from({ length: 10 }, () => runs.start('a.example', T0)));
        expect(started.filter((s) => s.created)).toHaveLength(1);
        expect(new Set(started.map((s) => s.run.id)).size).toBe(1);
        const id = started[0]!.run.id;
        expect(await runs.start('b.example', T0)).toMatchObject({ created: true });
        expect(await runs.transition(id, ['running'], 'paused', T0 + 1)).toBe(true);
        expect((await runs.start('a.example', T0 + 2)).run.id).toBe(id); // paused is still active
        expect(await runs.transition(id, ['running'], 'paused', T0 + 3)).toBe(false);
        expect(await runs.transition(id, ['running', 'paused'], 'cancelled', T0 + 4)).toBe(true);
        expect(await runs.transition(id, ['paused'], 'running', T0 + 5)).toBe(false);
        expect(await runs.get(id)).toMatchObject({ state: 'cancelled', finishedAt: T0 + 4 });
        const next = await runs.start('a.example', T0 + 6);
        expect(next.created).toBe(true);
        expect((await runs.list('a.example')).map((r) => r.id)).toEqual([next.run.id, id]);
      } finally {
        await db.close();
      }
    });

    it('a driver lease on running runs only; pages counted with the cursor by the holder alone; orphans found after a lease runs out', async () => {
      const place = backend.place();
      const db = await backend.open(place);
      let id: string;
      try {
        const runs = runStore(db);
        id = (await runs.start('c.example', T0)).run.id;
        expect(await runs.claim(id, 'w1', T0, LEASE)).toMatchObject({ leaseOwner: 'w1' });
        expect(await runs.claim(id, 'w2', T0 + 10, LEASE)).toBeUndefined();
        expect(await runs.commitPage(id, 'w1', 'cursor-1', page(50), T0 + 20)).toBe(true);
        expect(await runs.commitPage(id, 'w2', 'cursor-x', page(50), T0 + 20)).toBe(false);
        expect(await runs.setWaiting(id, 'w1', T0 + 3_600_000, 'quota', T0 + 30)).toBe(true);
        expect(await runs.orphaned(T0 + 40)).toEqual([]);
      } finally {
        await db.close(); // the worker dies holding the lease
      }
      const reopened = await backend.open(place);
      try {
        const runs = runStore(reopened);
        expect((await runs.orphaned(T0 + LEASE + 1)).map((r) => r.id)).toEqual([id]);
        const run = await runs.claim(id, 'w2', T0 + LEASE + 1, LEASE);
        expect(run).toMatchObject({
          cursor: 'cursor-1',
          done: 50,
          optimized: 49,
          skipped: 1,
          bytesBefore: 1000,
          bytesAfter: 400,
          waitingUntil: T0 + 3_600_000,
          waitingReason: 'quota',
        });
        expect(await runs.commitPage(id, 'w2', null, page(10), T0 + LEASE + 2)).toBe(true);
        expect(await runs.transition(id, ['running'], 'paused', T0 + LEASE + 3)).toBe(true);
        expect(await runs.claim(id, 'w2', T0 + LEASE + 4, LEASE)).toBeUndefined(); // paused: nobody drives it
        expect(await runs.transition(id, ['paused'], 'running', T0 + LEASE + 5)).toBe(true);
        expect(await runs.finish(id, 'w2', 'completed', null, T0 + LEASE + 6)).toBe(true);
        expect(await runs.get(id)).toMatchObject({
          state: 'completed',
          done: 60,
          cursor: null,
          leaseOwner: null,
          waitingUntil: null,
          finishedAt: T0 + LEASE + 6,
        });
      } finally {
        await reopened.close();
      }
    });
  });
}

for (const backend of testBackends()) describeRunStoreBattery(backend);
