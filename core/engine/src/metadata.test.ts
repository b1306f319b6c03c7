import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { createEngine } from './engine.ts';
import { stripMetadataLossless } from './exif.ts';
import { GPS_EXIF, noise, sidewaysJpeg, withIptc } from './test-support/fixtures.ts';

const engine = createEngine({ concurrency: 2 });
const XMP =
  '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:GPSLatitude="48,51.48N"/></rdf:RDF></x:xmpmeta>';

async function pixel(image: Uint8Array, left: number, top: number): Promise<number[]> {
  const data = await sharp(image).extract({ left, top, width: 1, height: 1 }).removeAlpha().raw().toBuffer();
  return [...data];
}

function isRed([r, g, b]: number[]): boolean {
  return r! > 200 && g! < 60 && b! < 60;
}

describe('metadata', () => {
  it('strips EXIF (GPS included) and XMP on a normal re-encode', async () => {
    const input = await noise(64, 64).jpeg({ quality: 95 }).withExif(GPS_EXIF).withXmp(XMP).toBuffer();
    expect((await engine.inspect(input)).metadata).toEqual({ exif: true, xmp: true, iptc: false, gps: true });
    const { data, info } = await engine.optimize(input);
    expect(info).toMatchObject({ optimized: true, metadata_stripped: true });
    expect((await engine.inspect(data)).metadata).toEqual({
      exif: false,
      xmp: false,
      iptc: false,
      gps: false,
    });
  });

  it('strips IPTC (APP13), on a re-encode and on the lossless path', async () => {
    const input = withIptc(await noise(32, 32).jpeg({ quality: 40, mozjpeg: true }).toBuffer());
    expect((await engine.inspect(input)).metadata.iptc).toBe(true);
    for (const quality of [60, 100]) {
      const { data, info } = await engine.optimize(input, { quality });
      expect(info.metadata_stripped).toBe(true);
      expect((await engine.inspect(data)).metadata.iptc).toBe(false);
      expect(data.includes('Rue Example')).toBe(false);
    }
  });

  it('strip_exif: false keeps EXIF and GPS', async () => {
    const input = await noise(64, 64).jpeg({ quality: 95 }).withExif(GPS_EXIF).toBuffer();
    const { data, info } = await engine.optimize(input, { strip_exif: false });
    expect(info).toMatchObject({ optimized: true, metadata_stripped: false });
    const meta = await sharp(data).metadata();
    expect(meta.exif?.includes('CompressoCam')).toBe(true);
    expect((await engine.inspect(data)).metadata.gps).toBe(true);
  });

  it('keeps colours right: a Display P3 image is converted to sRGB before its profile goes', async () => {
    // sharp converts the sRGB pixel (200, 60, 50) into P3 numbers and embeds the P3 profile.
    const raw = Buffer.alloc(16 * 16 * 3);
    for (let i = 0; i < raw.length; i += 3) raw.set([200, 60, 50], i);
    const input = await sharp(raw, { raw: { width: 16, height: 16, channels: 3 } })
      .withIccProfile('p3')
      .png()
      .toBuffer();
    const stored = [...(await sharp(input, { ignoreIcc: true }).raw().toBuffer()).subarray(0, 3)];
    // The numbers in the file are not the sRGB colour: dropping the profile alone would shift it.
    expect(
      Math.abs(stored[0]! - 200) + Math.abs(stored[1]! - 60) + Math.abs(stored[2]! - 50),
    ).toBeGreaterThan(15);
    for (const output_format of ['png', 'webp', 'jpeg'] as const) {
      const { data } = await engine.optimize(input, { output_format, quality: 95 });
      const meta = await sharp(data).metadata();
      expect(meta.icc).toBeUndefined();
      const [r, g, b] = await pixel(data, 8, 8);
      expect(Math.abs(r! - 200)).toBeLessThanOrEqual(4);
      expect(Math.abs(g! - 60)).toBeLessThanOrEqual(4);
      expect(Math.abs(b! - 50)).toBeLessThanOrEqual(4);
    }
  });
});

describe('orientation', () => {
  it('applies EXIF orientation 6 before stripping: dimensions swap, the corner lands top-right', async () => {
    const input = await sidewaysJpeg(6);
    expect(await engine.inspect(input)).toMatchObject({ width: 60, height: 120, orientation: 6 });
    for (const options of [{}, { quality: 100 }, { output_format: 'webp' as const }]) {
      const { data, info } = await engine.optimize(input, options);
      expect(info).toMatchObject({ width: 60, height: 120, optimized: true });
      const meta = await sharp(data).metadata();
      expect([meta.width, meta.height]).toEqual([60, 120]);
      expect(meta.orientation ?? 1).toBe(1);
      expect(isRed(await pixel(data, 50, 10))).toBe(true);
      expect(isRed(await pixel(data, 10, 10))).toBe(false);
      expect(isRed(await pixel(data, 50, 110))).toBe(false);
    }
  });

  it('with strip_exif: false the pixels are upright and the tag no longer rotates them again', async () => {
    const { data } = await engine.optimize(await sidewaysJpeg(6), { strip_exif: false });
    const meta = await sharp(data).metadata();
    expect(meta.exif).toBeDefined();
    expect(meta.orientation ?? 1).toBe(1);
    expect([meta.width, meta.height]).toEqual([60, 120]);
    expect(isRed(await pixel(data, 50, 10))).toBe(true);
  });
});

describe('never larger', () => {
  it('returns the input unchanged, optimized: false, when a re-encode is not smaller', async () => {
    const input = await noise(64, 64).jpeg({ quality: 40, mozjpeg: true }).toBuffer();
    const { data, info } = await engine.optimize(input, { quality: 100 });
    expect(Buffer.compare(data, input)).toBe(0);
    expect(info).toMatchObject({ optimized: false, savings_percent: 0, output_size: input.length });
  });

  it('cuts EXIF/XMP out of a JPEG losslessly instead of returning it with GPS, and keeps its ICC profile', async () => {
    const input = await noise(64, 64)
      .jpeg({ quality: 40, mozjpeg: true })
      .withIccProfile('p3')
      .withExif(GPS_EXIF)
      .withXmp(XMP)
      .toBuffer();
    const { data, info } = await engine.optimize(input, { quality: 100 });
    expect(info).toMatchObject({ optimized: true, metadata_stripped: true });
    expect(data.length).toBeLessThan(input.length);
    expect((await engine.inspect(data)).metadata).toEqual({
      exif: false,
      xmp: false,
      iptc: false,
      gps: false,
    });
    expect((await sharp(data).metadata()).icc?.length).toBe((await sharp(input).metadata()).icc?.length);
    // Lossless: the very same decoded pixels.
    const [a, b] = await Promise.all([sharp(input).raw().toBuffer(), sharp(data).raw().toBuffer()]);
    expect(Buffer.compare(a, b)).toBe(0);
  });

  it('returns a WebP re-encode even when slightly larger, rather than leak its GPS', async () => {
    const input = await noise(32, 32).webp({ quality: 20 }).withExif(GPS_EXIF).withXmp(XMP).toBuffer();
    const { data, info } = await engine.optimize(input, { quality: 100 });
    expect(info.metadata_stripped).toBe(true);
    expect((await engine.inspect(data)).metadata).toEqual({
      exif: false,
      xmp: false,
      iptc: false,
      gps: false,
    });
  });
});

describe('stripMetadataLossless', () => {
  it('PNG: drops eXIf and text chunks, keeps iCCP and the image data', async () => {
    const input = await noise(32, 32).png().withIccProfile('p3').withExif(GPS_EXIF).withXmp(XMP).toBuffer();
    const before = await sharp(input).metadata();
    expect(before.exif && before.xmp && before.icc).toBeTruthy();
    const stripped = stripMetadataLossless(input, 'png');
    expect(stripped).toBeDefined();
    const after = await sharp(stripped!).metadata();
    expect(after.exif).toBeUndefined();
    expect(after.xmp).toBeUndefined();
    expect(after.icc?.length).toBe(before.icc?.length);
    const [a, b] = await Promise.all([sharp(input).raw().toBuffer(), sharp(stripped!).raw().toBuffer()]);
    expect(Buffer.compare(a, b)).toBe(0);
  });

  it('JPEG: an allow-list — unknown APPn and COM go, JFIF, ICC and Adobe stay', async () => {
    const input = await noise(16, 16).jpeg().withIccProfile('p3').toBuffer();
    const segment = (marker: number, text: string) => {
      const body = Buffer.from(text, 'latin1');
      const head = Buffer.from([0xff, marker, 0, 0]);
      head.writeUInt16BE(body.length + 2, 2);
      return Buffer.concat([head, body]);
    };
    const adobe = segment(0xee, 'Adobe\0\x64\0\0\0\0\x01');
    const extra = Buffer.concat([segment(0xeb, 'JP\0\0vendor-secret'), segment(0xfe, 'shot at home'), adobe]);
    const withExtra = Buffer.concat([input.subarray(0, 2), extra, input.subarray(2)]);
    const stripped = Buffer.from(stripMetadataLossless(withExtra, 'jpeg')!);
    expect(stripped.includes('vendor-secret')).toBe(false);
    expect(stripped.includes('shot at home')).toBe(false);
    expect(stripped.includes(adobe)).toBe(true);
    expect(stripped.includes('ICC_PROFILE')).toBe(true);
    expect(stripped.includes('JFIF')).toBe(input.includes('JFIF'));
  });

  it('PNG: an allow-list — private chunks and tIME go, tRNS and pHYs stay', async () => {
    const input = await sharp({ create: { width: 4, height: 4, channels: 4, background: '#ff000080' } })
      .png({ palette: true })
      .withMetadata({ density: 300 })
      .toBuffer();
    const chunk = (type: string, text: string) => {
      const head = Buffer.alloc(8);
      head.writeUInt32BE(text.length, 0);
      head.write(type, 4, 'latin1');
      return Buffer.concat([head, Buffer.from(text, 'latin1'), Buffer.alloc(4)]);
    };
    const extra = Buffer.concat([chunk('prVt', 'private-secret'), chunk('tIME', '\x07\xea\x0b\x16\x12\0\0')]);
    const withExtra = Buffer.concat([input.subarray(0, 33), extra, input.subarray(33)]);
    const stripped = Buffer.from(stripMetadataLossless(withExtra, 'png')!);
    expect(stripped.includes('private-secret')).toBe(false);
    expect(stripped.includes('tIME')).toBe(false);
    for (const kept of ['tRNS', 'pHYs', 'PLTE'])
      expect(stripped.includes(kept), kept).toBe(input.includes(kept));
    expect(input.includes('tRNS')).toBe(true);
  });

  it('JPEG: drops everything after the first EOI and refuses what does not parse', async () => {
    const input = await noise(16, 16).jpeg().withExif(GPS_EXIF).toBuffer();
    const trailing = Buffer.concat([input, Buffer.from('secret trailing data')]);
    const stripped = stripMetadataLossless(trailing, 'jpeg')!;
    expect(stripped.subarray(-2)).toEqual(Buffer.from([0xff, 0xd9]));
    expect(Buffer.from(stripped).includes('secret')).toBe(false);
    expect(Buffer.from(stripped).includes('CompressoCam')).toBe(false);
    expect(stripMetadataLossless(input.subarray(0, input.length - 40), 'jpeg')).toBeUndefined();
    expect(stripMetadataLossless(input, 'webp')).toBeUndefined();
  });
});
