import { assetLedger, backupStore, sha256 } from '@compresso/integration-kit';
import type { QueueEvent } from '@compresso/runtime';
import { expect } from 'vitest';
import type { Harness } from './test-harness.ts';

/**
 * The end state every fault test asks for, from three sides — the ledger, the fake Shopify and the
 * backups: no original lost (each image's one backup holds its original, byte for byte) and no image
 * half-replaced (Shopify serves a READY file that is either the untouched original or our one
 * replacement, and the ledger says which, with nothing left `replacing`).
 */
export async function expectIntact(
  h: Harness,
  shop: string,
  images: { id: string; original: Buffer; replaced: boolean }[],
): Promise<void> {
  const ledger = assetLedger(h.app.db);
  const backups = backupStore({ blobs: h.app.blobs, prefix: 'shopify-backups' });
  const kept = new Map<string, { checksum: string; key: string }[]>();
  for await (const backup of backups.list(shop)) {
    const list = kept.get(backup.assetId) ?? [];
    list.push({ checksum: backup.checksum, key: backup.key });
    kept.set(backup.assetId, list);
  }
  for (const { id, original, replaced } of images) {
    const file = h.fake.file(id);
    const record = await ledger.get(shop, id);
    const where = `${id}: ${JSON.stringify({ state: record?.state, error: record?.lastError, version: file?.version })}`;
    expect(file?.status, where).toBe('READY');
    expect(record?.leaseOwner ?? null, where).toBeNull();
    if (replaced) {
      // Replaced exactly once (the CDN version counts content changes), by a smaller file, recorded.
      expect(file?.version, where).toBe(2);
      expect(file!.bytes.length, where).toBeLessThan(original.length);
      expect(record?.state, where).toBe('optimized');
      expect(record?.currentHash, where).toBe(sha256(file!.bytes));
      expect(record?.originalHash, where).toBe(sha256(original));
      expect(record?.pendingHash ?? null, where).toBeNull();
    } else {
      expect(file?.version, where).toBe(1);
      expect(file!.bytes.equals(original), where).toBe(true);
      expect(record?.state, where).not.toBe('optimized');
      expect(record?.state, where).not.toBe('replacing');
    }
    // At most one backup, and where the image was backed up (always when replaced), it is the original.
    const copies = kept.get(id) ?? [];
    expect(copies.length, where).toBeLessThanOrEqual(1);
    if (replaced) expect(copies.length, where).toBe(1);
    for (const copy of copies) {
      expect(copy.checksum, where).toBe(sha256(original));
      expect(Buffer.from((await backups.read(copy.key)).bytes).equals(original), where).toBe(true);
    }
  }
}

/** Queue events of one process, and the end of a job waited for on them (no polling, no sleeps). */
export function jobEvents(queue: { on(listener: (event: QueueEvent) => void): () => void }) {
  const events: QueueEvent[] = [];
  queue.on((event) => events.push(event));
  return {
    events,
    /** The job's completion, or its last failure (no retry left). */
    finished(id: string): Promise<QueueEvent> {
      const done = (e: QueueEvent) =>
        'id' in e && e.id === id && (e.type === 'completed' || (e.type === 'failed' && !e.willRetry));
      const seen = events.find(done);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => {
        const stop = queue.on((e) => {
          if (done(e)) {
            stop();
            resolve(e);
          }
        });
      });
    },
  };
}

/**
 * A condition polled until true (every 25 ms, as the queue battery's `until`), for a state that has
 * no event of its own — e.g. the HTTP process's queue connection back after a Redis restart (ioredis
 * retries on its own schedule, up to 2 s apart).
 */
export async function until(check: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`still not so after ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
