import { crc32, deflateSync } from 'node:zlib';
import sharp, { type Sharp } from 'sharp';

function pngChunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/**
 * A decompression bomb: a valid PNG header declaring width×height greyscale pixels, followed by only
 * the first few rows of zlib data. A few KB on disk; decoding it would need width×height bytes.
 */
export function pngBomb(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 0; // greyscale
  const rows = Buffer.alloc((width + 1) * 4); // four rows of zeros, filter byte included
  return Buffer.concat([
    Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(rows, { level: 9 })),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/**
 * A small valid PNG with one ancillary chunk (zTXt, iTXt or iCCP) whose zlib data inflates to
 * `inflatedMB` megabytes of zeros: a bomb aimed at the metadata reader rather than the pixels.
 */
const deflatedZeros = new Map<number, Buffer>();

export async function pngChunkBomb(kind: 'zTXt' | 'iTXt' | 'iCCP', inflatedMB: number): Promise<Buffer> {
  const base = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#123456' } })
    .png()
    .toBuffer();
  let zeros = deflatedZeros.get(inflatedMB);
  if (!zeros) {
    zeros = deflateSync(Buffer.alloc(inflatedMB * 1024 * 1024), { level: 9 });
    deflatedZeros.set(inflatedMB, zeros);
  }
  const head = {
    zTXt: 'Comment\0\0',
    iTXt: 'XML:com.adobe.xmp\0\x01\0\0\0',
    iCCP: 'bomb\0\0',
  }[kind];
  // 33 bytes = signature + IHDR: the chunk goes right after the header, where readers meet it first.
  return Buffer.concat([
    base.subarray(0, 33),
    pngChunk(kind, Buffer.concat([Buffer.from(head, 'latin1'), zeros])),
    base.subarray(33),
  ]);
}

/** Raw RGB frames stacked vertically, each a different flat colour, so every frame is a real frame. */
function frameStack(frames: number, width: number, height: number): Buffer {
  const raw = Buffer.alloc(width * height * frames * 3);
  for (let f = 0; f < frames; f++) {
    const start = f * width * height * 3;
    for (let i = 0; i < width * height; i++) {
      raw[start + i * 3] = (f * 37) & 255;
      raw[start + i * 3 + 1] = (f * 91) & 255;
      raw[start + i * 3 + 2] = 255 - ((f * 53) & 255);
    }
  }
  return raw;
}

export function animated(frames: number, width: number, height: number): Sharp {
  return sharp(frameStack(frames, width, height), {
    raw: { width, height: height * frames, channels: 3, pageHeight: height },
  });
}

export function animatedGif(frames: number, width: number, height: number): Promise<Buffer> {
  return animated(frames, width, height).gif().toBuffer();
}

/**
 * A 120×60 noisy JPEG stored sideways with EXIF orientation `orientation` (6 = display rotated 90°
 * clockwise). The stored top-left 30×30 block is pure red; upright (orientation 6) it is the top-right
 * corner of a 60×120 image. Quality 95, so a default re-encode is smaller.
 */
export async function sidewaysJpeg(orientation = 6): Promise<Buffer> {
  const red = await sharp({ create: { width: 30, height: 30, channels: 3, background: '#ff0000' } })
    .png()
    .toBuffer();
  const base = await noise(120, 60).png().toBuffer();
  return sharp(base)
    .composite([{ input: red, left: 0, top: 0 }])
    .jpeg({ quality: 95 })
    .withMetadata({ orientation })
    .toBuffer();
}

/** EXIF as sharp writes it: a camera, a GPS position (Eiffel tower) and a caption. */
export const GPS_EXIF = {
  IFD0: { Make: 'CompressoCam', Model: 'Test 1', ImageDescription: 'home' },
  IFD3: {
    GPSLatitudeRef: 'N',
    GPSLatitude: '48/1 51/1 29/1',
    GPSLongitudeRef: 'E',
    GPSLongitude: '2/1 17/1 40/1',
  },
};

/** Noise with texture, so encoders have real work; `photo` shaped (opaque, 3 channels). */
export function noise(width: number, height: number, channels: 3 | 4 = 3): Sharp {
  return sharp({
    create: {
      width,
      height,
      channels,
      background: '#808080',
      noise: { type: 'gaussian', mean: 128, sigma: 40 },
    },
  });
}

/**
 * Insert an APP13 Photoshop IRB segment carrying an IPTC caption (record 2, dataset 120) right after
 * the SOI of a JPEG: how newsroom tools store captions, bylines and locations.
 */
export function withIptc(jpeg: Buffer, caption = 'Taken at 12 Rue Example, Paris'): Buffer {
  const text = Buffer.from(caption, 'latin1');
  const iptc = Buffer.concat([Buffer.from([0x1c, 0x02, 0x78, text.length >> 8, text.length & 255]), text]);
  const size = Buffer.alloc(4);
  size.writeUInt32BE(iptc.length, 0);
  // Resource data is padded to an even length; the size field gives the unpadded length.
  const padding = Buffer.alloc(iptc.length % 2);
  const resource = Buffer.concat([Buffer.from('8BIM\x04\x04\0\0', 'latin1'), size, iptc, padding]);
  const body = Buffer.concat([Buffer.from('Photoshop 3.0\0', 'latin1'), resource]);
  const head = Buffer.from([0xff, 0xed, 0, 0]);
  head.writeUInt16BE(body.length + 2, 2);
  return Buffer.concat([jpeg.subarray(0, 2), head, body, jpeg.subarray(2)]);
}
