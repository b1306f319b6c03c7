import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  filesUnder,
  HOSTILE_DISPOSITIONS,
  HOSTILE_FORMATS,
  type HostileServer,
  startHostileServer,
} from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Connected, connect, errorOf, PHOTO, workDir } from './test-support.ts';

/**
 * The MCP server writes through @compresso/client, so the client's rule for names from the server
 * is what keeps an assistant's writes inside the folder it named; shown here through the tools.
 */
let hostile: HostileServer;
let mcp: Connected;
const work = workDir('hostile');

beforeAll(async () => {
  hostile = await startHostileServer();
  mcp = await connect({ apiKey: 'cmp_live_test', baseUrl: hostile.url, maxRetries: 0 });
});
afterAll(async () => {
  await mcp?.close();
  await hostile?.close();
  work.cleanup();
});

describe('compress_image and compress_batch against a hostile server', () => {
  it('a hostile Content-Disposition never names the file: <source name>.<ext> inside output_path', async () => {
    const root = join(work.dir, 'disposition');
    const out = join(root, 'a', 'b', 'out');
    const src = join(root, 'a', 'b', 'src');
    mkdirSync(out, { recursive: true });
    mkdirSync(src, { recursive: true });
    const photo = join(src, 'photo.jpg');
    copyFileSync(PHOTO, photo);
    for (const disposition of HOSTILE_DISPOSITIONS) {
      hostile.queue.push({ disposition });
      const result = await mcp.call('compress_image', {
        file_path: photo,
        output_path: out,
        output_format: 'webp',
        overwrite: true,
        include_image: false,
      });
      expect(result.isError, disposition).toBeFalsy();
      expect((result.structuredContent as { output_path: string }).output_path).toBe(join(out, 'photo.webp'));
    }
    for (const disposition of HOSTILE_DISPOSITIONS.slice(0, 3)) hostile.queue.push({ disposition });
    const batch = await mcp.call('compress_batch', {
      file_paths: [photo, photo, photo],
      output_dir: join(out, 'batch'),
    });
    expect((batch.structuredContent as { succeeded: number }).succeeded).toBe(3);
    expect(filesUnder(root)).toEqual([
      'a/b/out/batch/photo-2.webp',
      'a/b/out/batch/photo-3.webp',
      'a/b/out/batch/photo.webp',
      'a/b/out/photo.webp',
      'a/b/src/photo.jpg',
    ]);
  });

  it('an X-Output-Format carrying a path is refused (INVALID_RESPONSE) and nothing is written', async () => {
    const root = join(work.dir, 'format');
    const out = join(root, 'a', 'b', 'out');
    mkdirSync(out, { recursive: true });
    const photo = join(root, 'a', 'b', 'photo.jpg');
    copyFileSync(PHOTO, photo);
    for (const format of HOSTILE_FORMATS) {
      // Into a directory, and beside the source (the default).
      for (const args of [{ output_path: out }, {}]) {
        hostile.queue.push({ format });
        const result = await mcp.call('compress_image', { file_path: photo, include_image: false, ...args });
        expect(result.isError, format).toBe(true);
        expect(errorOf(result).code).toBe('INVALID_RESPONSE');
      }
    }
    for (const format of HOSTILE_FORMATS) hostile.queue.push({ format });
    const batch = await mcp.call('compress_batch', {
      file_paths: HOSTILE_FORMATS.map(() => photo),
      output_dir: out,
    });
    expect((batch.structuredContent as { failed: number }).failed).toBe(HOSTILE_FORMATS.length);
    expect(filesUnder(root)).toEqual(['a/b/photo.jpg']);
    expect(filesUnder(work.dir).filter((f) => f.includes('escaped'))).toEqual([]);
  });
});
