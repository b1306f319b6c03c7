/**
 * What quality "auto" costs, as a ratio: per image and format, the time of one `optimize()` at quality
 * "auto" divided by the time of one at the fixed default (80) of the same image, run one after the
 * other in this process, alternating, `--reps` times (the median of each counts; which auto goes
 * first alternates too). A ratio measured
 * this way holds on a machine shared with other work, where images per second do not; `npm run bench`
 * measures throughput with several images in flight instead.
 *
 * Two autos side by side: "after" is this checkout's engine (the predictor of auto-predict.ts),
 * "before" either this engine's secant search alone (`createAutoEncoder({}, { predict: false })`) or,
 * with --before-engine, the engine of another checkout (its core/engine/src/index.ts, loaded into
 * this process: give that checkout this one's node_modules, e.g. a git worktree with a symlink, so
 * both share one sharp). Bytes and scores are compared per kind × format; the score is the one auto
 * reports, which is the engine's metric on the output.
 *
 * Usage: node test/bench/auto-speed.ts [--kinds LIST] [--formats LIST] [--per-kind N] [--reps N]
 *        [--before-reps N] [--max-dimension N] [--before-engine PATH] [--out FILE]
 *        node test/bench/auto-speed.ts --merge A.json,B.json --out FILE   (one table from several runs,
 *        e.g. one process per format run side by side)
 * Writes results/auto-speed.json and results/auto-speed.md (or FILE and FILE.md).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { closeMetricPool, createAutoEncoder, createEngine } from '@compresso/engine';
import sharp from 'sharp';
import { type CorpusImage, DEFAULT_CORPUS, KINDS, type Kind, loadCorpus } from './corpus.ts';
import { median } from './measure.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    kinds: { type: 'string' },
    formats: { type: 'string' },
    'per-kind': { type: 'string' },
    reps: { type: 'string' },
    'before-reps': { type: 'string' },
    'max-dimension': { type: 'string' },
    out: { type: 'string' },
    'before-engine': { type: 'string' },
    merge: { type: 'string' },
  },
});
const kinds = (values.kinds?.split(',') ?? KINDS.filter((k) => k !== 'illus')) as Kind[];
const formats = (values.formats?.split(',') ?? ['jpeg', 'webp', 'avif']) as ('jpeg' | 'webp' | 'avif')[];
const perKind = Number(values['per-kind'] ?? 4);
const reps = Number(values.reps ?? 3);
/** The before auto is the slowest path by far; fewer runs of it keep a full run within the hour. */
const beforeReps = Math.min(reps, Number(values['before-reps'] ?? reps));
const maxDimension = Number(values['max-dimension'] ?? 2048);
const out = values.out ?? join(HERE, 'results', 'auto-speed.json');

/** The bench's own subset: `count` images evenly spaced over the kind's files sorted by name. */
function spread<T>(items: T[], count: number): T[] {
  if (items.length <= count) return items;
  if (count === 1) return [items[0]!];
  return Array.from({ length: count }, (_, i) => items[Math.round((i * (items.length - 1)) / (count - 1))]!);
}

const corpus = await loadCorpus(DEFAULT_CORPUS);
const images: CorpusImage[] = kinds.flatMap((kind) =>
  spread(
    corpus.filter((i) => i.kind === kind),
    perKind,
  ),
);

const fixed = createEngine({ concurrency: 1 });
const after = createEngine({ concurrency: 1 });
const beforeModule: typeof import('@compresso/engine') | undefined = values['before-engine']
  ? await import(resolve(values['before-engine']))
  : undefined;
const before = beforeModule
  ? beforeModule.createEngine({ concurrency: 1 })
  : createEngine({ concurrency: 1, auto: createAutoEncoder({}, { predict: false }) });

type Engine = typeof fixed;
async function timed(engine: Engine, image: CorpusImage, format: string, quality: 80 | 'auto') {
  const start = performance.now();
  const cpu = process.cpuUsage();
  const result = await engine.optimize(image.bytes, {
    output_format: format as 'jpeg',
    quality,
    max_dimension: maxDimension,
  });
  const used = process.cpuUsage(cpu);
  return { ms: performance.now() - start, cpuMs: (used.user + used.system) / 1000, info: result.info };
}
/**
 * An untimed auto encode of a 64-px image just before a timed one, so the engine's metric thread is
 * running and compiled, as it is in a busy server. Without it the two autos are not compared fairly:
 * a metric thread stops after 10 s idle (metric/index.ts), and the one that waited through the other
 * auto's long run pays for a new thread (module loading, cold code) inside its timed call.
 */
const tiny = await sharp({
  create: { width: 64, height: 48, channels: 3, background: { r: 90, g: 140, b: 200 } },
})
  .png()
  .toBuffer();
async function warm(engine: Engine, format: string) {
  await engine.optimize(tiny, { output_format: format as 'jpeg', quality: 'auto' });
}

interface Row {
  name: string;
  kind: Kind;
  format: string;
  fixedMs: number;
  afterMs: number;
  beforeMs: number;
  afterRatio: number;
  beforeRatio: number;
  /** CPU time of the whole process (main, libvips and metric threads) for one optimize(), median. */
  fixedCpuMs?: number;
  afterCpuMs?: number;
  beforeCpuMs?: number;
  afterCpuRatio?: number;
  beforeCpuRatio?: number;
  afterBytes: number;
  beforeBytes: number;
  afterScore: number;
  beforeScore: number;
  afterSteps: number;
  beforeSteps: number;
  afterQuality: number;
  beforeQuality: number;
}
const started = Date.now();
const merged = values.merge?.split(',').map((file) => JSON.parse(readFileSync(file, 'utf8')));
const rows: Row[] = merged ? merged.flatMap((m) => m.rows) : await measure();

async function measure(): Promise<Row[]> {
  const rows: Row[] = [];
  for (const image of images) {
    for (const format of formats) {
      const f: number[] = [];
      const a: number[] = [];
      const b: number[] = [];
      const fc: number[] = [];
      const ac: number[] = [];
      const bc: number[] = [];
      let afterInfo: Awaited<ReturnType<typeof timed>>['info'] | undefined;
      let beforeInfo: typeof afterInfo;
      // Warm-up: the first call of each path pays for module loading and the metric thread's start.
      await timed(fixed, image, format, 80);
      for (let r = 0; r < reps; r++) {
        const w = await timed(fixed, image, format, 80);
        f.push(w.ms);
        fc.push(w.cpuMs);
        const runAfter = async () => {
          await warm(after, format);
          const x = await timed(after, image, format, 'auto');
          a.push(x.ms);
          ac.push(x.cpuMs);
          afterInfo = x.info;
        };
        const runBefore = async () => {
          if (r >= beforeReps) return;
          await warm(before, format);
          const y = await timed(before, image, format, 'auto');
          b.push(y.ms);
          bc.push(y.cpuMs);
          beforeInfo = y.info;
        };
        // Which auto runs first alternates (use an even --reps): with "after" always first, this
        // tool read one change's JPEG autos 3.25× → 3.60× in CPU time (2026-11-28) where a loop
        // alternating the order measured them 7–10 % cheaper than before the change.
        if (r % 2 === 0) {
          await runAfter();
          await runBefore();
        } else {
          await runBefore();
          await runAfter();
        }
      }
      const row: Row = {
        name: image.name,
        kind: image.kind,
        format,
        fixedMs: median(f),
        afterMs: median(a),
        beforeMs: median(b),
        afterRatio: median(a) / median(f),
        beforeRatio: median(b) / median(f),
        fixedCpuMs: median(fc),
        afterCpuMs: median(ac),
        beforeCpuMs: median(bc),
        afterCpuRatio: median(ac) / median(fc),
        beforeCpuRatio: median(bc) / median(fc),
        afterBytes: afterInfo!.output_size,
        beforeBytes: beforeInfo!.output_size,
        afterScore: afterInfo!.score ?? Number.NaN,
        beforeScore: beforeInfo!.score ?? Number.NaN,
        afterSteps: afterInfo!.auto_steps ?? 0,
        beforeSteps: beforeInfo!.auto_steps ?? 0,
        afterQuality: afterInfo!.quality,
        beforeQuality: beforeInfo!.quality,
      };
      rows.push(row);
      process.stderr.write(
        `${image.name} ${format}: fixed ${row.fixedMs.toFixed(0)} ms, after ${row.afterRatio.toFixed(2)}× (CPU ${row.afterCpuRatio!.toFixed(2)}×, ${row.afterSteps} steps, q${row.afterQuality}, ${row.afterScore}), before ${row.beforeRatio.toFixed(2)}× (CPU ${row.beforeCpuRatio!.toFixed(2)}×, ${row.beforeSteps} steps, q${row.beforeQuality}, ${row.beforeScore}); bytes ${row.afterBytes} vs ${row.beforeBytes}\n`,
      );
    }
  }
  await Promise.all([fixed.close(), after.close(), before.close()]);
  await closeMetricPool();
  await beforeModule?.closeMetricPool();
  return rows;
}

const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
const r1 = (n: number) => Math.round(n * 10) / 10;
const r2 = (n: number) => Math.round(n * 100) / 100;
function summarise(of: Row[]) {
  const sum = (k: keyof Row) => of.reduce((s, r) => s + (r[k] as number), 0);
  return {
    images: of.length,
    afterRatio: r2(mean(of.map((r) => r.afterRatio))),
    beforeRatio: r2(mean(of.map((r) => r.beforeRatio))),
    // Runs recorded before the CPU columns existed have none: NaN, shown as "—".
    afterCpuRatio: r2(mean(of.map((r) => r.afterCpuRatio ?? Number.NaN))),
    beforeCpuRatio: r2(mean(of.map((r) => r.beforeCpuRatio ?? Number.NaN))),
    afterSteps: r1(mean(of.map((r) => r.afterSteps))),
    beforeSteps: r1(mean(of.map((r) => r.beforeSteps))),
    afterBytes: sum('afterBytes'),
    beforeBytes: sum('beforeBytes'),
    bytesChange: r1((sum('afterBytes') / sum('beforeBytes') - 1) * 100),
    afterMeanScore: r1(mean(of.map((r) => r.afterScore))),
    afterMinScore: r1(Math.min(...of.map((r) => r.afterScore))),
    beforeMeanScore: r1(mean(of.map((r) => r.beforeScore))),
    beforeMinScore: r1(Math.min(...of.map((r) => r.beforeScore))),
  };
}
const groups = kinds.flatMap((kind) =>
  formats
    .map((format) => ({ kind, format, of: rows.filter((r) => r.kind === kind && r.format === format) }))
    .filter((g) => g.of.length),
);
const table = groups.map((g) => ({ kind: g.kind, format: g.format, ...summarise(g.of) }));
const perFormat = formats
  .filter((format) => rows.some((r) => r.format === format))
  .map((format) => ({
    format,
    ...summarise(rows.filter((r) => r.format === format)),
  }));
const overall = summarise(rows);

const cpuRatio = (r: number) => (Number.isFinite(r) ? `${r.toFixed(2)}×` : '—');
const lines = [
  `## Quality "auto": cost as a ratio to one fixed-quality encode, before and after`,
  '',
  `${new Date().toISOString().slice(0, 10)}; before: ${values['before-engine'] ?? 'this engine without the predictor'}; ${new Set(rows.map((r) => r.name)).size} images (at most ${perKind} per kind, the bench's subset), resized to fit ${maxDimension} px; per image and format the median of ${reps} alternating runs of fixed Q80 and auto after (${beforeReps} of auto before), one image at a time in one process. Ratio = auto time ÷ fixed time of the same image (the mean over the images of a row; images per second at auto = images per second at the fixed quality ÷ ratio). CPU ratio = the same with the process's CPU time (main, libvips and metric threads), which other work on a shared machine moves much less than wall-clock time, and which is what several images in flight (the bench) pay. Score: SSIMULACRA2 auto reports for its output. ${merged ? `Merged from ${merged.length} runs made side by side (${merged.map((m) => m.formats?.join(',') ?? '?').join(' | ')}).` : `${((Date.now() - started) / 1000).toFixed(0)} s.`}`,
  '',
  '| kind | format | images | ratio before | ratio after | CPU ratio before | CPU ratio after | steps before → after | bytes before | bytes after | change | mean (min) before | mean (min) after |',
  '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ...[
    ...table,
    ...perFormat.map((p) => ({ kind: 'all', ...p })),
    { kind: 'all', format: 'all', ...overall },
  ].map(
    (t) =>
      `| ${t.kind} | ${t.format} | ${t.images} | ${t.beforeRatio.toFixed(2)}× | ${t.afterRatio.toFixed(2)}× | ${cpuRatio(t.beforeCpuRatio)} | ${cpuRatio(t.afterCpuRatio)} | ${t.beforeSteps} → ${t.afterSteps} | ${t.beforeBytes} | ${t.afterBytes} | ${t.bytesChange > 0 ? '+' : ''}${t.bytesChange.toFixed(1)} % | ${t.beforeMeanScore.toFixed(1)} (${t.beforeMinScore.toFixed(1)}) | ${t.afterMeanScore.toFixed(1)} (${t.afterMinScore.toFixed(1)}) |`,
  ),
  '',
];
writeFileSync(
  out,
  `${JSON.stringify({ date: new Date().toISOString(), before: values['before-engine'] ?? 'predict: false', formats, reps, beforeReps, maxDimension, table, perFormat, overall, rows }, null, 2)}\n`,
);
writeFileSync(out.replace(/\.json$/, '.md'), `${lines.join('\n')}`);
process.stdout.write(`${lines.join('\n')}`);
