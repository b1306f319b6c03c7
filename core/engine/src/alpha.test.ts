import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { createEngine } from './engine.ts';
import { JPEG_BACKGROUND } from './optimize.ts';

const engine = createEngine({ concurrency: 2 });

/**
 * 40×40: a red opaque square in the middle of a fully transparent field whose stored colour is black,
 * which is what most editors write under alpha 0.
 */
async function redOnTransparent(): Promise<Buffer> {
  const raw = Buffer.alloc(40 * 40 * 4);
  for (let y = 10; y < 30; y++) for (let x = 10; x < 30; x++) raw.set([220, 30, 30, 255], (y * 40 + x) * 4);
  return sharp(raw, { raw: { width: 40, height: 40, channels: 4 } })
    .png()
    .toBuffer();
}

async function rgbAt(image: Uint8Array, left: number, top: number): Promise<number[]> {
  return [...(await sharp(image).extract({ left, top, width: 1, height: 1 }).removeAlpha().raw().toBuffer())];
}

describe('transparency written as JPEG', () => {
  it('transparent areas become white, not the black stored under them', async () => {
    expect(JPEG_BACKGROUND).toBe('#ffffff');
    const png = await redOnTransparent();
    const gif = await sharp(png).gif().toBuffer();
    const webp = await sharp(png).webp({ lossless: true }).toBuffer();
    for (const input of [png, gif, webp]) {
      const { data, info } = await engine.optimize(input, { output_format: 'jpeg', quality: 95 });
      expect(info.output_format).toBe('jpeg');
      const corner = await rgbAt(data, 2, 2);
      expect(Math.min(...corner)).toBeGreaterThan(245);
      const centre = await rgbAt(data, 20, 20);
      expect(centre[0]).toBeGreaterThan(190);
      expect(centre[1]).toBeLessThan(70);
    }
  });

  it('formats with alpha keep the transparency instead', async () => {
    const png = await redOnTransparent();
    for (const output_format of ['png', 'webp', 'avif', 'gif'] as const) {
      const { data } = await engine.optimize(png, { output_format, quality: 90 });
      const { data: px, info } = await sharp(data)
        .ensureAlpha()
        .extract({ left: 2, top: 2, width: 1, height: 1 })
        .raw()
        .toBuffer({ resolveWithObject: true });
      expect(info.channels).toBe(4);
      expect(px[3]).toBe(0);
    }
  });
});
