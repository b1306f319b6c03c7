import type { Database } from '@compresso/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BackupStore, backupStore, sha256 } from './backups.ts';
import { createOptimizer, type OptimizerOptions } from './pipeline.ts';
import { PlatformError } from './platform-error.ts';
import { type Backend, startCompresso, testBackends, testBlobDir } from './test-support.ts';
import { fixtureImage } from './testing/fixtures.ts';
import { type ManualClock, manualClock } from './testing/manual-clock.ts';
import { createMemoryPlatform, type MemoryPlatform } from './testing/memory-platform.ts';
import { describePipelineCrashBattery } from './testing/pipeline-crash-battery.ts';

let sites = 0;
const newBlobs = testBlobDir();
const clock = manualClock();
let compresso: Awaited<ReturnType<typeof startCompresso>>;

beforeAll(async () => {
  compresso = await startCompresso({ now: clock.now });
});
afterAll(async () => {
  await compresso?.close();
});

interface World {
  /** A site of its own: the test server's Idempotency-Keys are per site and asset, as in production. */
  site: string;
  db: Database;
  platform: MemoryPlatform;
  backups: BackupStore;
  blobs: ReturnType<typeof newBlobs>;
  optimizer(extra?: Partial<OptimizerOptions>): ReturnType<typeof createOptimizer>;
  backupCount(): Promise<number>;
  close(): Promise<void>;
}

async function world(
  backend: Backend,
  worldClock: ManualClock = clock,
  client = compresso.client,
): Promise<World> {
  const db = await backend.open();
  const site = `pipeline-${++sites}.example`;
  const platform = createMemoryPlatform({ clock: worldClock });
  platform.addSite(site, 'Pipeline Store');
  const blobs = newBlobs();
  const backups = backupStore({ blobs });
  return {
    site,
    db,
    platform,
    backups,
    blobs,
    optimizer: (extra = {}) =>
      createOptimizer({
        db,
        backups,
        port: platform.port,
        client: () => client,
        settings: () => ({ quality: 80 }),
        clock: worldClock,
        leaseMs: 60_000,
        ...extra,
      }),
    async backupCount() {
      let n = 0;
      for await (const _ of backups.list(site)) n++;
      return n;
    },
    close: () => db.close(),
  };
}

/** Requests counted today before this call (the usage request counts itself). */
const usedToday = async () => (await compresso.client.usage()).used - 1;

function describePipeline(backend: Backend): void {
  describe(`optimize pipeline: ${backend.name}`, () => {
    it('replaces what it can shrink in place, skips what it cannot, and a second pass does nothing at all', async () => {
      const w = await world(backend);
      try {
        const images = [
          await fixtureImage(11, 'jpeg'),
          await fixtureImage(12, 'jpeg'),
          await fixtureImage(13, 'png'),
          await fixtureImage(14, 'small-jpeg'),
        ];
        const ids = images.map((image) => w.platform.addAsset(w.site, image));
        const optimizer = w.optimizer();
        const outcomes = [];
        for (const id of ids) outcomes.push(await optimizer.optimize(w.site, id));
        expect(outcomes.map((o) => o.kind)).toEqual(['optimized', 'optimized', 'optimized', 'skipped']);
        for (const [i, id] of ids.entries()) {
          const live = w.platform.bytesOf(w.site, id);
          const record = await optimizer.ledger.get(w.site, id);
          expect(record?.currentHash).toBe(sha256(live));
          expect(record?.originalHash).toBe(sha256(images[i]!.bytes));
          if (i < 3) expect(live.byteLength).toBeLessThan(images[i]!.bytes.byteLength * 0.95);
          else expect(record).toMatchObject({ state: 'skipped', reason: 'not_smaller' });
          // Every original is kept, and reads back exactly.
          const backup = await w.backups.read(record!.backupKey!);
          expect(Buffer.from(backup.bytes).equals(Buffer.from(images[i]!.bytes))).toBe(true);
        }
        // The events our own replacements cause (a products/update per image) are no-ops: no download
        // is compressed, nothing replaced, no quota spent.
        const used = await usedToday();
        const replaced = w.platform.stats.replacements;
        for (const id of ids) expect((await optimizer.optimize(w.site, id)).kind).toBe('unchanged');
        expect(w.platform.stats.replacements).toBe(replaced);
        expect(await usedToday()).toBe(used + 1); // the first usage request, nothing else
        expect(await w.backupCount()).toBe(4);
        const totals = await optimizer.ledger.totals(w.site);
        expect(totals.states).toMatchObject({ optimized: 3, skipped: 1 });
        expect(totals.bytesBefore).toBe(
          images.slice(0, 3).reduce((n, image) => n + image.bytes.byteLength, 0),
        );
      } finally {
        await w.close();
      }
    });

    it('two calls of one optimizer on the same image at once: one works it, the other answers busy', async () => {
      const w = await world(backend);
      try {
        const id = w.platform.addAsset(w.site, await fixtureImage(21, 'jpeg'));
        const optimizer = w.optimizer();
        const outcomes = await Promise.all([optimizer.optimize(w.site, id), optimizer.optimize(w.site, id)]);
        expect(outcomes.map((o) => o.kind).sort()).toEqual(['busy', 'optimized']);
        expect(w.platform.stats.replacements).toBe(1);
        expect(await w.backupCount()).toBe(1);
        // Once the first is done, the image is known: a third call changes nothing.
        expect((await optimizer.optimize(w.site, id)).kind).toBe('unchanged');
      } finally {
        await w.close();
      }
    });
  });
}

const backends = testBackends();
for (const backend of backends) describePipeline(backend);

// The crash-between-steps cases, on the reference platform over both backends: the same battery the
// Shopify adapter runs over its fake (integrations/shopify/src/shopify-platform.test.ts).
describePipelineCrashBattery(
  'reference platform',
  async ({ clock: crashClock }) => {
    const platform = createMemoryPlatform({ clock: crashClock });
    const site = `crash-${++sites}.example`;
    platform.addSite(site, 'Crash Store');
    return {
      port: platform.port,
      site,
      addImage: async (image) => platform.addAsset(site, image),
      liveBytes: async (assetId) => platform.bytesOf(site, assetId),
      replacements: async (assetId) => platform.replacements.filter((r) => r.assetId === assetId).length,
      close: async () => {},
    };
  },
  { compresso: (now) => startCompresso({ now }), databases: backends },
);

describe('optimize pipeline: restore, faults, quota, alt text (sqlite file)', () => {
  const sqlite = backends[0];

  it('restores the original byte for byte, never compresses it again, and refuses a corrupt backup leaving the current file', async () => {
    const w = await world(sqlite!);
    try {
      const image = await fixtureImage(31, 'jpeg');
      const id = w.platform.addAsset(w.site, image);
      const optimizer = w.optimizer();
      expect((await optimizer.optimize(w.site, id)).kind).toBe('optimized');
      expect(await optimizer.restore(w.site, id)).toEqual({ kind: 'restored', size: image.bytes.byteLength });
      expect(Buffer.from(w.platform.bytesOf(w.site, id)).equals(Buffer.from(image.bytes))).toBe(true);
      expect(await optimizer.ledger.get(w.site, id)).toMatchObject({
        state: 'restored',
        currentHash: sha256(image.bytes),
      });
      // Compression on again (the webhook the restore caused, a bulk run): the restored original stays.
      expect(await optimizer.optimize(w.site, id)).toMatchObject({ kind: 'unchanged', state: 'restored' });
      // A second asset whose backup rotted: the restore fails and the compressed file stays live.
      const other = w.platform.addAsset(w.site, await fixtureImage(32, 'jpeg'));
      expect((await optimizer.optimize(w.site, other)).kind).toBe('optimized');
      const live = w.platform.bytesOf(w.site, other);
      const record = await optimizer.ledger.get(w.site, other);
      await w.blobs.put(record!.backupKey!, new Uint8Array([1, 2, 3]));
      expect((await optimizer.restore(w.site, other)).kind).toBe('failed');
      expect(Buffer.from(w.platform.bytesOf(w.site, other)).equals(Buffer.from(live))).toBe(true);
      expect((await optimizer.ledger.get(w.site, other))?.state).toBe('optimized');
    } finally {
      await w.close();
    }
  });

  it('a new file uploaded in place of an optimized one is a new original: backed up and optimized in its turn', async () => {
    const w = await world(sqlite!);
    try {
      const id = w.platform.addAsset(w.site, await fixtureImage(41, 'jpeg'));
      const optimizer = w.optimizer();
      await optimizer.optimize(w.site, id);
      const upload = await fixtureImage(42, 'jpeg');
      w.platform.overwrite(w.site, id, upload.bytes);
      expect((await optimizer.optimize(w.site, id)).kind).toBe('optimized');
      expect((await optimizer.ledger.get(w.site, id))?.originalHash).toBe(sha256(upload.bytes));
      expect(await w.backupCount()).toBe(2);
    } finally {
      await w.close();
    }
  });

  it('a transient platform failure is an attempt to retry; a refusal is recorded with the original left in place; not an image is failed', async () => {
    const w = await world(sqlite!);
    try {
      const image = await fixtureImage(51, 'jpeg');
      const id = w.platform.addAsset(w.site, image);
      const optimizer = w.optimizer();
      w.platform.failNext(w.site, 'fetch', new PlatformError('UNAVAILABLE', 'CDN answered 503'));
      expect(await optimizer.optimize(w.site, id)).toMatchObject({ kind: 'retry', attempts: 1 });
      w.platform.failNext(w.site, 'replace', new PlatformError('REJECTED', 'file processing FAILED'));
      expect(await optimizer.optimize(w.site, id)).toMatchObject({
        kind: 'failed',
        error: expect.stringMatching(/REJECTED/),
      });
      expect(Buffer.from(w.platform.bytesOf(w.site, id)).equals(Buffer.from(image.bytes))).toBe(true);
      expect(await optimizer.ledger.get(w.site, id)).toMatchObject({
        state: 'failed',
        currentHash: sha256(image.bytes),
      });
      // Failed stays failed until someone asks again (the retry button).
      expect((await optimizer.optimize(w.site, id)).kind).toBe('unchanged');
      expect((await optimizer.optimize(w.site, id, { retryFailed: true })).kind).toBe('optimized');
      const junk = w.platform.addAsset(w.site, {
        bytes: new TextEncoder().encode('<html>not an image</html>'),
        filename: 'broken.jpg',
        contentType: 'image/jpeg',
      });
      expect(await optimizer.optimize(w.site, junk)).toMatchObject({
        kind: 'failed',
        error: expect.stringMatching(/^[A-Z_]+:/),
      });
      expect(await w.backupCount()).toBe(2);
    } finally {
      await w.close();
    }
  });

  it('when the quota runs out the asset waits, nothing failed, and goes through once the day turns', async () => {
    const own = manualClock(Date.parse('2026-11-25T23:00:00.000Z'));
    const server = await startCompresso({ now: own.now, dailyLimit: 2 });
    const w = await world(sqlite!, own, server.client);
    try {
      const assets: string[] = [];
      for (const n of [61, 62, 63]) assets.push(w.platform.addAsset(w.site, await fixtureImage(n, 'jpeg')));
      const optimizer = w.optimizer();
      expect((await optimizer.optimize(w.site, assets[0]!)).kind).toBe('optimized');
      expect((await optimizer.optimize(w.site, assets[1]!)).kind).toBe('optimized');
      const waiting = await optimizer.optimize(w.site, assets[2]!);
      expect(waiting).toEqual({ kind: 'quota', resetAt: new Date('2026-11-26T00:00:00.000Z') });
      expect(await optimizer.ledger.get(w.site, assets[2]!)).toMatchObject({
        state: 'backed_up',
        attempts: 0,
        leaseOwner: null,
      });
      own.advance(waiting.kind === 'quota' ? waiting.resetAt.getTime() - own.now() : 0);
      expect((await optimizer.optimize(w.site, assets[2]!)).kind).toBe('optimized');
      expect(await w.backupCount()).toBe(3);
    } finally {
      await w.close();
      await server.close();
    }
  });

  it('prunes backups past the retention only for settled assets, and erases a site entirely', async () => {
    const w = await world(sqlite!);
    try {
      const backups = backupStore({ blobs: w.blobs, retentionDays: 30 });
      const optimizer = w.optimizer({ backups });
      const done = w.platform.addAsset(w.site, await fixtureImage(81, 'jpeg'));
      const inFlight = w.platform.addAsset(w.site, await fixtureImage(82, 'jpeg'));
      expect((await optimizer.optimize(w.site, done)).kind).toBe('optimized');
      // The second stops after its backup (a worker died there): its backup must outlive the retention.
      let backedUp: () => void = () => {};
      const stopped = new Promise<void>((resolve) => {
        backedUp = resolve;
      });
      const stuck = w.optimizer({
        backups,
        owner: 'stuck',
        afterStep: (step) => {
          if (step !== 'backed-up') return;
          backedUp();
          return new Promise<void>(() => {});
        },
      });
      void stuck.optimize(w.site, inFlight);
      await stopped;
      clock.advance(31 * 86_400_000);
      expect(await optimizer.pruneBackups(w.site)).toBe(1);
      expect((await optimizer.ledger.get(w.site, done))?.backupKey).toBeNull();
      expect(await optimizer.restore(w.site, done)).toEqual({ kind: 'no-backup' });
      expect(await w.backupCount()).toBe(1);
      expect((await optimizer.ledger.get(w.site, inFlight))?.backupKey).not.toBeNull();
      expect(await optimizer.eraseSite(w.site)).toEqual({ assets: 2, backups: 1 });
      expect(await optimizer.ledger.list(w.site)).toEqual([]);
      expect(await w.backupCount()).toBe(0);
    } finally {
      await w.close();
    }
  });

  it('sets alt text keeping the merchant own for undo, and undoes it', async () => {
    const w = await world(sqlite!);
    try {
      const id = w.platform.addAsset(w.site, {
        ...(await fixtureImage(71, 'jpeg', 32)),
        altText: 'my own words',
      });
      const optimizer = w.optimizer();
      await optimizer.setAltText(w.site, id, 'Red chair — Acme');
      await optimizer.setAltText(w.site, id, 'Red chair, side view — Acme');
      expect((await w.platform.port.fetchAsset(w.site, id)).asset.altText).toBe(
        'Red chair, side view — Acme',
      );
      expect(await optimizer.ledger.get(w.site, id)).toMatchObject({
        altChanged: true,
        altBefore: 'my own words',
      });
      expect(await optimizer.undoAltText(w.site, id)).toBe(true);
      expect((await w.platform.port.fetchAsset(w.site, id)).asset.altText).toBe('my own words');
      expect(await optimizer.undoAltText(w.site, id)).toBe(false);
    } finally {
      await w.close();
    }
  });
});
