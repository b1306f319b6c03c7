import { describe, expect, it } from 'vitest';
import { BackupError, backupStore, sha256 } from './backups.ts';
import { testBlobDir } from './test-support.ts';
import { fixtureImage } from './testing/fixtures.ts';

const T0 = Date.parse('2026-11-25T10:00:00.000Z');
const DAY = 86_400_000;
const newBlobs = testBlobDir();

async function codeOf(work: Promise<unknown>) {
  try {
    await work;
    return 'no error';
  } catch (error) {
    return error instanceof BackupError ? error.code : String(error);
  }
}

describe('backup store (file blob store)', () => {
  it('keeps the original with its checksum once, however often it is put, and reads it back verified', async () => {
    const blobs = newBlobs();
    const backups = backupStore({ blobs });
    const { bytes } = await fixtureImage(1);
    const facts = { contentType: 'image/jpeg', filename: 'chair.jpg', now: T0 };
    const first = await backups.put('shop.example', 'gid://shopify/MediaImage/7', bytes, facts);
    const second = await backups.put('shop.example', 'gid://shopify/MediaImage/7', bytes, {
      ...facts,
      now: T0 + 5,
    });
    expect(second).toEqual(first);
    expect(first).toMatchObject({ checksum: sha256(bytes), size: bytes.byteLength, createdAt: T0 });
    const stored: string[] = [];
    for await (const entry of blobs.list('kit-backups/')) stored.push(entry.key);
    expect(stored.toSorted()).toEqual([first.key, `${first.key}.json`]);
    const read = await backups.read(first.key);
    expect(Buffer.from(read.bytes).equals(Buffer.from(bytes))).toBe(true);
  });

  it('refuses a backup whose bytes no longer match their checksum, or that is gone', async () => {
    const blobs = newBlobs();
    const backups = backupStore({ blobs });
    const { bytes } = await fixtureImage(2);
    const backup = await backups.put('shop.example', 'a', bytes, {
      contentType: 'image/jpeg',
      filename: 'a.jpg',
      now: T0,
    });
    const flipped = new Uint8Array(bytes);
    flipped[flipped.length >> 1]! ^= 0xff;
    await blobs.put(backup.key, flipped);
    expect(await codeOf(backups.read(backup.key))).toBe('CORRUPT');
    await backups.delete(backup.key);
    expect(await codeOf(backups.read(backup.key))).toBe('MISSING');
    expect(await backups.head(backup.key)).toBeUndefined();
  });

  it('lists and erases one site without touching another; with a retention, names the expired ones', async () => {
    const blobs = newBlobs();
    const backups = backupStore({ blobs, retentionDays: 30 });
    const facts = (now: number) => ({ contentType: 'image/png', filename: 'x.png', now });
    const a1 = await backups.put('a.example', 'one', (await fixtureImage(3, 'png', 24)).bytes, facts(T0));
    await backups.put('a.example', 'two', (await fixtureImage(4, 'png', 24)).bytes, facts(T0 + 20 * DAY));
    const b1 = await backups.put('b.example', 'one', (await fixtureImage(5, 'png', 24)).bytes, facts(T0));
    expect((await backups.expired('a.example', T0 + 30 * DAY)).map((b) => b.key)).toEqual([a1.key]);
    expect(await backups.expired('a.example', T0 + 29 * DAY)).toEqual([]);
    const listed: string[] = [];
    for await (const backup of backups.list('a.example')) listed.push(backup.assetId);
    expect(listed.toSorted()).toEqual(['one', 'two']);
    expect(await backups.eraseSite('a.example')).toBe(2);
    for await (const _ of backups.list('a.example')) throw new Error('a.example still has a backup');
    expect(await backups.head(b1.key)).toEqual(b1);
    expect(() => backupStore({ blobs, retentionDays: 0 })).toThrow(/retentionDays must be a positive number/);
    expect(await backupStore({ blobs }).expired('b.example', T0 + 10_000 * DAY)).toEqual([]);
  });
});
