/**
 * What one optimize() really holds, against what the engine's admission estimate
 * (core/engine/src/memory-estimate.ts) counts for it: each case runs alone in a fresh process, which
 * first warms up (the metric threads started, every encoder loaded, on a 64-px copy of the same
 * image) and then runs the case once. Held = the process's peak resident set (getrusage maxrss) less
 * its resident set just before the case: what the case added at its peak, as admission must count it.
 *
 * With --pairs, two quality-"auto" jobs run side by side in each fresh process instead (both warmed
 * up, then started together), and what they held together is set against what the engine's
 * admission counts for the two together (ByteSemaphore's `heldTogether` over their claims: auto's
 * metric part is shared, memory-estimate.ts).
 *
 * With --metric-thread, what a metric thread itself holds when searches of large transparent
 * images (two references each) and of photos run side by side: the thread's entry (worker.ts) is
 * called in a fresh process with each image's references in turn, four rounds, every call a score
 * (so its cache keeps two and prepares the others again each time, as a thread shared by two
 * searches does), and the process's resident growth is divided by the largest image's pixels: what
 * memory-estimate.ts's METRIC_CEILING_PER_PIXEL must cover.
 *
 * Usage (with the allocator settings `npm start` runs with, scripts/with-allocator.sh):
 *   MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=131072 \
 *     node test/bench/memory-per-pixel.ts [--pairs | --metric-thread] [--max-dimension N] [--out FILE]
 * Writes results/memory-per-pixel.json and .md, with --pairs results/memory-pairs.json and .md, with
 * --metric-thread results/memory-metric-thread.json (or FILE and FILE.md). A minute or less each.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  ALPHA_BACKGROUNDS,
  createEngine,
  DEFAULT_LIMITS,
  heldTogether,
  type RgbImage,
} from '@compresso/engine';
import sharp from 'sharp';
import { estimateOptimizeBytes, estimateOptimizeClaim } from '../../core/engine/src/memory-estimate.ts';
import { decodeToRgbs } from '../../core/engine/src/metric/index.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const CORPUS = join(HERE, '../../../shared/corpus');
const MiB = 1024 * 1024;

const { values } = parseArgs({
  options: {
    child: { type: 'string' },
    pairs: { type: 'boolean' },
    'metric-thread': { type: 'boolean' },
    'thread-child': { type: 'string' },
    'max-dimension': { type: 'string' },
    out: { type: 'string' },
  },
});

interface Case {
  file: string;
  format: 'jpeg' | 'webp' | 'avif';
  quality: 80 | 'auto';
}

/** Write the rows as results/NAME.json (or --out) and the table beside it as .md. */
function writeResults(name: string, maxDimension: number, rows: unknown[], table: string[]): void {
  const out = values.out ?? join(HERE, 'results', `${name}.json`);
  writeFileSync(
    out,
    `${JSON.stringify({ date: new Date().toISOString(), maxDimension, mallocArenaMax: process.env.MALLOC_ARENA_MAX ?? null, rows }, null, 2)}\n`,
  );
  writeFileSync(out.replace(/\.json$/, '.md'), `${table.join('\n')}\n`);
}

/** One case (or, with `files`, several jobs started together) in this fresh process. */
async function runChild(spec: string): Promise<void> {
  const { file, files, format, quality, maxDimension } = JSON.parse(spec) as Case & {
    files?: string[];
    maxDimension: number;
  };
  const inputs = (files ?? [file]).map((name) => readFileSync(join(CORPUS, name)));
  const engine = createEngine({ concurrency: inputs.length, memoryBudget: 64 * 1024 * MiB });
  const options = { output_format: format, quality, max_dimension: maxDimension };
  for (const input of inputs) {
    const tiny = await sharp(input).resize(64, 64, { fit: 'inside' }).png().toBuffer();
    for (let i = 0; i < 2; i++) {
      await engine.optimize(tiny, { ...options, quality: 'auto' });
      await engine.optimize(tiny, { ...options, quality: 80 });
    }
  }
  global.gc?.();
  const before = process.memoryUsage().rss;
  const peakBefore = process.resourceUsage().maxRSS * 1024;
  const outs = await Promise.all(inputs.map((input) => engine.optimize(input, options)));
  const peak = process.resourceUsage().maxRSS * 1024;
  process.stdout.write(
    JSON.stringify({
      held: peak - before,
      warmupPeakOverBefore: peakBefore - before,
      width: outs[0]!.info.width,
      height: outs[0]!.info.height,
      sizes: outs.map((o) => [o.info.width, o.info.height]),
    }),
  );
  process.exit(0);
}

/**
 * Run one spec in a fresh process through `flag` (--child: optimize() jobs; --thread-child: the metric
 * thread's entry); npm start's allocator settings come from the environment.
 */
function inChild<T>(flag: '--child' | '--thread-child', spec: string): T {
  const child = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), flag, spec], {
    encoding: 'utf8',
    env: process.env,
  });
  if (child.status !== 0) throw new Error(`${spec}: ${child.stderr}`);
  return JSON.parse(child.stdout) as T;
}

/** Bytes in MiB, to a tenth. */
const mib = (bytes: number) => Math.round((bytes / MiB) * 10) / 10;

interface JobsHeld {
  held: number;
  width: number;
  height: number;
  sizes: [number, number][];
}

/**
 * Pairs of auto jobs that the budget's sharing rule decides about: transparent images into WebP and
 * AVIF (two prepared references each, where sharing saves most), a transparent one beside an opaque
 * one, and opaque photos (where it saves nothing).
 */
const PAIRS: { files: [string, string]; format: 'jpeg' | 'webp' | 'avif' }[] = [
  {
    files: ['graphic-mate-Arc-Colors-Transparent.png', 'graphic-mate-Arc-Colors-Transparent.png'],
    format: 'webp',
  },
  { files: ['illus-mate-Gulp.png', 'illus-mate-Gulp.png'], format: 'webp' },
  { files: ['graphic-mate-Arc-Colors-Transparent.png', 'illus-mate-Gulp.png'], format: 'webp' },
  { files: ['graphic-mate-Arc-Colors-Transparent.png', 'graphic-debian-emerald-logo.png'], format: 'avif' },
  { files: ['illus-mate-Gulp.png', 'illus-mate-Gulp.png'], format: 'avif' },
  {
    files: ['graphic-sharpfixture-alpha-paper.png', 'graphic-mate-Arc-Colors-Transparent.png'],
    format: 'webp',
  },
  { files: ['illus-mate-Gulp.png', 'photo-mate-Dune.jpg'], format: 'webp' },
  { files: ['photo-mate-Dune.jpg', 'photo-mate-LadyBird.jpg'], format: 'jpeg' },
  { files: ['photo-mate-Dune.jpg', 'photo-skimage-astronaut.png'], format: 'webp' },
  { files: ['photo-mate-LadyBird.jpg', 'photo-mate-TwoWings.jpg'], format: 'avif' },
];

async function runPairs(maxDimension: number): Promise<void> {
  const rows: Record<string, unknown>[] = [];
  for (const { files, format } of PAIRS) {
    const spec = JSON.stringify({ files, format, quality: 'auto', maxDimension });
    const m = inChild<JobsHeld>('--child', spec);
    const options = {
      output_format: format,
      quality: 'auto' as const,
      max_dimension: maxDimension,
      strip_exif: true,
      png_to_jpeg: false,
    };
    const claims = await Promise.all(
      files.map((file) => estimateOptimizeClaim(readFileSync(join(CORPUS, file)), options, DEFAULT_LIMITS)),
    );
    const apart = claims.reduce((sum, c) => sum + c.bytes, 0);
    const together = heldTogether(claims);
    const row = {
      files,
      format,
      sizes: m.sizes.map(([w, h]) => `${w} × ${h}`),
      heldMiB: mib(m.held),
      countedMiB: mib(together),
      countedApartMiB: mib(apart),
      ratio: Math.round((m.held / together) * 100) / 100,
    };
    rows.push(row);
    console.log(JSON.stringify(row));
  }
  const table = [
    '| images (auto, side by side) | format | outputs | held together MiB | counted together MiB | counted apart MiB | held ÷ counted |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${(r.files as string[]).join(' + ')} | ${r.format} | ${(r.sizes as string[]).join(', ')} | ${r.heldMiB} | ${r.countedMiB} | ${r.countedApartMiB} | ${r.ratio} |`,
    ),
  ];
  writeResults('memory-pairs', maxDimension, rows, table);
}

/** In this fresh process: the metric thread's entry over the images' references, in turn. */
async function runThreadChild(spec: string): Promise<void> {
  const { files, maxDimension } = JSON.parse(spec) as { files: string[]; maxDimension: number };
  const score = (await import('../../core/engine/src/metric/worker.ts')).default;
  const images: { references: RgbImage[]; candidates: RgbImage[] }[] = [];
  for (const file of files) {
    const source = sharp(join(CORPUS, file)).resize(maxDimension, maxDimension, {
      fit: 'inside',
      withoutEnlargement: true,
    });
    const { hasAlpha } = await sharp(join(CORPUS, file)).metadata();
    const backgrounds = hasAlpha ? ALPHA_BACKGROUNDS : [{ r: 128, g: 128, b: 128 }];
    images.push({
      references: await decodeToRgbs(await source.clone().png().toBuffer(), backgrounds),
      candidates: await decodeToRgbs(await source.clone().webp({ quality: 60 }).toBuffer(), backgrounds),
    });
  }
  const tiny: RgbImage = { width: 8, height: 8, data: new Uint8Array(8 * 8 * 3).fill(128) };
  score({ referenceId: 1, reference: tiny, distorted: tiny });
  const before = process.memoryUsage().rss;
  for (let round = 0; round < 4; round++)
    images.forEach(({ references, candidates }, i) => {
      references.forEach((reference, b) => {
        score({ referenceId: 100 + 2 * i + b, reference, distorted: candidates[b]! });
      });
    });
  const largest = Math.max(...images.map((i) => i.references[0]!.width * i.references[0]!.height));
  process.stdout.write(
    JSON.stringify({ held: process.resourceUsage().maxRSS * 1024 - before, largestPixels: largest }),
  );
  process.exit(0);
}

/** Searches side by side, as their metric thread sees them (see --metric-thread above). */
const THREAD_CASES: string[][] = [
  ['graphic-mate-Arc-Colors-Transparent.png', 'illus-mate-Gulp.png'],
  ['graphic-debian-emerald-logo.png', 'graphic-mate-Arc-Colors-Transparent.png'],
  [
    'graphic-sharpfixture-alpha-paper.png',
    'graphic-mate-Arc-Colors-Transparent.png',
    'graphic-debian-emerald-logo.png',
  ],
  ['photo-mate-Dune.jpg', 'photo-mate-LadyBird.jpg', 'photo-mate-TwoWings.jpg'],
  ['graphic-mate-Arc-Colors-Transparent.png', 'photo-mate-LadyBird.jpg'],
];

function runMetricThread(maxDimension: number): void {
  const rows = THREAD_CASES.map((files) => {
    const m = inChild<{ held: number; largestPixels: number }>(
      '--thread-child',
      JSON.stringify({ files, maxDimension }),
    );
    const row = {
      files,
      heldMiB: mib(m.held),
      largestPixels: m.largestPixels,
      heldPerLargestPixel: Math.round((m.held / m.largestPixels) * 10) / 10,
    };
    console.log(JSON.stringify(row));
    return row;
  });
  const table = [
    '| images searched side by side (their references in turn, four rounds) | held MiB | B per pixel of the largest |',
    '| --- | ---: | ---: |',
    ...rows.map((r) => `| ${r.files.join(' + ')} | ${r.heldMiB} | ${r.heldPerLargestPixel} |`),
  ];
  writeResults('memory-metric-thread', maxDimension, rows, table);
}

if (values.child) {
  await runChild(values.child);
} else if (values['thread-child']) {
  await runThreadChild(values['thread-child']);
} else if (values['metric-thread']) {
  runMetricThread(Number(values['max-dimension'] ?? 2048));
} else if (values.pairs) {
  await runPairs(Number(values['max-dimension'] ?? 2048));
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
        const m = inChild<JobsHeld>('--child', JSON.stringify({ file, format, quality, maxDimension }));
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
          heldMiB: mib(m.held),
          estimateMiB: mib(estimate),
          heldPerPixel: Math.round((m.held / pixels) * 10) / 10,
          ratio: Math.round((m.held / estimate) * 100) / 100,
        };
        rows.push(row);
        console.log(JSON.stringify(row));
      }
    }
  }
  const table = [
    '| image | alpha | format | quality | output | held MiB | estimate MiB | held ÷ estimate | held B/px |',
    '| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.file} | ${r.alpha ? 'yes' : 'no'} | ${r.format} | ${r.quality} | ${r.width} × ${r.height} | ${r.heldMiB} | ${r.estimateMiB} | ${r.ratio} | ${r.heldPerPixel} |`,
    ),
  ];
  writeResults('memory-per-pixel', maxDimension, rows, table);
}
