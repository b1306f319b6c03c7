import { closeSync, openSync, readdirSync, readSync } from 'node:fs';
import { extname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sniffImage } from './paths.ts';
import { CORPUS } from './test-support.ts';

function head(path: string): Uint8Array {
  const fd = openSync(path, 'r');
  try {
    const buffer = new Uint8Array(16);
    const n = readSync(fd, buffer, 0, 16, 0);
    return buffer.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

describe('sniffImage', () => {
  it('recognises every image of the corpus by its first bytes, as the format its extension names', () => {
    const expected: Record<string, string> = { '.jpg': 'jpeg', '.png': 'png', '.heic': 'heif' };
    const files = readdirSync(CORPUS).filter((f) => extname(f) in expected);
    expect(files.length).toBeGreaterThan(20);
    for (const file of files)
      expect(sniffImage(head(join(CORPUS, file))), file).toBe(expected[extname(file)]);
  });

  it('knows WebP, AVIF, GIF and TIFF headers, and says nothing about text or truncated headers', () => {
    const bytes = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));
    expect(sniffImage(bytes('RIFF\x10\x00\x00\x00WEBPVP8 '))).toBe('webp');
    expect(sniffImage(bytes('\x00\x00\x00\x1cftypavif\x00\x00'))).toBe('avif');
    expect(sniffImage(bytes('\x00\x00\x00\x18ftypmif1\x00\x00'))).toBe('heif');
    expect(sniffImage(bytes('GIF89a\x01\x00'))).toBe('gif');
    expect(sniffImage(bytes('II*\x00\x08\x00'))).toBe('tiff');
    expect(sniffImage(bytes('MM\x00*\x00\x00'))).toBe('tiff');
    expect(sniffImage(bytes('<svg xmlns='))).toBeUndefined();
    expect(sniffImage(bytes('\x00\x00\x00\x1cftypisom'))).toBeUndefined(); // an MP4 video
    expect(sniffImage(bytes('\xff\xd8'))).toBeUndefined();
    expect(sniffImage(new Uint8Array())).toBeUndefined();
  });
});
