import { describe, expect, it } from 'vitest';
import { assetLedger } from './ledger.ts';
import { kitSql } from './sql.ts';
import { type Backend, testBackends } from './test-support.ts';

const T0 = Date.parse('2026-11-25T10:00:00.000Z');
const LEASE = 60_000;

/** The asset ledger's battery: the same cases on each backend. */
function describeLedgerBattery(backend: Backend): void {
  describe(`asset ledger: ${backend.name}`, () => {
    it('creates a record with its first lease; one owner at a time; a lease that ran out is taken over', async () => {
      const db = await backend.open();
      try {
        const ledger = assetLedger(db);
        const first = await ledger.claim('s.example', 'a1', 'worker-1', T0, LEASE);
        expect(first).toMatchObject({
          state: 'new',
          attempts: 0,
          leaseOwner: 'worker-1',
          leaseUntil: T0 + LEASE,
        });
        expect(await ledger.claim('s.example', 'a1', 'worker-2', T0 + 1000, LEASE)).toBeUndefined();
        // The holder may renew its own lease.
        expect((await ledger.claim('s.example', 'a1', 'worker-1', T0 + 2000, LEASE))?.leaseUntil).toBe(
          T0 + 2000 + LEASE,
        );
        // Run out: the next claimant wins, and the old holder can no longer write.
        const taken = await ledger.claim('s.example', 'a1', 'worker-2', T0 + 2000 + LEASE, LEASE);
        expect(taken?.leaseOwner).toBe('worker-2');
        expect(
          await ledger.update('s.example', 'a1', 'worker-1', { state: 'failed' }, T0 + 2000 + LEASE),
        ).toBe(false);
        expect((await ledger.get('s.example', 'a1'))?.state).toBe('new');
        await ledger.release('s.example', 'a1', 'worker-1'); // not the holder: nothing happens
        expect((await ledger.get('s.example', 'a1'))?.leaseOwner).toBe('worker-2');
        await ledger.release('s.example', 'a1', 'worker-2');
        expect(await ledger.get('s.example', 'a1')).toMatchObject({ leaseOwner: null, leaseUntil: 0 });
        expect(
          (await ledger.claim('s.example', 'a1', 'worker-3', T0 + 2001 + LEASE, LEASE))?.leaseOwner,
        ).toBe('worker-3');
      } finally {
        await db.close();
      }
    });

    it('of 20 claimants at once on a new asset, exactly one wins', async () => {
      const db = await backend.open();
      try {
        const ledger = assetLedger(db);
        const wins = await Promise.all(
          Array.from({ length: 20 }, (_, i) => ledger.claim('s.example', 'race', `w${i}`, T0, LEASE)),
        );
        expect(wins.filter(Boolean)).toHaveLength(1);
      } finally {
        await db.close();
      }
    });

    it('keeps every field a lease holder writes, sizes past 32 bits included, across a reopen', async () => {
      const place = backend.place();
      const db = await backend.open(place);
      const patch = {
        state: 'optimized' as const,
        contentType: 'image/jpeg',
        filename: 'chair.jpg',
        originalHash: 'a'.repeat(64),
        originalSize: 5_000_000_000,
        currentHash: 'b'.repeat(64),
        currentSize: 3_000_000_000,
        backupKey: 'kit-backups/x/y/z',
        attempts: 2,
        lastError: 'UNAVAILABLE: try later',
        altChanged: true,
        altBefore: null,
        altWritten: 'A red chair',
      };
      try {
        const ledger = assetLedger(db);
        await ledger.claim('s.example', 'gid://shopify/MediaImage/1', 'w', T0, LEASE);
        expect(await ledger.update('s.example', 'gid://shopify/MediaImage/1', 'w', patch, T0 + 5)).toBe(true);
      } finally {
        await db.close();
      }
      const again = await backend.open(place);
      try {
        expect(await assetLedger(again).get('s.example', 'gid://shopify/MediaImage/1')).toMatchObject({
          ...patch,
          updatedAt: T0 + 5,
          createdAt: T0,
        });
        const versions = await kitSql(again).all(
          'SELECT version FROM kit_schema_migrations ORDER BY version',
        );
        expect(versions.map((r) => Number(r.version))).toEqual([1, 2, 3]);
      } finally {
        await again.close();
      }
    });

    it('lists by state in pages and totals the savings; erasing a site leaves the others', async () => {
      const db = await backend.open();
      try {
        const ledger = assetLedger(db);
        const put = async (
          site: string,
          id: string,
          state: 'optimized' | 'skipped',
          before: number,
          after: number,
        ) => {
          await ledger.claim(site, id, 'w', T0, LEASE);
          await ledger.update(site, id, 'w', { state, originalSize: before, currentSize: after }, T0);
          await ledger.release(site, id, 'w');
        };
        for (let i = 1; i <= 5; i++)
          await put('a.example', `id-${i}`, i <= 3 ? 'optimized' : 'skipped', 1000, 600);
        await put('b.example', 'id-1', 'optimized', 50, 10);
        const first = await ledger.list('a.example', { state: 'optimized', limit: 2 });
        expect(first.map((r) => r.assetId)).toEqual(['id-1', 'id-2']);
        const rest = await ledger.list('a.example', { state: 'optimized', after: 'id-2' });
        expect(rest.map((r) => r.assetId)).toEqual(['id-3']);
        const totals = await ledger.totals('a.example');
        expect(totals.states).toMatchObject({ optimized: 3, skipped: 2, new: 0, failed: 0 });
        expect(totals).toMatchObject({ bytesBefore: 3000, bytesAfter: 1800 });
        expect(await ledger.eraseSite('a.example')).toBe(5);
        expect(await ledger.list('a.example')).toEqual([]);
        expect(await ledger.get('b.example', 'id-1')).toBeDefined();
      } finally {
        await db.close();
      }
    });
  });
}

for (const backend of testBackends()) describeLedgerBattery(backend);
