import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { proAccount, startTestServer, type TestServer } from '@compresso/server/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  BadRequestError,
  type BatchProgress,
  Compresso,
  UnsupportedImageError,
} from './index.ts';
import { CORPUS, PHOTO, PNG, truncated, workDir } from './test-support.ts';

let srv: TestServer;
let client: Compresso;
const work = workDir('batch');

const SOURCES = [
  'photo-skimage-rocket.jpg',
  'photo-mate-LadyBird.jpg',
  'photo-skimage-chelsea.png',
  'icon-oxygen-konqueror.png',
  'screenshot-gimp-multi-window.png',
  'photo-skimage-hubble_deep_field.jpg',
];

beforeAll(async () => {
  srv = await startTestServer({ dbPath: join(work.dir, 'server.sqlite') });
  const { key } = await proAccount(srv.db, 'batch@example.com');
  client = new Compresso(key, { baseUrl: srv.url });
});
afterAll(async () => {
  await srv?.close();
  work.cleanup();
});

describe('compressBatch', () => {
  it('50 files with 3 corrupt: 47 results and 3 clear errors, in input order, with a progress event each', async () => {
    const inputs = join(work.dir, 'in');
    mkdirSync(inputs);
    // Real corpus images made small (the test is about the batch, not about big images).
    const paths: string[] = [];
    for (let i = 0; i < 50; i++) {
      const source = SOURCES[i % SOURCES.length]!;
      const ext = source.endsWith('.png') ? 'png' : 'jpg';
      const path = join(inputs, `image-${String(i).padStart(2, '0')}.${ext}`);
      await sharp(join(CORPUS, source))
        .resize(160, 160, { fit: 'inside' })
        .toFormat(ext === 'png' ? 'png' : 'jpeg', { quality: 95 })
        .toFile(path);
      paths.push(path);
    }
    const corrupt = { 7: 'CORRUPT_IMAGE', 23: 'NOT_AN_IMAGE', 41: 'EMPTY_FILE' } as const;
    writeFileSync(paths[7]!, truncated(PHOTO));
    writeFileSync(paths[23]!, 'these are not the pixels you are looking for\n'.repeat(10));
    writeFileSync(paths[41]!, '');

    const events: BatchProgress[] = [];
    const outputDir = join(work.dir, 'out');
    const items = await client.compressBatch(paths, {
      outputDir,
      format: 'webp',
      quality: 75,
      concurrency: 3,
      onProgress: (event) => events.push(event),
    });

    expect(items).toHaveLength(50);
    expect(items.map((item) => item.index)).toEqual([...Array(50).keys()]);
    expect(items.filter((item) => item.ok)).toHaveLength(47);
    const failed = items.filter((item) => !item.ok);
    expect(failed.map((item) => [item.index, item.input, item.error?.code])).toEqual(
      Object.entries(corrupt).map(([index, code]) => [Number(index), paths[Number(index)], code]),
    );
    for (const item of failed) {
      expect(item.error).toBeInstanceOf(UnsupportedImageError);
      expect(item.error!.message.length).toBeGreaterThan(10);
      expect(item.error!.requestId).toMatch(/.+/);
    }
    for (const item of items) {
      if (!item.ok) continue;
      expect(item.input).toBe(paths[item.index]);
      expect(item.result.outputPath).toBe(
        join(outputDir, `image-${String(item.index).padStart(2, '0')}.webp`),
      );
      expect(readFileSync(item.result.outputPath!)).toEqual(item.result.data);
      expect(item.result.format).toBe('webp');
      expect((await sharp(item.result.outputPath!).metadata()).format).toBe('webp');
    }

    expect(events).toHaveLength(50);
    expect(events.map((e) => e.completed)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(new Set(events.map((e) => e.item.index)).size).toBe(50);
    expect(events.every((e) => e.total === 50)).toBe(true);
  });

  it('names used twice get -2; without outputDir each lands beside its input; bytes are kept, not written', async () => {
    const a = join(work.dir, 'a');
    const b = join(work.dir, 'b');
    mkdirSync(a);
    mkdirSync(b);
    const first = work.copy(PHOTO, 'a/photo.jpg');
    const second = work.copy(PHOTO, 'b/photo.jpg');
    const outputDir = join(work.dir, 'twice');
    // An input already named photo-2 keeps its name; the second photo takes the next free one.
    const third = work.copy(PHOTO, 'b/photo-2.jpg');
    const items = await client.compressBatch([first, second, readFileSync(PHOTO), third], {
      outputDir,
      maxDimension: 64,
    });
    expect(items.map((item) => item.result?.outputPath)).toEqual([
      join(outputDir, 'photo.jpg'),
      join(outputDir, 'photo-3.jpg'),
      join(outputDir, 'image-3.jpg'),
      join(outputDir, 'photo-2.jpg'),
    ]);
    expect(items.every((item) => item.ok)).toBe(true);
    expect(items.map((item) => item.input)).toEqual([first, second, '#2', third]);

    const beside = await client.compressBatch([first, readFileSync(PHOTO)], {
      maxDimension: 64,
      format: 'png',
    });
    expect(beside[0]!.result?.outputPath).toBe(join(a, 'photo.min.png'));
    expect(existsSync(join(a, 'photo.min.png'))).toBe(true);
    expect(beside[1]!.result?.outputPath).toBeNull();
    expect(beside[1]!.result?.data.length).toBeGreaterThan(0);

    // Beside their inputs, twin.jpg and twin.png both become twin.min.webp: the first written stays,
    // the second is refused with CONFLICT instead of replacing it.
    const twins = [work.copy(PHOTO, 'a/twin.jpg'), work.copy(PNG, 'a/twin.png')];
    const clash = await client.compressBatch(twins, { maxDimension: 64, format: 'webp', concurrency: 1 });
    expect(clash[0]!.result?.outputPath).toBe(join(a, 'twin.min.webp'));
    expect(clash[1]!.ok).toBe(false);
    expect(clash[1]!.error).toBeInstanceOf(BadRequestError);
    expect(clash[1]!.error?.code).toBe('CONFLICT');
    expect(readFileSync(join(a, 'twin.min.webp'))).toEqual(clash[0]!.result?.data);
  });

  it('a refused key fails every item with the same error without sending the rest', async () => {
    const bad = new Compresso('cmp_live_not-a-real-key-at-all-but-long-enough-1234', { baseUrl: srv.url });
    const before = srv.logLines.filter((l) => l['path'] === '/api/v1/compress').length;
    const items = await bad.compressBatch(Array(10).fill(PHOTO), { concurrency: 2 });
    expect(items.every((item) => !item.ok && item.error instanceof AuthenticationError)).toBe(true);
    expect(items[9]!.error?.code).toBe('INVALID_API_KEY');
    const sent = srv.logLines.filter((l) => l['path'] === '/api/v1/compress').length - before;
    expect(sent).toBeLessThanOrEqual(2);
  });

  it('an empty batch is an empty answer', async () => {
    expect(await client.compressBatch([])).toEqual([]);
  });
});
