import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { AUTO_FLOOR, AUTO_SETTINGS, AUTO_TARGET } from './auto.ts';
import { createEngine } from './engine.ts';
import { closeMetricPool, decodeToRgb, ssimulacra2 } from './metric/index.ts';
import { corpus } from './test-support/corpus.ts';

const engine = createEngine({ concurrency: 2 });
// A real photo, resized small so each search step is an encode and a score of ~0.2 MP.
const dune = corpus('photo-mate-Dune.jpg');
const SMALL = { max_dimension: 560 } as const;

afterAll(() => closeMetricPool());

describe('quality "auto"', () => {
  it('reaches the target, reports the score it measured, and that score is the true one', async () => {
    const { data, info } = await engine.optimize(dune, { ...SMALL, output_format: 'webp', quality: 'auto' });
    expect(info.auto_quality).toBe(true);
    // The target, unless the capped search could not reach it; the floor always.
    if (info.quality < AUTO_SETTINGS.webp.maxQ) expect(info.score).toBeGreaterThanOrEqual(AUTO_TARGET.webp);
    expect(info.score).toBeGreaterThanOrEqual(AUTO_FLOOR);
    const reference = await decodeToRgb(sharp(dune).resize(560, 560, { fit: 'inside' }));
    expect(ssimulacra2(reference, await decodeToRgb(data))).toBeCloseTo(info.score!, 1);
  });

  it('is smaller than the fixed default on a photo the default over-serves', async () => {
    // At 560 px the default JPEG scores this photo ~83.5: well above the target, so auto can save.
    const ladybird = corpus('photo-mate-LadyBird.jpg');
    const fixed = await engine.optimize(ladybird, { ...SMALL, output_format: 'jpeg' });
    const auto = await engine.optimize(ladybird, { ...SMALL, output_format: 'jpeg', quality: 'auto' });
    expect(auto.info.quality).toBeLessThan(80);
    expect(auto.info.output_size).toBeLessThan(fixed.info.output_size * 0.9);
    expect(auto.info.score).toBeGreaterThanOrEqual(AUTO_TARGET.jpeg);
  });

  it('gives hard images more quality than the default, not less', async () => {
    const hubble = corpus('photo-skimage-hubble_deep_field.jpg');
    const { info } = await engine.optimize(hubble, {
      max_dimension: 400,
      output_format: 'avif',
      quality: 'auto',
    });
    expect(info.quality).toBeGreaterThan(80);
    expect(info.score).toBeGreaterThanOrEqual(AUTO_FLOOR);
  });

  it('PNG: decides palette or lossless by score and reports it; GIF stays fixed', async () => {
    const png = await engine.optimize(corpus('icon-oxygen-konqueror.png'), { quality: 'auto' });
    expect(png.info.output_format).toBe('png');
    expect(png.info.score).toBeGreaterThanOrEqual(AUTO_FLOOR);
    const gifInput = await sharp(corpus('icon-oxygen-konqueror.png')).resize(64).gif().toBuffer();
    const gif = await engine.optimize(gifInput, { quality: 'auto' });
    expect(gif.info).toMatchObject({ output_format: 'gif', auto_quality: true, quality: 80 });
  });
});
