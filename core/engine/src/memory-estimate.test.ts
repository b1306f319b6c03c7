import { parseCompressOptions } from '@compresso/schema';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { heldTogether } from './byte-semaphore.ts';
import { createEngine } from './engine.ts';
import { DEFAULT_LIMITS } from './limits.ts';
import { estimateInspectBytes, estimateOptimizeBytes, estimateOptimizeClaim } from './memory-estimate.ts';
import { corpus } from './test-support/corpus.ts';
import { pngBomb } from './test-support/fixtures.ts';

const MiB = 1024 * 1024;
const estimate = (bytes: Uint8Array, options: Record<string, unknown>) =>
  estimateOptimizeBytes(bytes, parseCompressOptions(options), DEFAULT_LIMITS);

describe('estimateOptimizeBytes', () => {
  it('grows with the output pixels and costs AVIF more than WebP, JPEG or PNG of the same size', async () => {
    const photo = await sharp(corpus('photo-mate-Dune.jpg'))
      .resize(2560, 1707, { fit: 'cover' })
      .jpeg()
      .toBuffer();
    const webp2048 = await estimate(photo, { output_format: 'webp', max_dimension: 2048 });
    const webp1024 = await estimate(photo, { output_format: 'webp', max_dimension: 1024 });
    const avif1024 = await estimate(photo, { output_format: 'avif', max_dimension: 1024 });
    const jpeg1024 = await estimate(photo, { output_format: 'jpeg', max_dimension: 1024 });
    expect(webp2048).toBeGreaterThan(webp1024);
    expect(avif1024).toBeGreaterThan(webp1024);
    expect(avif1024).toBeGreaterThan(jpeg1024);
    // quality "auto" keeps candidates and metric planes besides the encoder.
    expect(
      await estimate(photo, { output_format: 'webp', max_dimension: 1024, quality: 'auto' }),
    ).toBeGreaterThan(webp1024);
  });

  it('counts the whole-frame decode of a HEVC HEIC, making it dearer than the same pixels as JPEG', async () => {
    const heic = corpus('photo-heic-mate-Dune.heic');
    const jpeg = await sharp(corpus('photo-mate-Dune.jpg'))
      .resize(1680, 1050, { fit: 'fill' })
      .jpeg()
      .toBuffer();
    const options = { output_format: 'jpeg' };
    expect(await estimate(heic, options)).toBeGreaterThan(2 * (await estimate(jpeg, options)));
    expect(estimateInspectBytes(heic, DEFAULT_LIMITS)).toBeGreaterThan(
      estimateInspectBytes(jpeg, DEFAULT_LIMITS),
    );
  });

  it('counts only the base for inputs refused at once: over the pixel limit, unreadable, empty', async () => {
    const base = await estimate(Buffer.from('not an image at all'), {});
    expect(base).toBeGreaterThan(0);
    // 40000×40000 declared: refused from the header, so it must not wait for the whole budget.
    expect(await estimate(pngBomb(40_000, 40_000), { output_format: 'avif' })).toBe(base);
    expect(await estimate(Buffer.alloc(0), {})).toBe(base);
  });
});

describe('estimateOptimizeClaim', () => {
  const claim = (bytes: Uint8Array, options: Record<string, unknown>) =>
    estimateOptimizeClaim(bytes, parseCompressOptions(options), DEFAULT_LIMITS);

  it('declares the metric part of quality auto as shared, and nothing for a fixed quality', async () => {
    const arc = corpus('graphic-mate-Arc-Colors-Transparent.png');
    const fixed = await claim(arc, { output_format: 'webp', quality: 80 });
    expect(fixed.shared).toBeUndefined();
    const auto = await claim(arc, { output_format: 'webp', quality: 'auto', max_dimension: 2048 });
    expect(auto.bytes).toBe(
      await estimate(arc, { output_format: 'webp', quality: 'auto', max_dimension: 2048 }),
    );
    expect(auto.shared!.bytes).toBeGreaterThan(0);
    expect(auto.shared!.bytes).toBeLessThan(auto.bytes);
    // PNG under auto takes no search: no metric.
    expect((await claim(arc, { output_format: 'png', quality: 'auto' })).shared).toBeUndefined();
  });

  it('counts two large transparent autos for less together than apart, two opaque photos for the sum', async () => {
    const arc = await claim(corpus('graphic-mate-Arc-Colors-Transparent.png'), {
      output_format: 'webp',
      quality: 'auto',
      max_dimension: 2048,
    });
    expect(heldTogether([arc, arc])).toBeLessThan(2 * arc.bytes);
    // Within the default budget together (768 MiB); apart they are over it.
    expect(heldTogether([arc, arc])).toBeLessThanOrEqual(768 * MiB);
    expect(2 * arc.bytes).toBeGreaterThan(768 * MiB);
    const photo = await claim(corpus('photo-mate-Dune.jpg'), { output_format: 'jpeg', quality: 'auto' });
    expect(heldTogether([photo, photo])).toBe(2 * photo.bytes);
  });
});

describe('engine admission by memory', () => {
  it('runs images larger than a tiny budget one at a time, every one to completion', async () => {
    const engine = createEngine({ memoryBudget: MiB, concurrency: 2 });
    expect(engine.stats()).toMatchObject({ memoryBudget: MiB, concurrency: 2 });
    const photo = await sharp(corpus('photo-mate-Dune.jpg')).resize(1200).jpeg().toBuffer();
    // Watch the engine on every turn of the event loop while the images run.
    let peakActive = 0;
    let peakInUse = 0;
    let watching = true;
    const watch = () => {
      const stats = engine.stats();
      peakActive = Math.max(peakActive, stats.active);
      peakInUse = Math.max(peakInUse, stats.memoryInUse);
      if (watching) setImmediate(watch);
    };
    watch();
    const outs = await Promise.all([0, 1, 2].map(() => engine.optimize(photo, { output_format: 'webp' })));
    watching = false;
    expect(outs.map((o) => o.info.output_format)).toEqual(['webp', 'webp', 'webp']);
    // Each image is estimated over the whole 1 MiB budget, so each ran alone.
    expect(peakActive).toBe(1);
    expect(peakInUse).toBeGreaterThan(MiB);
    expect(engine.stats()).toMatchObject({ active: 0, waiting: 0, memoryInUse: 0, memoryWaiting: 0 });
    await engine.close();
  });

  it('runs two large transparent autos side by side in the default budget, as their shared metric allows', async () => {
    const engine = createEngine({ concurrency: 2 });
    const arc = corpus('graphic-mate-Arc-Colors-Transparent.png');
    let peakActive = 0;
    let watching = true;
    const watch = () => {
      peakActive = Math.max(peakActive, engine.stats().active);
      if (watching) setImmediate(watch);
    };
    watch();
    const options = { output_format: 'webp', quality: 'auto', max_dimension: 2048 } as const;
    const outs = await Promise.all([0, 1].map(() => engine.optimize(arc, options)));
    watching = false;
    expect(outs.map((o) => o.info.width)).toEqual([2048, 2048]);
    // Counted apart (≈ 444 MiB each) they would run one after the other.
    expect(2 * (await estimate(arc, options))).toBeGreaterThan(engine.stats().memoryBudget);
    expect(peakActive).toBe(2);
    await engine.close();
  });
});
