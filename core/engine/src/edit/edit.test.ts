import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { colorName, offlineAltText, wordsOfFileName } from '../describe.ts';
import { createEngine } from '../engine.ts';
import { corpus } from '../test-support/corpus.ts';
import { parseInstruction } from './instruction.ts';

const engine = createEngine({ concurrency: 2 });
afterAll(() => engine.close());

/** 400×300: the left half red, the right half blue — so every geometric operation shows where it went. */
async function halves(format: 'jpeg' | 'png' = 'png'): Promise<Buffer> {
  const left = await sharp({ create: { width: 200, height: 300, channels: 3, background: '#ff0000' } })
    .png()
    .toBuffer();
  return sharp({ create: { width: 400, height: 300, channels: 3, background: '#0000ff' } })
    .composite([{ input: left, left: 0, top: 0 }])
    [format]()
    .toBuffer();
}

async function pixel(image: Buffer, x: number, y: number): Promise<number[]> {
  const { data, info } = await sharp(image).toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  const at = (y * info.width + x) * info.channels;
  return [...data.subarray(at, at + Math.min(3, info.channels))];
}

const edit = async (input: Buffer, instruction: string, options = {}) => {
  const parsed = parseInstruction(instruction);
  expect(parsed.unrecognized, instruction).toEqual([]);
  return engine.edit(input, parsed.operations, options);
};

// PNG outputs run the palette check (a SSIMULACRA2 score), seconds on a busy 2-core machine.
describe('engine.edit applies the parsed operations exactly', { timeout: 120_000 }, () => {
  it('"make it 800 wide and black and white": width, ratio kept, every pixel grey', async () => {
    const out = await edit(await halves(), 'make it 800 wide and black and white');
    const meta = await sharp(out.data).metadata();
    expect([meta.width, meta.height]).toEqual([800, 600]);
    expect(out.info).toMatchObject({
      width: 800,
      height: 600,
      input_width: 400,
      input_height: 300,
      output_format: 'png',
    });
    const { data, info } = await sharp(out.data)
      .toColourspace('srgb')
      .raw()
      .toBuffer({ resolveWithObject: true });
    for (let i = 0; i < data.length; i += info.channels * 997) {
      expect(Math.abs(data[i]! - data[i + 1]!)).toBeLessThanOrEqual(1);
      expect(Math.abs(data[i]! - data[i + 2]!)).toBeLessThanOrEqual(1);
    }
    expect(out.applied).toEqual([{ op: 'resize', width: 800 }, { op: 'grayscale' }]);
  });

  it('"rotate left and convert to webp": portrait, the left (red) half now at the bottom, WebP', async () => {
    const out = await edit(await halves(), 'rotate left and convert to webp');
    const meta = await sharp(out.data).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', 300, 400]);
    const bottom = await pixel(out.data, 150, 350);
    const top = await pixel(out.data, 150, 50);
    expect(bottom[0]).toBeGreaterThan(200);
    expect(top[2]).toBeGreaterThan(200);
    expect(out.info.output_format).toBe('webp');
    expect(out.applied).toEqual([{ op: 'rotate', degrees: 270 }]);
  });

  it('"crop to square" keeps the centre; "flip horizontally" swaps the halves', async () => {
    const square = await edit(await halves(), 'crop to square');
    expect([square.info.width, square.info.height]).toEqual([300, 300]);
    expect((await pixel(square.data, 10, 150))[0]).toBeGreaterThan(200);
    expect((await pixel(square.data, 290, 150))[2]).toBeGreaterThan(200);
    const flipped = await edit(await halves(), 'flip horizontally');
    expect((await pixel(flipped.data, 10, 150))[2]).toBeGreaterThan(200);
    expect((await pixel(flipped.data, 390, 150))[0]).toBeGreaterThan(200);
  });

  it('runs the operations in the order said: crop then resize differs from resize then crop', async () => {
    const a = await edit(await halves(), 'crop to square then 100 wide');
    const b = await edit(await halves(), '100 wide then crop to square');
    expect([a.info.width, a.info.height]).toEqual([100, 100]);
    expect([b.info.width, b.info.height]).toEqual([75, 75]);
  });

  it('brightness, contrast, blur and sharpen change the pixels the way they say', async () => {
    const photo = corpus('photo-mate-LadyBird.jpg');
    const mean = async (image: Buffer) => {
      const stats = await sharp(image).stats();
      return stats.channels.slice(0, 3).reduce((sum, c) => sum + c.mean, 0) / 3;
    };
    const stdev = async (image: Buffer) => (await sharp(image).grayscale().stats()).channels[0]!.stdev;
    const base = (await edit(photo, '400 wide')).data;
    const brighter = (await edit(photo, '400 wide and brighter')).data;
    const darker = (await edit(photo, '400 wide and darker')).data;
    expect(await mean(brighter)).toBeGreaterThan((await mean(base)) + 5);
    expect(await mean(darker)).toBeLessThan((await mean(base)) - 5);
    const contrast = (await edit(photo, '400 wide and more contrast')).data;
    expect(await stdev(contrast)).toBeGreaterThan((await stdev(base)) + 3);
    // Detail is the mean step between neighbouring pixels: blurring removes it, sharpening adds it.
    const detail = async (image: Buffer) => {
      const { data, info } = await sharp(image).grayscale().raw().toBuffer({ resolveWithObject: true });
      let sum = 0;
      for (let y = 0; y < info.height; y++)
        for (let x = 1; x < info.width; x++)
          sum += Math.abs(data[y * info.width + x]! - data[y * info.width + x - 1]!);
      return sum / (info.height * (info.width - 1));
    };
    const hq = { quality: 95 };
    const plain = await detail((await edit(photo, '400 wide', hq)).data);
    expect(await detail((await edit(photo, '400 wide and blur a lot', hq)).data)).toBeLessThan(plain * 0.5);
    expect(await detail((await edit(photo, '400 wide and sharpen a lot', hq)).data)).toBeGreaterThan(
      plain * 1.2,
    );
  });

  it('a format and quality in the instruction win over the options; the input facts are the original', async () => {
    const input = await halves('jpeg');
    const out = await edit(input, 'as avif at quality 40', { output_format: 'png', quality: 90 });
    expect(out.info).toMatchObject({
      output_format: 'avif',
      quality: 40,
      input_format: 'jpeg',
      input_size: input.length,
      input_width: 400,
      input_height: 300,
    });
    expect((await sharp(out.data).metadata()).format).toBe('heif');
    const kept = await edit(input, 'rotate right');
    expect(kept.info.output_format).toBe('jpeg');
  });

  it('refuses a result over the pixel limit before making it', async () => {
    await expect(
      engine.edit(await halves(), [
        { op: 'resize', scale: 8 },
        { op: 'resize', scale: 8 },
        { op: 'resize', scale: 8 },
      ]),
    ).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });
});

describe('image facts and offline alt text', { timeout: 60_000 }, () => {
  it('measures orientation, dominant colour and transparency', async () => {
    expect(await engine.facts(await halves())).toMatchObject({
      width: 400,
      height: 300,
      orientation: 'landscape',
      transparent: false,
    });
    const transparent = await sharp({
      create: { width: 64, height: 64, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } },
    })
      .composite([
        {
          input: await sharp({ create: { width: 32, height: 32, channels: 4, background: '#1a237e' } })
            .png()
            .toBuffer(),
          left: 16,
          top: 16,
        },
      ])
      .png()
      .toBuffer();
    const facts = await engine.facts(transparent);
    expect(facts).toMatchObject({ orientation: 'square', transparent: true });
    const icon = await engine.facts(corpus('icon-oxygen-folder-red.png'));
    expect(icon.transparent).toBe(true);
  });

  it('names colours plainly', () => {
    expect(colorName(255, 0, 0)).toBe('red');
    expect(colorName(0, 0, 128)).toBe('dark blue');
    expect(colorName(250, 250, 250)).toBe('white');
    expect(colorName(10, 10, 10)).toBe('black');
    expect(colorName(128, 128, 128)).toBe('grey');
    expect(colorName(34, 139, 34)).toBe('green');
    expect(colorName(139, 69, 19)).toBe('brown');
    expect(colorName(255, 165, 0)).toBe('orange');
  });

  it('reads words from descriptive file names only', () => {
    expect(wordsOfFileName('red-running_shoe-02.jpg')).toBe('red running shoe');
    expect(wordsOfFileName('IMG_2041.JPG')).toBeUndefined();
    expect(wordsOfFileName('DSC0001.jpg')).toBeUndefined();
    expect(wordsOfFileName(undefined)).toBeUndefined();
  });

  it('writes from the context and the facts, never claiming unseen content', () => {
    const facts = {
      width: 800,
      height: 800,
      orientation: 'square' as const,
      dominant_color: '#1a237e',
      color_name: 'dark blue',
      transparent: true,
    };
    expect(offlineAltText({ product_title: 'Trail Runner 2', vendor: 'Acme' }, facts)).toEqual({
      alt: 'Trail Runner 2 by Acme — square image, mostly dark blue, on a transparent background',
      basis: ['product_title', 'vendor', 'orientation', 'dominant_color', 'transparent'],
    });
    expect(offlineAltText({ file_name: 'IMG_0001.jpg' }, { ...facts, transparent: false }).alt).toBe(
      'Square image, mostly dark blue',
    );
    expect(offlineAltText({ file_name: 'blue-ceramic-mug.png' }, facts).basis[0]).toBe('file_name');
  });
});
