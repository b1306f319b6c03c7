import { createHash } from 'node:crypto';
import { createReadStream, readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Readable } from 'node:stream';
import type { BlobStore } from '@compresso/runtime';
import { describe, expect, it } from 'vitest';

export const CORPUS_DIR = resolve(import.meta.dirname, '../../../shared/corpus');
const corpusFiles = () =>
  readdirSync(CORPUS_DIR)
    .filter((f) => /\.(jpe?g|png|webp|gif|avif|heic)$/i.test(f))
    .sort();

/** Array.fromAsync, which the es2024 typings lack. */
export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

async function drain(stream: Readable): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return new Uint8Array(Buffer.concat(chunks));
}

/** Every corpus image one after the other (≈16 MB): more than one part of a multipart upload. */
function corpusStream(): { stream: Readable; bytes: Promise<Uint8Array> } {
  const files = corpusFiles();
  const all = Buffer.concat(files.map((f) => readFileSync(resolve(CORPUS_DIR, f))));
  async function* chunks() {
    for (const f of files) yield* createReadStream(resolve(CORPUS_DIR, f));
  }
  return { stream: Readable.from(chunks()), bytes: Promise.resolve(new Uint8Array(all)) };
}

/**
 * The behaviour every BlobStore backend must have. `open` returns a fresh, empty store (its own
 * directory or bucket); the battery closes it.
 */
export function describeBlobStoreBattery(backend: string, open: () => Promise<BlobStore>): void {
  describe(`BlobStore battery: ${backend}`, () => {
    const withStore = (test: (store: BlobStore) => Promise<void>) => async () => {
      const store = await open();
      try {
        await test(store);
      } finally {
        await store.close();
      }
    };

    it(
      'stores bytes with their content type, replaces them, and says when a key is missing',
      withStore(async (store) => {
        await store.ping();
        const photo = new Uint8Array(readFileSync(resolve(CORPUS_DIR, 'photo-mate-RainDrops.jpg')));
        const before = Date.now();
        const stored = await store.put('jobs/1/in/raindrops.jpg', photo, { contentType: 'image/jpeg' });
        expect(stored).toMatchObject({
          key: 'jobs/1/in/raindrops.jpg',
          size: photo.byteLength,
          contentType: 'image/jpeg',
        });
        // Second-precision clocks (S3's Last-Modified) round down.
        expect(stored.lastModified.getTime()).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
        const got = await store.get('jobs/1/in/raindrops.jpg');
        expect(got?.info).toMatchObject({ size: photo.byteLength, contentType: 'image/jpeg' });
        expect(sha(got?.bytes ?? new Uint8Array())).toBe(sha(photo));
        expect(await store.head('jobs/1/in/raindrops.jpg')).toMatchObject({ size: photo.byteLength });

        const small = new TextEncoder().encode('{"ok":true}');
        await store.put('jobs/1/in/raindrops.jpg', small);
        const replaced = await store.get('jobs/1/in/raindrops.jpg');
        expect(replaced?.info).toMatchObject({
          size: small.byteLength,
          contentType: 'application/octet-stream',
        });
        expect(new TextDecoder().decode(replaced?.bytes)).toBe('{"ok":true}');

        expect(await store.get('jobs/1/in/nothing.jpg')).toBeUndefined();
        expect(await store.getStream('jobs/1/in/nothing.jpg')).toBeUndefined();
        expect(await store.head('jobs/2/anything')).toBeUndefined();
        const empty = await store.put('empty', new Uint8Array());
        expect(empty.size).toBe(0);
        expect((await store.get('empty'))?.bytes.byteLength).toBe(0);
      }),
    );

    it(
      'streams in and out: a Node stream of ≈16 MB of images, and a web ReadableStream',
      withStore(async (store) => {
        const { stream, bytes } = corpusStream();
        const expected = await bytes;
        expect(expected.byteLength).toBeGreaterThan(9 * 1024 * 1024);
        const stored = await store.put('backups/corpus.bin', stream, { contentType: 'application/x-corpus' });
        expect(stored.size).toBe(expected.byteLength);
        const out = await store.getStream('backups/corpus.bin');
        expect(out?.info).toMatchObject({ size: expected.byteLength, contentType: 'application/x-corpus' });
        expect(sha(await drain(out?.stream as Readable))).toBe(sha(expected));

        const logo = new Uint8Array(readFileSync(resolve(CORPUS_DIR, 'graphic-skimage-logo.png')));
        const web = new ReadableStream<Uint8Array>({
          start(controller) {
            for (let i = 0; i < logo.byteLength; i += 65_536) controller.enqueue(logo.slice(i, i + 65_536));
            controller.close();
          },
        });
        await store.put('logo.png', web, { contentType: 'image/png' });
        expect(sha((await store.get('logo.png'))?.bytes ?? new Uint8Array())).toBe(sha(logo));
      }),
    );

    it(
      'a put whose stream fails keeps the old blob',
      withStore(async (store) => {
        await store.put('result.webp', new TextEncoder().encode('old'));
        async function* broken() {
          yield Buffer.alloc(100_000, 1);
          throw new Error('client went away');
        }
        await expect(store.put('result.webp', Readable.from(broken()))).rejects.toThrow(/client went away/);
        expect(new TextDecoder().decode((await store.get('result.webp'))?.bytes)).toBe('old');
        expect((await collect(store.list())).map((e) => e.key)).toEqual(['result.webp']);
      }),
    );

    it(
      'deletes (a missing key is fine); a key may also start other keys',
      withStore(async (store) => {
        const one = new Uint8Array([1]);
        await store.put('a', one);
        await store.put('a/b', one);
        await store.put('a/b/c', one);
        await store.delete('a/b');
        expect(await store.head('a/b')).toBeUndefined();
        expect(await store.head('a')).toBeDefined();
        expect(await store.head('a/b/c')).toBeDefined();
        await store.delete('a/b');
        await store.delete('never/was');
        await store.delete('a/b/c');
        expect((await collect(store.list())).map((e) => e.key)).toEqual(['a']);
      }),
    );

    it(
      'lists by prefix (a plain string prefix, not a directory)',
      withStore(async (store) => {
        const keys = [
          'jobs/1/out/a.webp',
          'jobs/10/in/b.png',
          'jobs/1/in/a.jpg',
          'jobs-x',
          'other',
          'jobs/1/in/a.jpg.meta',
        ];
        for (const [i, key] of keys.entries()) await store.put(key, new Uint8Array(i + 1));
        // Order is not part of the contract: S3 lists in byte order, some S3-compatible servers do not.
        const list = async (prefix?: string) => (await collect(store.list(prefix))).map((e) => e.key).sort();
        expect(await list()).toEqual([...keys].sort());
        expect(await list('jobs/1/')).toEqual([
          'jobs/1/in/a.jpg',
          'jobs/1/in/a.jpg.meta',
          'jobs/1/out/a.webp',
        ]);
        expect(await list('jobs/1')).toEqual([
          'jobs/1/in/a.jpg',
          'jobs/1/in/a.jpg.meta',
          'jobs/1/out/a.webp',
          'jobs/10/in/b.png',
        ]);
        expect(await list('jobs/1/in/a')).toEqual(['jobs/1/in/a.jpg', 'jobs/1/in/a.jpg.meta']);
        expect(await list('nothing/')).toEqual([]);
        const [entry] = await collect(store.list('jobs/10/'));
        expect(entry).toMatchObject({ key: 'jobs/10/in/b.png', size: 2 });
        expect(entry?.lastModified).toBeInstanceOf(Date);
      }),
    );

    it(
      'refuses keys that could leave the store or be ambiguous, naming the key',
      withStore(async (store) => {
        const bad = [
          '../etc/passwd',
          '/etc/passwd',
          'a//b',
          'a/./b',
          'a/../b',
          '.hidden',
          'a/b/',
          'a\\b',
          'a b',
          '',
          'x'.repeat(513),
          'a~',
        ];
        for (const key of bad) {
          for (const attempt of [
            () => store.put(key, new Uint8Array([1])),
            () => store.get(key),
            () => store.getStream(key),
            () => store.head(key),
            () => store.delete(key),
          ]) {
            await expect(attempt(), key).rejects.toThrow(/blob key/);
          }
        }
        await expect(collect(store.list('../'))).rejects.toThrow(/blob key/);
        expect(await collect(store.list())).toEqual([]);
      }),
    );
  });
}
