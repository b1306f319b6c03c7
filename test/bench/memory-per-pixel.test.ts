import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseCompressOptions } from '@compresso/schema';
import { describe, expect, it } from 'vitest';
import { heldTogether } from '../../core/engine/src/byte-semaphore.ts';
import { DEFAULT_LIMITS } from '../../core/engine/src/limits.ts';
import {
  estimateOptimizeBytes,
  estimateOptimizeClaim,
  METRIC_CEILING_PER_PIXEL,
} from '../../core/engine/src/memory-estimate.ts';

const MiB = 1024 * 1024;
const CORPUS = join(import.meta.dirname, '../../../shared/corpus');

interface Row {
  file: string;
  format: 'jpeg' | 'webp' | 'avif';
  quality: 80 | 'auto';
  heldMiB: number;
}

/**
 * What the engine admits an image for must be at least what it was measured to hold
 * (memory-per-pixel.ts, results/memory-per-pixel.json: one job alone in a fresh process, peak RSS
 * over the RSS before it). Until 2026-11-28 quality "auto" was counted at 32 B a pixel and held up to
 * three times its estimate, so the budget let two large autos run together far past it.
 */
describe('memory estimate against measured peaks', () => {
  const { maxDimension, rows } = JSON.parse(
    readFileSync(join(import.meta.dirname, 'results/memory-per-pixel.json'), 'utf8'),
  ) as { maxDimension: number; rows: Row[] };

  it('covers every measured case, fixed quality and auto, opaque and transparent', async () => {
    expect(rows.length).toBeGreaterThanOrEqual(36);
    const short: string[] = [];
    for (const row of rows) {
      const input = readFileSync(join(CORPUS, row.file));
      const options = parseCompressOptions({
        output_format: row.format,
        quality: row.quality,
        max_dimension: maxDimension,
      });
      const estimateMiB = (await estimateOptimizeBytes(input, options, DEFAULT_LIMITS)) / MiB;
      if (estimateMiB < row.heldMiB)
        short.push(
          `${row.file} ${row.format} ${row.quality}: held ${row.heldMiB} MiB, estimate ${estimateMiB}`,
        );
    }
    expect(short).toEqual([]);
  });

  it('counts a transparent image into WebP or AVIF for two backgrounds, into JPEG for one', async () => {
    const arc = readFileSync(join(CORPUS, 'graphic-mate-Arc-Colors-Transparent.png'));
    const at = (output_format: string, quality: 80 | 'auto') =>
      estimateOptimizeBytes(arc, parseCompressOptions({ output_format, quality }), DEFAULT_LIMITS);
    const webpAuto = (await at('webp', 'auto')) - (await at('webp', 80));
    const jpegAuto = (await at('jpeg', 'auto')) - (await at('jpeg', 80));
    expect(webpAuto).toBeGreaterThan(1.5 * jpegAuto);
  });

  /**
   * Two autos side by side (memory-per-pixel.ts --pairs, results/memory-pairs.json): what admission
   * counts for them together (their metric part shared, ByteSemaphore's heldTogether) must be at
   * least what they were measured to hold together.
   */
  it('counts two autos running side by side for at least what they held together', async () => {
    const pairs = JSON.parse(
      readFileSync(join(import.meta.dirname, 'results/memory-pairs.json'), 'utf8'),
    ) as {
      maxDimension: number;
      rows: { files: string[]; format: 'jpeg' | 'webp' | 'avif'; heldMiB: number }[];
    };
    expect(pairs.rows.length).toBeGreaterThanOrEqual(10);
    const short: string[] = [];
    let saved = 0;
    for (const row of pairs.rows) {
      const options = parseCompressOptions({
        output_format: row.format,
        quality: 'auto',
        max_dimension: pairs.maxDimension,
      });
      const claims = await Promise.all(
        row.files.map((file) =>
          estimateOptimizeClaim(readFileSync(join(CORPUS, file)), options, DEFAULT_LIMITS),
        ),
      );
      const together = heldTogether(claims) / MiB;
      if (together < row.heldMiB)
        short.push(`${row.files.join(' + ')} ${row.format}: held ${row.heldMiB} MiB, counted ${together}`);
      if (together < claims.reduce((sum, c) => sum + c.bytes, 0) / MiB) saved++;
    }
    expect(short).toEqual([]);
    // The rule does take something off for the transparent pairs.
    expect(saved).toBeGreaterThanOrEqual(5);
  });

  it("counts a metric thread's ceiling over what one was measured to hold for searches side by side", () => {
    const thread = JSON.parse(
      readFileSync(join(import.meta.dirname, 'results/memory-metric-thread.json'), 'utf8'),
    ) as { rows: { files: string[]; heldPerLargestPixel: number }[] };
    expect(thread.rows.length).toBeGreaterThanOrEqual(5);
    for (const row of thread.rows)
      expect(row.heldPerLargestPixel, row.files.join(' + ')).toBeLessThan(METRIC_CEILING_PER_PIXEL);
  });
});
