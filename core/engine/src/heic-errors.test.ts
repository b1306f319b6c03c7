import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { CompressoError } from '@compresso/schema';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine } from './engine.ts';
import { closeHeicDecoder } from './heic.ts';
import { CORPUS_DIR, corpus } from './test-support/corpus.ts';

afterAll(() => closeHeicDecoder());

describe('a broken HEIC', () => {
  it("is CORRUPT_IMAGE with libheif's own reason, not a generic one", async () => {
    const dune = corpus('photo-heic-mate-Dune.heic');
    const error = await createEngine()
      .optimize(dune.subarray(0, dune.length >> 1))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CompressoError);
    expect((error as CompressoError).code).toBe('CORRUPT_IMAGE');
    expect((error as CompressoError).message).toMatch(/outside of file bounds/);
    expect((error as CompressoError).message).not.toMatch(/HEIF image not found/);
  });

  it('prints nothing: libheif writes its reasons to console.log, which the worker keeps to itself', async () => {
    // A child process, because vitest itself intercepts console output.
    const script = `
      import { createEngine } from './src/engine.ts';
      import { closeHeicDecoder } from './src/heic.ts';
      import { readFileSync } from 'node:fs';
      const dune = readFileSync(${JSON.stringify(resolve(CORPUS_DIR, 'photo-heic-mate-Dune.heic'))});
      const error = await createEngine().optimize(dune.subarray(0, dune.length >> 1)).catch((e) => e);
      await closeHeicDecoder();
      process.stderr.write(error.code);
    `;
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--input-type=module', '--eval', script],
      { cwd: resolve(import.meta.dirname, '..') },
    );
    expect(stderr).toBe('CORRUPT_IMAGE');
    expect(stdout).toBe('');
  });
});
