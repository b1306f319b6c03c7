/**
 * What one optimize() really holds, against what the engine's admission estimate
 * (core/engine/src/memory-estimate.ts) counts for it: each case runs alone in a fresh process, which
 * first warms up (the metric threads started, every encoder loaded, on a 64-px copy of the same
 * image) and then runs the case once. Held = the process's peak resident set (getrusage maxrss) less
 * its resident set just before the case: what the case added at its peak, as admission must count it.
 *
 * Usage (with the allocator settings `npm start` runs with, scripts/with-allocator.sh):
 *   MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=131072 \
 *     node test/bench/memory-per-pixel.ts [--max-dimension N] [--out FILE]
 * Writes results/memory-per-pixel.json and .md (or FILE and FILE.md). About a minute.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createEngine, DEFAULT_LIMITS } from '@compresso/engine';
import sharp from 'sharp';
import { estimateOptimizeBytes } from '../../core/engine/src/memory-estimate.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const CORPUS = join(HERE, '../../../shared/corpus');
const MiB = 1024 * 1024;

const { values } = parseArgs({
  options: {
    child: { type: 'string' },
    'max-dimension': { type: 'string' },
    out: { type: 'string' },
  },
});

interface Case {
  file: string;
  format: 'jpeg' | 'webp' | 'avif';
  quality: 80 | 'auto';
}

async function runChild(spec: string): Promise<void> {
  const { file, format, quality, maxDimension } = JSON.parse(spec) as Case & { maxDimension: number };
  const input = readFileSync(join(CORPUS, file));
  const engine = createEngine({ concurrency: 1, memoryBudget: 64 * 1024 * MiB });
  const options = { output_format: format, quality, max_dimension: maxDimension };
  const tiny = await sharp(input).resize(64, 64, { fit: 'inside' }).png().toBuffer();
  for (let i = 0; i < 2; i++) {
    await engine.optimize(tiny, { ...options, quality: 'auto' });
    await engine.optimize(tiny, { ...options, quality: 80 });
  }
  global.gc?.();
  const before = process.memoryUsage().rss;
  const peakBefore = process.resourceUsage().maxRSS * 1024;
  const out = await engine.optimize(input, options);
  const peak = process.resourceUsage().maxRSS * 1024;
  process.stdout.write(
    JSON.stringify({
      held: peak - before,
      warmupPeakOverBefore: peakBefore - before,
      width: out.info.width,
      height: out.info.height,
    }),
  );
  process.exit(0);
}

if (values.child) {
  await runChild(values.child);
} else {
  const maxDimension = Number(values['max-dimension'] ?? 2048);
  const files = [
    'photo-mate-Dune.jpg',
    'photo-skimage-astronaut.png',
    'screenshot-gimp-multi-window.png',
    'graphic-sharpfixture-alpha-paper.png',
    'graphic-mate-Arc-Colors-Transparent.png',
    'icon-oxygen-konqueror.png',
  ];
  const rows: Record<string, unknown>[] = [];
  for (const file of files) {
    const input = readFileSync(join(CORPUS, file));
    const { hasAlpha } = await sharp(input).metadata();
    for (const format of ['jpeg', 'webp', 'avif'] as const) {
      for (const quality of [80, 'auto'] as const) {
        const spec = JSON.stringify({ file, format, quality, maxDimension });
        const child = spawnSync(
          process.execPath,
          ['--expose-gc', fileURLToPath(import.meta.url), '--child', spec],
          { encoding: 'utf8', env: process.env },
        );
        if (child.status !== 0) throw new Error(`${spec}: ${child.stderr}`);
        const m = JSON.parse(child.stdout) as { held: number; width: number; height: number };
        const pixels = m.width * m.height;
        const estimate = await estimateOptimizeBytes(
          input,
          {
            output_format: format,
            quality,
            max_dimension: maxDimension,
            strip_exif: true,
            png_to_jpeg: false,
          },
          DEFAULT_LIMITS,
        );
        const row = {
          file,
          alpha: hasAlpha ?? false,
          format,
          quality,
          width: m.width,
          height: m.height,
          heldMiB: Math.round((m.held / MiB) * 10) / 10,
          estimateMiB: Math.round((estimate / MiB) * 10) / 10,
          heldPerPixel: Math.round((m.held / pixels) * 10) / 10,
          ratio: Math.round((m.held / estimate) * 100) / 100,
        };
        rows.push(row);
        console.log(JSON.stringify(row));
      }
    }
  }
  const out = values.out ?? join(HERE, 'results', 'memory-per-pixel.json');
  writeFileSync(
    out,
    `${JSON.stringify({ date: new Date().toISOString(), maxDimension, mallocArenaMax: process.env.MALLOC_ARENA_MAX ?? null, rows }, null, 2)}\n`,
  );
  const table = [
    '| image | alpha | format | quality | output | held MiB | estimate MiB | held ÷ estimate | held B/px |',
    '| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.file} | ${r.alpha ? 'yes' : 'no'} | ${r.format} | ${r.quality} | ${r.width} × ${r.height} | ${r.heldMiB} | ${r.estimateMiB} | ${r.ratio} | ${r.heldPerPixel} |`,
    ),
  ];
  writeFileSync(out.replace(/\.json$/, '.md'), `${table.join('\n')}\n`);
}
