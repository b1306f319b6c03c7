import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { CompressoError } from '@compresso/schema';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine } from './engine.ts';
import { closeHeicDecoder, decodeHeic, heicDecoderStats, heicDimensions, heicMetadata } from './heic.ts';
import { DEFAULT_LIMITS } from './limits.ts';
import { corpus } from './test-support/corpus.ts';
import { loopTurnsBefore } from './test-support/loop-turns.ts';

const dune = corpus('photo-heic-mate-Dune.heic');
const rocket = corpus('photo-heic-rocket.heic');
const engine = createEngine({ concurrency: 2 });

afterAll(() => closeHeicDecoder());

describe('HEIC input', () => {
  it('reads the declared size from the container without decoding', () => {
    expect(heicDimensions(dune)).toEqual({ width: 1680, height: 1050 });
    expect(heicDimensions(rocket)).toEqual({ width: 640, height: 428 });
  });

  it('compresses to JPEG by default, and the result decodes', async () => {
    const { data, info } = await engine.optimize(dune);
    expect(info).toMatchObject({ input_format: 'heif', output_format: 'jpeg', width: 1680, height: 1050 });
    const meta = await sharp(data).metadata();
    expect(meta).toMatchObject({ format: 'jpeg', width: 1680, height: 1050, channels: 3 });
    // The photo is a blue sky over sand: the top must stay blue after the trip through the worker.
    const { data: px } = await sharp(data)
      .extract({ left: 10, top: 10, width: 1, height: 1 })
      .raw()
      .toBuffer({ resolveWithObject: true });
    expect(px[2]!).toBeGreaterThan(px[0]! + 40);
  });

  it('compresses to WebP and AVIF', async () => {
    for (const output_format of ['webp', 'avif'] as const) {
      const { data, info } = await engine.optimize(rocket, { output_format, max_dimension: 320 });
      expect(info.output_format).toBe(output_format);
      const meta = await sharp(data).metadata();
      expect(meta.format).toBe(output_format === 'avif' ? 'heif' : 'webp');
      expect(Math.max(meta.width, meta.height)).toBe(320);
      expect(meta.hasAlpha).toBe(false);
    }
  });

  it('reads the EXIF item from the container, so inspect() reports it without sharp', async () => {
    const exif = heicMetadata(dune).exif;
    expect(Buffer.from(exif!.subarray(0, 4)).toString('latin1')).toBe('II*\0');
    expect((await engine.inspect(dune)).metadata).toEqual({
      exif: true,
      xmp: false,
      iptc: false,
      gps: false,
    });
    expect(heicMetadata(rocket).exif).toBeUndefined();
    expect(Buffer.from(exif!).includes('Canon EOS')).toBe(true);
    // Decoded pixels carry none of it, even with strip_exif: false (sharp may still write its own
    // minimal EXIF block, without the camera's fields).
    const { data, info } = await engine.optimize(dune, { max_dimension: 200, strip_exif: false });
    const out = (await sharp(data).metadata()).exif;
    expect(out === undefined || !out.includes('Canon')).toBe(true);
    expect(info.metadata_stripped).toBe(true);
    const stripped = await engine.optimize(dune, { max_dimension: 200 });
    expect((await engine.inspect(stripped.data)).metadata.exif).toBe(false);
  });

  it('refuses a HEIC that declares 50000×50000 from its header, without starting a decode', async () => {
    const bomb = Buffer.from(dune);
    const ispe = bomb.indexOf('ispe');
    bomb.writeUInt32BE(50_000, ispe + 8);
    bomb.writeUInt32BE(50_000, ispe + 12);
    const before = heicDecoderStats().submitted;
    const error = await engine.optimize(bomb).catch((e: unknown) => e);
    expect((error as CompressoError).code).toBe('IMAGE_TOO_LARGE');
    expect((error as CompressoError).message).toContain('50000×50000');
    expect(heicDecoderStats().submitted).toBe(before);
  });

  it('inspects without alpha and upright', async () => {
    const inspection = await engine.inspect(rocket);
    expect(inspection).toMatchObject({
      format: 'heif',
      width: 640,
      height: 427,
      has_alpha: false,
      orientation: 1,
    });
  });

  it('refuses a HEIC whose declared size is over the pixel limit before decoding', async () => {
    const before = heicDecoderStats().submitted;
    const error = await decodeHeic(dune, { ...DEFAULT_LIMITS, maxPixels: 1_000_000 }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CompressoError);
    expect((error as CompressoError).code).toBe('IMAGE_TOO_LARGE');
    expect((error as CompressoError).message).toContain('1680×1050');
    expect(heicDecoderStats().submitted).toBe(before);
    // …and the same file under the default limit is handed to the pool.
    await decodeHeic(dune, DEFAULT_LIMITS);
    expect(heicDecoderStats().submitted).toBe(before + 1);
  });

  it('calls a truncated HEIC corrupt', async () => {
    const broken = dune.subarray(0, dune.length >> 1);
    const error = await engine.optimize(broken).catch((e: unknown) => e);
    expect((error as CompressoError).code).toBe('CORRUPT_IMAGE');
  });

  it('an idle pool does not keep the process alive', async () => {
    const probe = resolve(import.meta.dirname, 'test-support/heic-exit-probe.ts');
    // The probe decodes once and returns from its module. It must exit while its idle worker is still
    // in the pool: a ref'd worker would hold the process until the pool's 15 s idle timeout ended the
    // thread, and the probe would report 0 threads at exit. (Was: the exit within 5 s of wall clock.)
    const { stdout } = await promisify(execFile)(process.execPath, [probe], { timeout: 60_000 });
    expect(stdout.trim().split('\n')).toEqual(['640x427', 'threads at exit: 1']);
  });

  it('decodes in a worker: the event loop keeps ticking and decodes queue behind the limit', async () => {
    const utilisation = performance.eventLoopUtilization();
    const jobs = [0, 1, 2, 3].map(() => decodeHeic(dune, DEFAULT_LIMITS));
    await new Promise((r) => setImmediate(r));
    const during = heicDecoderStats();
    const all = Promise.all(jobs);
    // The loop turns while the decodes run (on the main thread it would not turn until they were done).
    expect(await loopTurnsBefore(all)).toBe(10);
    const results = await all;
    const busy = performance.eventLoopUtilization(utilisation).utilization;
    expect(results.every((r) => r.width === 1680 && r.height === 1050 && !r.hasAlpha)).toBe(true);
    expect(during.running + during.waiting).toBe(4);
    expect(during.threads).toBeLessThanOrEqual(2);
    // Decoding on the main thread would keep the loop busy for the whole time (utilisation ≈ 1) and
    // stall it ≈ 120 ms per file. Utilisation is a share of the loop's own time, not a duration: it
    // does not grow when the machine is loaded (a descheduled idle loop still counts as idle).
    expect(busy).toBeLessThan(0.3);
  });
});
