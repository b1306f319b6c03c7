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
  it('inspect() answers from the container: no decode, no worker', async () => {
    const rocket = corpus('photo-heic-rocket.heic');
    // How fast that is belongs in the benchmark; here: nothing was handed to the decoder.
    const submitted = heicDecoderStats().submitted;
    const inspection = await engine.inspect(rocket);
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
    expect(heicDecoderStats().submitted).toBe(submitted);
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

  it('a hostile ipma of millions of entries is read no further than MAX_ITEMS entries', () => {
    // 20 MB of 3-byte item entries under a declared count of 2^32 - 1. The primary item's (ID 2)
    // association to its ispe sits right after the first 10 000 entries: a parser that walked every
    // declared entry would find it and answer a size; the capped one stops before it. (Shown by what
    // is read, not by a stopwatch: how long it takes is the benchmark's business.)
    const entries = Buffer.alloc(20 * 1024 * 1024);
    Buffer.from([0, 2, 1, 1]).copy(entries, 10_000 * 3);
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
    expect(heicHeader(hostile)).toBeUndefined();
    // The same file with the association among the first 10 000 entries is read: the cap, not a parse
    // failure, is what answered undefined above.
    Buffer.alloc(4).copy(entries, 10_000 * 3);
    Buffer.from([0, 2, 1, 1]).copy(entries, 9_999 * 3);
    expect(
      heicHeader(Buffer.concat([hostile.subarray(0, hostile.length - entries.length), entries])),
    ).toMatchObject({
      width: 0x01010101,
      height: 0x01010101,
    });
  });

  it('a header without a size falls back to the decoder, which calls the file corrupt', async () => {
    const noSize = heifHeader({ width: 0, height: 0 });
    expect(heicHeader(noSize)?.width).toBe(0);
    const error = await engine.inspect(noSize).catch((e: unknown) => e);
    expect((error as CompressoError).code).toBe('CORRUPT_IMAGE');
  });
});
