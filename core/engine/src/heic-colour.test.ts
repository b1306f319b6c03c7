import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine } from './engine.ts';
import { closeHeicDecoder, decodeHeic } from './heic.ts';
import { heicColour, heicInputProfile } from './heic-colour.ts';
import { DEFAULT_LIMITS } from './limits.ts';
import { rgbaTiff } from './rgba-tiff.ts';
import { corpus } from './test-support/corpus.ts';
import { heifHeader, withNclx } from './test-support/heif-boxes.ts';

const engine = createEngine({ concurrency: 2 });

afterAll(() => closeHeicDecoder());

/** An nclx colour on the primary item, while a thumbnail carries an ICC profile. */
function nclxHeader(primaries: number): Buffer {
  return heifHeader({ width: 100, height: 80, colour: { primaries } });
}

async function meanRgb(image: Uint8Array): Promise<number[]> {
  const { channels } = await sharp(image).stats();
  return channels.slice(0, 3).map((c) => c.mean);
}

describe('HEIC colour', () => {
  it("reads the primary image's colour box, not a thumbnail's", () => {
    expect(heicColour(nclxHeader(12))).toEqual({ primaries: 12 });
    const rocket = heicColour(corpus('photo-heic-rocket.heic'));
    expect(rocket.icc?.length).toBe(560);
    expect(Buffer.from(rocket.icc!).includes('Adobe RGB (1998)')).toBe(true);
    // No colr at all: HEIF says sRGB.
    expect(heicColour(corpus('photo-heic-mate-Dune.heic'))).toEqual({});
  });

  it('gives Display P3 (nclx primaries 12) a P3 profile and leaves sRGB alone', async () => {
    const p3 = await heicInputProfile(nclxHeader(12));
    expect(p3).toBeDefined();
    // It must really be P3: pure P3 red is outside sRGB, so through this profile it clips to sRGB red.
    const red = Buffer.from([255, 0, 0, 255]);
    const png = await sharp(rgbaTiff(1, 1, red, p3!))
      .removeAlpha()
      .png()
      .toBuffer();
    const [r, g, b] = [...(await sharp(png).raw().toBuffer())];
    expect([r, g, b]).toEqual([255, 0, 0]);
    const pinkish = Buffer.from([200, 60, 50, 255]);
    const converted = await sharp(rgbaTiff(1, 1, pinkish, p3!))
      .removeAlpha()
      .raw()
      .toBuffer();
    expect(converted[0]).toBeGreaterThan(210); // P3 (200,60,50) is a more saturated red in sRGB
    expect(await heicInputProfile(nclxHeader(1))).toBeUndefined();
  });

  it('an Adobe RGB HEIC comes out in the same sRGB colours as the same photo as an Adobe RGB JPEG', async () => {
    // The corpus has the rocket photo twice, both tagged Adobe RGB (1998): once HEIC, once JPEG.
    const viaJpeg = await engine.optimize(corpus('photo-skimage-rocket.jpg'), { output_format: 'png' });
    const viaHeic = await engine.optimize(corpus('photo-heic-rocket.heic'), { output_format: 'png' });
    const expected = await meanRgb(viaJpeg.data);
    const got = await meanRgb(viaHeic.data);
    for (let c = 0; c < 3; c++) expect(Math.abs(got[c]! - expected[c]!)).toBeLessThan(1.5);
    // The same numbers read as sRGB (what the raw path did) are far off in red (≈ 52 instead of ≈ 41),
    // so the tolerance above tells a right conversion from none.
    const unconverted = await meanRgb(
      await sharp(corpus('photo-skimage-rocket.jpg'), { ignoreIcc: true }).png().toBuffer(),
    );
    expect(unconverted[0]! - expected[0]!).toBeGreaterThan(8);
    expect((await sharp(viaHeic.data).metadata()).icc).toBeUndefined();
  });

  it('a Display P3 HEIC (nclx primaries 12, as iPhones write) is converted from P3 to sRGB', async () => {
    const srgbDune = corpus('photo-heic-mate-Dune.heic');
    const p3Dune = withNclx(srgbDune, 12);
    // The same coded numbers, once declared sRGB (no colr) and once Display P3; 420 px keeps it fast.
    const plain = await decodeHeic(srgbDune, DEFAULT_LIMITS);
    expect(plain.tiff).toBe(false);
    const p3 = await heicInputProfile(p3Dune);
    const expected = await meanRgb(
      await sharp(rgbaTiff(plain.width, plain.height, plain.data, p3!))
        .removeAlpha()
        .resize(420)
        .png()
        .toBuffer(),
    );
    const { data } = await engine.optimize(p3Dune, { output_format: 'png', max_dimension: 420 });
    const got = await meanRgb(data);
    for (let c = 0; c < 3; c++) expect(Math.abs(got[c]! - expected[c]!)).toBeLessThan(1.5);
    // And it is not what reading the numbers as sRGB gives: the sky's blue gets deeper in sRGB.
    const asSrgb = await meanRgb(
      (await engine.optimize(srgbDune, { output_format: 'png', max_dimension: 420 })).data,
    );
    const shift = got.reduce((n, v, c) => n + Math.abs(v - asSrgb[c]!), 0);
    expect(shift).toBeGreaterThan(4);
  });

  it('strip_exif: false keeps the HEIC profile with its unconverted numbers', async () => {
    const { data } = await engine.optimize(corpus('photo-heic-rocket.heic'), {
      strip_exif: false,
      output_format: 'png',
    });
    const meta = await sharp(data).metadata();
    expect(meta.icc?.includes('Adobe RGB (1998)')).toBe(true);
    // Converted through that profile, the result is the same sRGB picture again.
    const srgb = await sharp(data).toColourspace('srgb').png().toBuffer();
    const viaJpeg = await engine.optimize(corpus('photo-skimage-rocket.jpg'), { output_format: 'png' });
    const expected = await meanRgb(viaJpeg.data);
    const got = await meanRgb(srgb);
    for (let c = 0; c < 3; c++) expect(Math.abs(got[c]! - expected[c]!)).toBeLessThan(1.5);
  });
});

describe('rgbaTiff', () => {
  it('round-trips pixels and profile through sharp', async () => {
    const rgba = new Uint8Array(3 * 2 * 4).map((_, i) => (i * 37) & 255);
    const icc = (await sharp(corpus('photo-skimage-rocket.jpg')).metadata()).icc!;
    const tiff = rgbaTiff(3, 2, rgba, icc);
    const meta = await sharp(tiff).metadata();
    expect(meta).toMatchObject({ format: 'tiff', width: 3, height: 2, channels: 4, hasAlpha: true });
    expect(Buffer.compare(meta.icc!, icc)).toBe(0);
    const back = await sharp(tiff, { ignoreIcc: true }).raw().toBuffer();
    expect(Buffer.compare(back, Buffer.from(rgba))).toBe(0);
    expect(() => rgbaTiff(3, 3, rgba, icc)).toThrow(RangeError);
  });
});
