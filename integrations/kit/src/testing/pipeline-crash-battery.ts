import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Compresso } from '@compresso/client';
import { type Database, fileBlobStore, sqliteDatabase } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupStore, sha256 } from '../backups.ts';
import { KIT_MIGRATIONS } from '../migrations.ts';
import { createOptimizer, type OptimizerOptions, PIPELINE_STEPS, type PipelineStep } from '../pipeline.ts';
import type { PlatformPort } from '../port.ts';
import { type FixtureImage, fixtureImage } from './fixtures.ts';
import { type ManualClock, manualClock } from './manual-clock.ts';

/** A fresh site on the platform under test, with a way to add an image and read back what it serves. */
export interface CrashHarness {
  port: PlatformPort;
  site: string;
  /** Puts `image` on the site as a new asset; its id. */
  addImage(image: FixtureImage): Promise<string>;
  /** The bytes the platform serves for the asset now (read from the platform itself, not the port). */
  liveBytes(assetId: string): Promise<Uint8Array>;
  /** How many times the asset's file was replaced so far. */
  replacements(assetId: string): Promise<number>;
  close(): Promise<void>;
}

/** The clock the adapter (and a fake platform) must wait on: the leases run on it too. */
export type CrashHarnessFactory = (setup: { clock: ManualClock }) => Promise<CrashHarness>;

/** A ledger database, migrated with the kit's migrations, fresh on each `open`. */
export interface CrashLedgerDatabase {
  name: string;
  open(): Promise<Database>;
}

export interface CrashBatteryOptions {
  /** A real Compresso server (/api/v1) whose day runs on `now`, and a client of a Pro account (maxRetries 0). */
  compresso(now: () => number): Promise<{ client: Compresso; close(): Promise<void> }>;
  /** Ledger databases (migrated with the kit's migrations) to run on; a SQLite file each by default. */
  databases?: CrashLedgerDatabase[];
}

/**
 * The pipeline killed after each of its killable steps, then run again: the next run, once the dead
 * run's lease is out, ends exactly as an uninterrupted run — one backup, one replacement, one
 * compression counted, the original kept — and the run after that has nothing to do. Every adapter's
 * harness runs it: the in-memory reference platform and the Shopify adapter over its fake.
 */
export function describePipelineCrashBattery(
  name: string,
  factory: CrashHarnessFactory,
  options: CrashBatteryOptions,
): void {
  const dir = mkdtempSync(join(tmpdir(), 'compresso-crash-battery-'));
  let n = 0;
  const databases: CrashLedgerDatabase[] = options.databases ?? [
    {
      name: 'sqlite (file)',
      async open() {
        const db = sqliteDatabase({ path: join(dir, `ledger-${++n}.sqlite`), migrations: [KIT_MIGRATIONS] });
        await db.migrate();
        return db;
      },
    },
  ];
  const clock = manualClock();
  let compresso: Awaited<ReturnType<CrashBatteryOptions['compresso']>> | undefined;
  beforeAll(async () => {
    compresso = await options.compresso(clock.now);
  });
  afterAll(async () => {
    await compresso?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  /** Requests counted today before this call (the usage request counts itself). */
  const usedToday = async () => (await compresso!.client.usage()).used - 1;

  async function world(database: CrashLedgerDatabase) {
    const harness = await factory({ clock });
    const db = await database.open();
    const backups = backupStore({ blobs: fileBlobStore({ root: join(dir, `blobs-${++n}`) }) });
    return {
      harness,
      backups,
      optimizer: (extra: Partial<OptimizerOptions> = {}) =>
        createOptimizer({
          db,
          backups,
          port: harness.port,
          client: () => compresso!.client,
          settings: () => ({ quality: 80 }),
          clock,
          leaseMs: 60_000,
          ...extra,
        }),
      async backupCount() {
        let count = 0;
        for await (const _ of backups.list(harness.site)) count++;
        return count;
      },
      async close() {
        await db.close();
        await harness.close();
      },
    };
  }

  for (const database of databases) {
    describe(`pipeline crash battery: ${name}, ${database.name}`, () => {
      it('a run killed between any two steps, then run again, ends as an uninterrupted run: one backup, one replacement, one compression, the original kept', async () => {
        const image = await fixtureImage(21, 'jpeg');
        // The uninterrupted run, for reference.
        const reference = await world(database);
        let expected: { live: string; size: number };
        try {
          const id = await reference.harness.addImage(image);
          expect((await reference.optimizer().optimize(reference.harness.site, id)).kind).toBe('optimized');
          const live = await reference.harness.liveBytes(id);
          expected = { live: sha256(live), size: live.byteLength };
          expect(live.byteLength).toBeLessThan(image.bytes.byteLength);
          expect(await reference.harness.replacements(id)).toBe(1);
        } finally {
          await reference.close();
        }
        const killable = PIPELINE_STEPS.filter((s) => s !== 'recorded');
        expect(killable).toHaveLength(6);
        for (const killAt of killable) {
          const w = await world(database);
          const site = w.harness.site;
          try {
            const id = await w.harness.addImage({ ...image, filename: `kill-${killAt}.jpg` });
            const usedBefore = await usedToday();
            // The first run stops dead after `killAt`: its promise never settles and its `finally`
            // never runs, so its lease and half-written state stay behind, as a killed process leaves them.
            let reached: (step: PipelineStep) => void = () => {};
            const stopped = new Promise<PipelineStep>((resolve) => {
              reached = resolve;
            });
            const doomed = w.optimizer({
              owner: 'doomed',
              afterStep: (step) => {
                if (step !== killAt) return;
                reached(step);
                return new Promise<void>(() => {});
              },
            });
            void doomed.optimize(site, id);
            expect(await stopped).toBe(killAt);
            // Before its lease runs out nobody else touches the asset …
            const next = w.optimizer({ owner: 'next' });
            expect((await next.optimize(site, id)).kind).toBe('busy');
            // … after it, the next run finishes the work.
            clock.advance(60_001);
            const outcome = await next.optimize(site, id);
            expect(outcome, `killed after ${killAt}`).toMatchObject({ kind: 'optimized' });
            const live = await w.harness.liveBytes(id);
            expect(sha256(live), `killed after ${killAt}`).toBe(expected.live);
            expect(await next.ledger.get(site, id)).toMatchObject({
              state: 'optimized',
              originalHash: sha256(image.bytes),
              originalSize: image.bytes.byteLength,
              currentHash: expected.live,
              currentSize: expected.size,
              pendingHash: null,
              leaseOwner: null,
            });
            expect(await w.backupCount(), `killed after ${killAt}`).toBe(1);
            const record = await next.ledger.get(site, id);
            expect(sha256((await w.backups.read(record!.backupKey!)).bytes)).toBe(sha256(image.bytes));
            expect(await w.harness.replacements(id), `killed after ${killAt}`).toBe(1);
            // One compression counted against the quota, however many runs asked (the same Idempotency-Key).
            expect((await usedToday()) - usedBefore - 1, `killed after ${killAt}`).toBe(1);
            // And the run after that finds nothing to do.
            expect((await next.optimize(site, id)).kind).toBe('unchanged');
            expect(await w.harness.replacements(id), `killed after ${killAt}`).toBe(1);
          } finally {
            await w.close();
          }
        }
      });
    });
  }
}
