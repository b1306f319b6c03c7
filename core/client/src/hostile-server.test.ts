import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  filesUnder,
  HOSTILE_DISPOSITIONS,
  HOSTILE_FORMATS,
  type HostileServer,
  startHostileServer,
} from '@compresso/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Compresso, type CompressoError, dispositionFileName, safeFileName } from './index.ts';
import { PHOTO, rejection, workDir } from './test-support.ts';

let hostile: HostileServer;
let client: Compresso;
const work = workDir('hostile');

beforeAll(async () => {
  hostile = await startHostileServer();
  client = new Compresso('cmp_live_test', { baseUrl: hostile.url, maxRetries: 0 });
});
afterAll(async () => {
  await hostile?.close();
  work.cleanup();
});

describe('a hostile server cannot steer a write outside the chosen folder', () => {
  it('Content-Disposition: separators, .., absolute, drive letters, control characters, RFC 8187 → the input-derived name', async () => {
    // The chosen folder sits three levels down, so ../../.. stays inside the test's own folder.
    const root = join(work.dir, 'disposition');
    const out = join(root, 'a', 'b', 'out');
    mkdirSync(out, { recursive: true });
    const bytes = readFileSync(PHOTO);
    for (const disposition of HOSTILE_DISPOSITIONS) {
      hostile.queue.push({ disposition });
      const result = await client.compress(bytes, { output: `${out}/`, overwrite: true });
      expect(result.outputPath, disposition).toBe(join(out, 'image.webp'));
      // The name handed back is the safe one too: a caller that writes it itself is just as safe.
      expect(result.filename, disposition).toBe('image.webp');
    }
    expect(hostile.sent).toEqual(HOSTILE_DISPOSITIONS);
    expect(filesUnder(root)).toEqual(['a/b/out/image.webp']);

    // A named Blob takes its stem from its own name, whatever the server says.
    hostile.queue.push({ disposition: "attachment; filename*=UTF-8''..%2F..%2Fx.webp" });
    const named = await client.compress(new File([bytes], 'holiday.jpg'), { output: `${out}/` });
    expect(named.outputPath).toBe(join(out, 'holiday.webp'));
    expect(filesUnder(root)).toEqual(['a/b/out/holiday.webp', 'a/b/out/image.webp']);

    // An honest name is still used.
    hostile.queue.push({ disposition: 'attachment; filename="sunset.webp"' });
    const honest = await client.compress(bytes, { output: `${out}/` });
    expect(honest.outputPath).toBe(join(out, 'sunset.webp'));
  });

  it('X-Output-Format that carries a path: INVALID_RESPONSE, nothing written (compress and batch)', async () => {
    const root = join(work.dir, 'format');
    const out = join(root, 'a', 'b', 'out');
    mkdirSync(out, { recursive: true });
    const input = work.copy(PHOTO, 'photo.jpg');
    for (const format of HOSTILE_FORMATS) {
      hostile.queue.push({ format });
      const error = (await rejection(client.compress(input, { output: `${out}/` }))) as CompressoError;
      expect(error.code, format).toBe('INVALID_RESPONSE');
      expect(error.message).toContain('X-Output-Format');
      hostile.queue.push({ format });
      const beside = (await rejection(client.compress(input))) as CompressoError;
      expect(beside.code, format).toBe('INVALID_RESPONSE');
    }
    for (const format of HOSTILE_FORMATS) hostile.queue.push({ format });
    const items = await client.compressBatch(
      HOSTILE_FORMATS.map(() => input),
      { outputDir: out, concurrency: 1 },
    );
    expect(items.map((item) => (item.ok ? 'ok' : item.error.code))).toEqual(
      HOSTILE_FORMATS.map(() => 'INVALID_RESPONSE'),
    );
    expect(filesUnder(root)).toEqual([]);
    expect(filesUnder(work.dir).filter((f) => f.includes('escaped'))).toEqual([]);
  });

  it('the rule itself', () => {
    for (const name of ['image.webp', 'photo one.jpg', 'Ünïcødé.webp', '.hidden.webp', 'a..b.webp']) {
      expect(safeFileName(name), name).toBe(name);
    }
    for (const name of [
      '',
      '.',
      '..',
      '...',
      'a/b',
      '/x',
      'a\\b',
      'C:x',
      'x:y',
      'a\nb',
      'a\u0085b',
      'x'.repeat(256),
    ]) {
      expect(safeFileName(name), JSON.stringify(name)).toBeUndefined();
    }
    expect(dispositionFileName('attachment; filename="a.webp"; filename*=UTF-8\'\'b%C3%A9.webp')).toBe(
      'bé.webp',
    );
    expect(dispositionFileName("attachment; filename*=iso-8859-1''caf%E9.webp")).toBe('café.webp');
    expect(dispositionFileName('attachment; filename="q\\"uote.webp"')).toBe('q"uote.webp');
    expect(dispositionFileName('attachment; filename=plain.webp')).toBe('plain.webp');
    expect(
      dispositionFileName('attachment; filename*=UTF-8\'\'%E0%A4%A.webp; filename="fallback.webp"'),
    ).toBe('fallback.webp');
    expect(dispositionFileName('inline')).toBeUndefined();
  });
});
