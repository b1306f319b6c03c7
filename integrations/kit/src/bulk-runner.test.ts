import type { Compresso } from '@compresso/client';
import type { Database } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BackupStore, backupStore } from './backups.ts';
import { type BulkRunnerOptions, createBulkRunner, type RunProgress } from './bulk-runner.ts';
import { createOptimizer, type OptimizerOptions } from './pipeline.ts';
import { type Backend, startCompresso, testBackends, testBlobDir } from './test-support.ts';
import { fixtureImage } from './testing/fixtures.ts';
import { type ManualClock, manualClock } from './testing/manual-clock.ts';
import { createMemoryPlatform, type MemoryPlatform } from './testing/memory-platform.ts';

const newBlobs = testBlobDir();
const backends = testBackends();
const clock = manualClock();
let compresso: Awaited<ReturnType<typeof startCompresso>>;
let sites = 0;

beforeAll(async () => {
  compresso = await startCompresso({ now: clock.now });
});
afterAll(async () => {
  await compresso?.close();
});

/** Requests counted today before this call (the usage request counts itself). */
const usedToday = async (client: Compresso = compresso.client) => (await client.usage()).used - 1;

interface Shop {
  site: string;
  platform: MemoryPlatform;
  backups: BackupStore;
  ids: string[];
  /** A worker: its own database connection, optimizer and runner, as a process would have. */
  worker(
    db: Database,
    extra?: { optimizer?: Partial<OptimizerOptions>; runner?: Partial<BulkRunnerOptions> },
  ): ReturnType<typeof createBulkRunner> & { optimizer: ReturnType<typeof createOptimizer> };
}

/** A catalog of `n` images: mostly large JPEGs, some PNGs, some JPEGs already small. */
async function shop(n: number, shopClock: ManualClock = clock, client = compresso.client): Promise<Shop> {
  const site = `bulk-${++sites}.example`;
  const platform = createMemoryPlatform({ clock: shopClock });
  platform.addSite(site, 'Bulk Store');
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const kind = i % 6 === 4 ? 'png' : i % 6 === 5 ? 'small-jpeg' : 'jpeg';
    ids.push(platform.addAsset(site, await fixtureImage(100 + i, kind, 64)));
  }
  const backups = backupStore({ blobs: newBlobs() });
  return {
    site,
    platform,
    backups,
    ids,
    worker(db, extra = {}) {
      const optimizer = createOptimizer({
        db,
        backups,
        port: platform.port,
        client: () => client,
        settings: () => ({ quality: 80 }),
        clock: shopClock,
        leaseMs: 60_000,
        ...extra.optimizer,
      });
      const runner = createBulkRunner({
        db,
        port: platform.port,
        optimizer,
        clock: shopClock,
        pageSize: 5,
        ...extra.runner,
      });
      return Object.assign(runner, { optimizer });
    },
  };
}

/** Each asset was replaced at most once, and the optimized ones exactly once. */
async function expectEachOnce(s: Shop, db: Database) {
  const worker = s.worker(db);
  for (const id of s.ids) {
    const record = await worker.optimizer.ledger.get(s.site, id);
    const replaced = s.platform.replacements.filter((r) => r.assetId === id).length;
    expect(replaced, id).toBe(record?.state === 'optimized' ? 1 : 0);
  }
}

function describeRunner(backend: Backend): void {
  describe(`bulk runner: ${backend.name}`, () => {
    it('optimizes a whole catalog page by page with counts equal to the ledger; a second run compresses nothing', async () => {
      const s = await shop(12);
      const db = await backend.open();
      try {
        const worker = s.worker(db);
        const usedBefore = await usedToday();
        const { run, created } = await worker.start(s.site);
        expect(created).toBe(true);
        expect((await worker.start(s.site)).run.id).toBe(run.id); // one run per site
        const done = await worker.drive(run.id);
        expect(done).toMatchObject({
          state: 'completed',
          done: 12,
          failed: 0,
          cursor: null,
          leaseOwner: null,
        });
        expect(done.optimized + done.skipped).toBe(12);
        expect(done.optimized).toBeGreaterThanOrEqual(8);
        const totals = await worker.optimizer.ledger.totals(s.site);
        expect(totals.states.optimized).toBe(done.optimized);
        expect(totals.states.skipped).toBe(done.skipped);
        expect([done.bytesBefore, done.bytesAfter]).toEqual([totals.bytesBefore, totals.bytesAfter]);
        expect(done.bytesAfter).toBeLessThan(done.bytesBefore);
        await expectEachOnce(s, db);
        expect((await usedToday()) - usedBefore - 1).toBe(12); // one compression per image
        // A new run over the same catalog: every asset found settled, nothing compressed or replaced.
        const again = await worker.start(s.site);
        expect(again.created).toBe(true);
        const second = await worker.drive(again.run.id);
        expect(second).toMatchObject({
          state: 'completed',
          done: 12,
          optimized: done.optimized,
          skipped: done.skipped,
        });
        expect((await usedToday()) - usedBefore - 2).toBe(12);
        await expectEachOnce(s, db);
      } finally {
        await db.close();
      }
    });

    it('a worker killed mid-run is replaced after a restart: the run completes, every image processed exactly once', async () => {
      const s = await shop(12);
      const place = backend.place();
      const first = await backend.open(place);
      const usedBefore = await usedToday();
      let seen = 0;
      let killed: () => void = () => {};
      const dead = new Promise<void>((resolve) => {
        killed = resolve;
      });
      // The first worker stops dead in the middle of the 8th image (second page), after compressing it.
      const doomed = s.worker(first, {
        optimizer: {
          owner: 'doomed',
          afterStep: (step) => {
            if (step === 'claimed') seen++;
            if (seen === 8 && step === 'compressed') {
              killed();
              return new Promise<void>(() => {});
            }
          },
        },
      });
      const { run } = await doomed.start(s.site);
      void doomed.drive(run.id);
      await dead;
      const second = await backend.open(place);
      try {
        const restarted = s.worker(second, { optimizer: { owner: 'restarted' } });
        // While the dead worker's leases last, nobody takes its run over.
        expect(await restarted.resumeOrphans()).toEqual([]);
        clock.advance(120_001);
        const [finished] = await restarted.resumeOrphans();
        expect(finished).toMatchObject({ id: run.id, state: 'completed', done: 12, failed: 0 });
        expect(finished!.optimized + finished!.skipped).toBe(12);
        const totals = await restarted.optimizer.ledger.totals(s.site);
        expect([finished!.bytesBefore, finished!.bytesAfter]).toEqual([
          totals.bytesBefore,
          totals.bytesAfter,
        ]);
        await expectEachOnce(s, second);
        // The image in hand when the worker died was compressed once: the retry was the server's replay.
        expect((await usedToday()) - usedBefore - 1).toBe(12);
        let backups = 0;
        for await (const _ of s.backups.list(s.site)) backups++;
        expect(backups).toBe(12);
      } finally {
        await second.close();
        await first.close();
      }
    });
  });
}

for (const backend of backends) describeRunner(backend);

describe('bulk runner: pause, resume, cancel, quota (sqlite file)', () => {
  const sqlite = backends[0]!;

  it('pauses after the image in hand, resumes where the last full page ended, and cancels for good', async () => {
    const s = await shop(12);
    const db = await backend(sqlite);
    try {
      let assets = 0;
      let runId = '';
      const events: RunProgress['type'][] = [];
      const worker = s.worker(db, {
        runner: {
          onProgress: async (event) => {
            events.push(event.type);
            if (event.type === 'asset' && ++assets === 7) expect(await worker.pause(runId)).toBe(true);
          },
        },
      });
      runId = (await worker.start(s.site)).run.id;
      const paused = await worker.drive(runId);
      // 7 images done; the first page (5) committed, the second's 2 not yet: counted again on resume.
      expect(paused).toMatchObject({ state: 'paused', done: 5, leaseOwner: null });
      expect(paused.cursor).not.toBeNull();
      expect(await worker.pause(runId)).toBe(false);
      expect((await worker.drive(runId)).state).toBe('paused'); // nobody drives a paused run
      expect(await worker.resume(runId)).toBe(true);
      const completed = await worker.drive(runId);
      expect(completed).toMatchObject({ state: 'completed', done: 12, failed: 0 });
      await expectEachOnce(s, db);
      expect(events.at(-1)).toBe('stopped');

      const other = await shop(6);
      let n = 0;
      let otherId = '';
      const canceller = other.worker(db, {
        runner: {
          onProgress: async (event) => {
            if (event.type === 'asset' && ++n === 2) expect(await canceller.cancel(otherId)).toBe(true);
          },
        },
      });
      otherId = (await canceller.start(other.site)).run.id;
      expect((await canceller.drive(otherId)).state).toBe('cancelled');
      expect(await canceller.resume(otherId)).toBe(false);
      expect((await canceller.drive(otherId)).state).toBe('cancelled');
      expect(other.platform.replacements.length).toBeLessThanOrEqual(2);
    } finally {
      await db.close();
    }
  });

  it('an image a webhook is working on meanwhile is waited for, not done twice', async () => {
    const s = await shop(3);
    const db = await backend(sqlite);
    try {
      const webhook = s.worker(db, { optimizer: { owner: 'webhook' } });
      // The webhook's worker holds the second image (and dies holding it: the lease must run out).
      expect(
        await webhook.optimizer.ledger.claim(s.site, s.ids[1]!, 'webhook', clock.now(), 60_000),
      ).toBeDefined();
      const worker = s.worker(db, { optimizer: { owner: 'bulk' } });
      const { run } = await worker.start(s.site);
      const before = clock.now();
      const done = await worker.drive(run.id);
      expect(done).toMatchObject({ state: 'completed', done: 3, failed: 0 });
      expect(clock.now() - before).toBeGreaterThanOrEqual(60_000);
      await expectEachOnce(s, db);
      // And a webhook after the run (our own replacement's products/update) finds nothing to do.
      for (const id of s.ids) expect((await webhook.optimizer.optimize(s.site, id)).kind).toBe('unchanged');
    } finally {
      await db.close();
    }
  });

  it('rides out a blob store outage mid-run: waits, goes on from the last committed page, counts each image once', async () => {
    const s = await shop(7);
    const db = await backend(sqlite);
    try {
      const blobs = newBlobs();
      let puts = 0;
      // The 3rd and 4th writes (the second image's backup, then its retry) meet an outage, as the
      // runtime reports one: a CompressoError-like SERVICE_UNAVAILABLE.
      const flaky = {
        ...blobs,
        put: async (...args: Parameters<typeof blobs.put>) => {
          if (++puts === 3 || puts === 4)
            throw Object.assign(new Error('blob store unreachable'), { code: 'SERVICE_UNAVAILABLE' });
          return blobs.put(...args);
        },
      };
      const worker = s.worker(db, { optimizer: { backups: backupStore({ blobs: flaky }) } });
      const { run } = await worker.start(s.site);
      const before = clock.now();
      const done = await worker.drive(run.id);
      expect(done).toMatchObject({ state: 'completed', done: 7, failed: 0 });
      expect(done.optimized + done.skipped).toBe(7);
      expect(clock.now() - before).toBeGreaterThanOrEqual(2000 + 4000); // two waits, backing off
      await expectEachOnce(s, db);
    } finally {
      await db.close();
    }
  });

  it('waits for the quota reset, says until when, and goes on by itself: nothing failed', async () => {
    const own = manualClock(Date.parse('2026-11-25T23:00:00.000Z'));
    const server = await startCompresso({ now: own.now, dailyLimit: 5 });
    const s = await shop(8, own, server.client);
    const db = await backend(sqlite);
    try {
      const waits: { until: number; reason: string; waitingUntil: number | null }[] = [];
      const worker = s.worker(db, {
        runner: {
          onProgress: (event) => {
            if (event.type === 'waiting')
              waits.push({ until: event.until, reason: event.reason, waitingUntil: event.run.waitingUntil });
          },
        },
      });
      const { run } = await worker.start(s.site);
      const done = await worker.drive(run.id);
      expect(done).toMatchObject({ state: 'completed', done: 8, failed: 0, waitingUntil: null });
      const midnight = Date.parse('2026-11-26T00:00:00.000Z');
      expect(waits).toEqual([{ until: midnight, reason: 'quota', waitingUntil: midnight }]);
      expect(own.now()).toBeGreaterThanOrEqual(midnight);
      await expectEachOnce(s, db);
    } finally {
      await db.close();
      await server.close();
    }
  });
});

const backend = (b: Backend) => b.open();
