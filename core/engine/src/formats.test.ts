import sharp from 'sharp';
import { describe, expect, it, vi } from 'vitest';
import { createEngine } from './engine.ts';
import { corpus } from './test-support/corpus.ts';
import { animated, animatedGif, noise } from './test-support/fixtures.ts';

const engine = createEngine({ concurrency: 2 });

describe('inputs', () => {
  it('reads JPEG, PNG, WebP, AVIF, GIF and TIFF, and writes TIFF as JPEG by default', async () => {
    const base = noise(48, 32);
    const inputs = {
      jpeg: await base.clone().jpeg().toBuffer(),
      png: await base.clone().png().toBuffer(),
      webp: await base.clone().webp().toBuffer(),
      avif: await base.clone().avif({ effort: 0 }).toBuffer(),
      gif: await base.clone().gif().toBuffer(),
      tiff: await base.clone().tiff().toBuffer(),
    };
    for (const [format, input] of Object.entries(inputs)) {
      const { data, info } = await engine.optimize(input);
      expect(info.input_format).toBe(format);
      expect(info.output_format).toBe(format === 'tiff' ? 'jpeg' : format);
      expect([info.width, info.height]).toEqual([48, 32]);
      const meta = await sharp(data).metadata();
      expect([meta.width, meta.height]).toEqual([48, 32]);
    }
  });
});

describe('animation', () => {
  const frames = 12;

  it('animated GIF stays animated as GIF and as WebP, with every frame', async () => {
    const gif = await animatedGif(frames, 32, 24);
    expect(await engine.inspect(gif)).toMatchObject({ animated: true, frames, width: 32, height: 24 });
    for (const output_format of ['gif', 'webp'] as const) {
      const { data, info } = await engine.optimize(gif, { output_format, quality: 95 });
      expect(info).toMatchObject({ frames, width: 32, height: 24, output_format });
      const meta = await sharp(data).metadata();
      expect(meta.pages).toBe(frames);
      expect(meta.pageHeight ?? meta.height).toBe(24);
    }
  });

  it('animated GIF → JPEG is the first frame', async () => {
    const gif = await animatedGif(frames, 32, 24);
    const { data, info } = await engine.optimize(gif, { output_format: 'jpeg', quality: 95 });
    expect(info).toMatchObject({ frames: 1, width: 32, height: 24 });
    const meta = await sharp(data).metadata();
    expect([meta.width, meta.height, meta.pages ?? 1]).toEqual([32, 24, 1]);
    // Frame 0 is pure blue (0, 0, 255) in the fixture.
    const { dominant } = await sharp(data).stats();
    expect(dominant.b).toBeGreaterThan(200);
    expect(dominant.r + dominant.g).toBeLessThan(60);
  });

  it('animated WebP input keeps its frames, and resizing applies to every frame', async () => {
    const webp = await animated(6, 40, 40).webp({ quality: 90 }).toBuffer();
    const { data, info } = await engine.optimize(webp, { max_dimension: 20 });
    expect(info).toMatchObject({ frames: 6, width: 20, height: 20 });
    expect((await sharp(data).metadata()).pages).toBe(6);
  });
});

describe('transparency', () => {
  const transparent = corpus('graphic-mate-Arc-Colors-Transparent.png');

  it('alpha PNG → WebP keeps its alpha', async () => {
    const { data } = await engine.optimize(transparent, { output_format: 'webp', max_dimension: 128 });
    const meta = await sharp(data).metadata();
    expect(meta.hasAlpha).toBe(true);
    expect((await sharp(data).stats()).isOpaque).toBe(false);
  });

  it('smart png_to_jpeg converts an opaque photo PNG, including one with an all-opaque alpha channel', async () => {
    const photo = await sharp(corpus('photo-skimage-chelsea.png')).resize(200).png().toBuffer();
    const withOpaqueAlpha = await sharp(photo).ensureAlpha(1).png().toBuffer();
    for (const input of [photo, withOpaqueAlpha]) {
      const { data, info } = await engine.optimize(input, { png_to_jpeg: true });
      expect(info.output_format).toBe('jpeg');
      expect((await sharp(data).metadata()).format).toBe('jpeg');
    }
    // Without the option the format never changes.
    expect((await engine.optimize(photo)).info.output_format).toBe('png');
  });

  it('smart png_to_jpeg never converts real transparency', async () => {
    const input = await sharp(transparent).resize(128).png().toBuffer();
    const { data, info } = await engine.optimize(input, { png_to_jpeg: true });
    expect(info.output_format).toBe('png');
    expect((await sharp(data).stats()).isOpaque).toBe(false);
  });

  it('smart png_to_jpeg keeps a flat graphic as PNG when JPEG does not save 20%', async () => {
    const flat = await sharp({ create: { width: 200, height: 200, channels: 3, background: '#3366cc' } })
      .png()
      .toBuffer();
    const { info } = await engine.optimize(flat, { png_to_jpeg: true });
    expect(info.output_format).toBe('png');
  });
});

describe('concurrency', () => {
  it('runs at most `concurrency` images at once; the rest wait in the engine', async () => {
    const one = createEngine({ concurrency: 1 });
    // Large enough that one encode outlasts the other two calls' header reads by far, so the state
    // "one runs, two wait" is there to be seen.
    const input = await noise(1024, 1024).png().toBuffer();
    const seen: { active: number; waiting: number }[] = [];
    const jobs = [0, 1, 2].map(() => one.optimize(input, { output_format: 'webp' }));
    // Each call reads its header (the memory estimate) before it takes the gate: once all three have,
    // one runs and two wait.
    await vi.waitFor(() => expect(one.stats()).toMatchObject({ active: 1, waiting: 2 }), { timeout: 10_000 });
    seen.push(one.stats());
    expect(one.stats()).toMatchObject({ concurrency: 1, threadsPerImage: sharp.concurrency() });
    const timer = setInterval(() => seen.push(one.stats()), 1);
    await Promise.all(jobs);
    clearInterval(timer);
    expect(one.stats()).toMatchObject({
      active: 0,
      waiting: 0,
      concurrency: 1,
      threadsPerImage: sharp.concurrency(),
      memoryInUse: 0,
      memoryWaiting: 0,
    });
    expect(Math.max(...seen.map((s) => s.active))).toBe(1);
    expect(Math.max(...seen.map((s) => s.waiting))).toBeGreaterThanOrEqual(1);
  });
});
