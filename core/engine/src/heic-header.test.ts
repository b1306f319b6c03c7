import { CompressoError } from '@compresso/schema';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine } from './engine.ts';
import { closeHeicDecoder, heicDecoderStats } from './heic.ts';
import { heicHeader } from './heic-header.ts';
import { corpus } from './test-support/corpus.ts';
import { box, heifHeader } from './test-support/heif-boxes.ts';

const engine = createEngine({ concurrency: 2 });

afterAll(() => closeHeicDecoder());

describe('HEIC header', () => {
  it('inspect() answers from the container: no decode, no worker, a few ms', async () => {
    const rocket = corpus('photo-heic-rocket.heic');
    const started = performance.now();
    const inspection = await engine.inspect(rocket);
    const elapsed = performance.now() - started;
    expect(inspection).toMatchObject({
      format: 'heif',
      // The coded image is 640×428; the primary item is its 640×427 crop, as the decoder returns it.
      width: 640,
      height: 427,
      has_alpha: false,
      orientation: 1,
      icc_profile: true,
      animated: false,
    });
    expect(heicDecoderStats().threads).toBe(0);
    expect(elapsed).toBeLessThan(50);
    console.info(`HEIC inspect from the header: ${elapsed.toFixed(1)} ms`);
  });

  it('matches what the decoder produces, for both corpus HEICs', async () => {
    for (const name of ['photo-heic-rocket.heic', 'photo-heic-mate-Dune.heic']) {
      const file = corpus(name);
      const { info } = await engine.optimize(file, { output_format: 'jpeg', quality: 60 });
      const header = heicHeader(file);
      expect([header?.width, header?.height]).toEqual([info.width, info.height]);
    }
  });

  it('reads the primary item only, applies clap and quarter-turn irot, finds an alpha plane', () => {
    expect(heicHeader(heifHeader({ width: 400, height: 300 }))).toMatchObject({
      width: 400,
      height: 300,
      rotation: 0,
      hasAlpha: false,
      colour: {},
    });
    expect(heicHeader(heifHeader({ width: 400, height: 300, rotation: 1 }))).toMatchObject({
      width: 300,
      height: 400,
      rotation: 1,
    });
    expect(heicHeader(heifHeader({ width: 400, height: 300, rotation: 2 }))).toMatchObject({
      width: 400,
      height: 300,
    });
    expect(
      heicHeader(heifHeader({ width: 400, height: 300, crop: { width: 398, height: 297 }, rotation: 3 })),
    ).toMatchObject({ width: 297, height: 398 });
    expect(
      heicHeader(heifHeader({ width: 40, height: 30, auxType: 'urn:mpeg:hevc:2015:auxid:1' }))?.hasAlpha,
    ).toBe(true);
    expect(
      heicHeader(
        heifHeader({ width: 40, height: 30, auxType: 'urn:mpeg:mpegB:cicp:systems:auxiliary:alpha' }),
      )?.hasAlpha,
    ).toBe(true);
    // A depth map or portrait matte is an auxiliary image too, but not transparency.
    expect(
      heicHeader(
        heifHeader({ width: 40, height: 30, auxType: 'urn:com:apple:photo:2018:aux:portraiteffectsmatte' }),
      )?.hasAlpha,
    ).toBe(false);
  });

  it('inspect() refuses an oversized HEIC from its header, like optimize()', async () => {
    const bomb = heifHeader({ width: 100_000, height: 100_000 });
    for (const call of [engine.inspect(bomb), engine.optimize(bomb)]) {
      const error = await call.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CompressoError);
      expect((error as CompressoError).code).toBe('IMAGE_TOO_LARGE');
    }
  });

  it('a hostile ipma of millions of entries costs milliseconds, not the event loop', () => {
    // 20 MB of 3-byte item entries under a declared count of 2^32 - 1.
    const entries = Buffer.alloc(20 * 1024 * 1024);
    const ipma = box('ipma', Buffer.from([0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]), entries);
    const hostile = Buffer.concat([
      box('ftyp', Buffer.from('heic\0\0\0\0mif1heic', 'latin1')),
      box(
        'meta',
        new Uint8Array(4),
        box('pitm', new Uint8Array(4), Buffer.from([0, 2])),
        box('iprp', box('ipco', box('ispe', new Uint8Array(4), Buffer.alloc(8, 1))), ipma),
      ),
    ]);
    const started = performance.now();
    expect(heicHeader(hostile)).toBeUndefined();
    expect(performance.now() - started).toBeLessThan(100);
  });

  it('a header without a size falls back to the decoder, which calls the file corrupt', async () => {
    const noSize = heifHeader({ width: 0, height: 0 });
    expect(heicHeader(noSize)?.width).toBe(0);
    const error = await engine.inspect(noSize).catch((e: unknown) => e);
    expect((error as CompressoError).code).toBe('CORRUPT_IMAGE');
  });
});
