import sharp from 'sharp';

/**
 * The i-th of a set of small, distinct JPEGs (120×90, quality 95, so the server always has something
 * to save and WordPress makes no generated size): colour ramps shifted per image by `shift`
 * (red, green, blue steps of i).
 */
export async function rampJpeg(i: number, shift: readonly [number, number, number]): Promise<Buffer> {
  const width = 120;
  const height = 90;
  const pixels = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const p = (y * width + x) * 3;
      pixels[p] = (x * 2 + i * shift[0]) % 256;
      pixels[p + 1] = (y * 3 + i * shift[1]) % 256;
      pixels[p + 2] = (x * y + i * shift[2]) % 256;
    }
  }
  return sharp(pixels, { raw: { width, height, channels: 3 } })
    .jpeg({ quality: 95 })
    .toBuffer();
}
