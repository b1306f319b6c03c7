/**
 * Compresso benchmark: engine vs raw sharp vs Debian's reference encoders over the shared corpus,
 * per image kind. `npm run bench -- --help` for flags; test/bench/README.md for what the columns mean.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  ALPHA_BACKGROUNDS,
  AUTO_FLOOR,
  AVIF_EFFORT,
  closeMetricPool,
  createBisectionAutoEncoder,
  createEngine,
  DEFAULT_LIMITS,
  DEFAULT_MEMORY_BUDGET,
  type Engine,
  METRIC_THREADS,
  openSource,
  prepare,
  WEBP_EFFORT,
} from '@compresso/engine';
import { DEFAULT_QUALITY, type OutputFormat, parseCompressOptions } from '@compresso/schema';
import sharp from 'sharp';
import { type CorpusImage, DEFAULT_CORPUS, KINDS, type Kind, loadCorpus } from './corpus.ts';
import { fillJobs, MiB, RssSampler, round, runBatch, runRounds } from './measure.ts';
import { type Reference, referenceFrom, scoreOutput } from './metric.ts';
import { rawEncode } from './raw.ts';
import { discoverReferenceTools, type ReferenceTool, runTool } from './reference.ts';
import { type AutoVsFixed, type BenchResult, type Mode, markdown, type Row } from './report.ts';
import { type AtQuality, worstCaseQuality } from './worst-case.ts';

/**
 * Images per kind in a default pass. The corpus has 14 photos and 5 screenshots; four of each,
 * spread over the names, keep every kind represented while a full pass (auto and reference
 * encoders included) stays practical on a shared 2-core machine. --all measures everything.
 */
const DEFAULT_PER_KIND = 4;
const HERE = dirname(fileURLToPath(import.meta.url));
const BENCH_FORMATS = ['jpeg', 'webp', 'avif', 'png'] as const satisfies readonly OutputFormat[];
type BenchFormat = (typeof BENCH_FORMATS)[number];

const USAGE = `Usage: node test/bench/run.ts [flags]

  --quick                a few small images, webp only (unless --formats): a smoke test
  --kinds LIST           comma-separated kinds (${KINDS.join(',')}); default all
  --formats LIST         comma-separated formats (${BENCH_FORMATS.join(',')}); default all
  --per-kind N           at most N images of each kind, spread over the kind's files sorted by
                         name (default 4: a full pass stays under ~10 minutes on 2 cores)
  --all                  every image of the corpus (overrides --per-kind)
  --max-dimension N      resize inputs to fit N×N pixels (default 2048, the typical web case)
  --concurrency N        images in flight, for the engine and raw sharp alike (default: cores)
  --memory-budget-mb N   the engine's memory budget (default: the engine's, DEFAULT_MEMORY_BUDGET,
                         768 MiB): what the "held by memory" column measures against
  --repeat N             timed passes per batch, engine and raw sharp alternating; the best
                         counts (default 2, quality "auto" too; the --search mode runs once; 1 with --quick)
  --min-batch-seconds S  a pass repeats its batch until the rounds have taken S seconds together
                         and counts the mean round (default 1; 0 with --quick): batches of small
                         images otherwise finish in tens of milliseconds, too short to time
  --no-reference         skip cwebp / avifenc / pngquant / ImageMagick
  --no-auto              skip quality "auto"
  --search               also run the bisection "auto" used before issue 11 (mode "search",
                         createBisectionAutoEncoder) on the same images, for a before/after in one run
  --no-worst-case        skip the search for the fixed quality that reaches the floor on every
                         image of a kind (the yardstick auto's bytes are compared with)
  --no-score             skip SSIMULACRA2 scoring
  --no-http              skip the HTTP path (http.ts: POST /api/v1/compress vs the engine)
  --no-scale             skip the scaled-out setup (scale.ts: req/s and p99, embedded vs
                         PostgreSQL + Redis with 1 and 2 API processes)
  --corpus DIR           image directory (default ../shared/corpus from the repo root)
  --out FILE             write the JSON here (and FILE.md) instead of test/bench/results/
  --help`;

function fail(message: string): never {
  process.stderr.write(`bench: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function list<T extends string>(value: string | undefined, allowed: readonly T[], flag: string): T[] {
  if (value === undefined) return [...allowed];
  const items = value
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  const bad = items.filter((s) => !(allowed as readonly string[]).includes(s));
  if (bad.length || items.length === 0)
    fail(`${flag}: expected a comma-separated list of ${allowed.join(', ')}, received "${value}"`);
  return items as T[];
}

function positiveInt(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) fail(`${flag}: expected a positive integer, received "${value}"`);
  return n;
}

let parsed: ReturnType<typeof parseFlags>;
function parseFlags() {
  return parseArgs({
    allowNegative: true,
    options: {
      quick: { type: 'boolean', default: false },
      kinds: { type: 'string' },
      formats: { type: 'string' },
      'per-kind': { type: 'string' },
      'max-dimension': { type: 'string' },
      concurrency: { type: 'string' },
      repeat: { type: 'string' },
      'min-batch-seconds': { type: 'string' },
      'memory-budget-mb': { type: 'string' },
      all: { type: 'boolean', default: false },
      reference: { type: 'boolean', default: true },
      auto: { type: 'boolean', default: true },
      search: { type: 'boolean', default: false },
      'worst-case': { type: 'boolean', default: true },
      score: { type: 'boolean', default: true },
      http: { type: 'boolean', default: true },
      scale: { type: 'boolean', default: true },
      corpus: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  }).values;
}
try {
  parsed = parseFlags();
} catch (error) {
  fail((error as Error).message);
}
if (parsed.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}

const quick = parsed.quick;
const kinds = list(parsed.kinds, KINDS, '--kinds');
const formats = list(parsed.formats ?? (quick ? 'webp' : undefined), BENCH_FORMATS, '--formats');
const maxDimension = positiveInt(parsed['max-dimension'], '--max-dimension', 2048);
const concurrency = positiveInt(parsed.concurrency, '--concurrency', availableParallelism());
const repeat = positiveInt(parsed.repeat, '--repeat', parsed.quick ? 1 : 2);
const memoryBudget =
  positiveInt(parsed['memory-budget-mb'], '--memory-budget-mb', DEFAULT_MEMORY_BUDGET / MiB) * MiB;
const minBatchSeconds = (() => {
  const value = parsed['min-batch-seconds'];
  if (value === undefined) return parsed.quick ? 0 : 1;
  const n = Number(value);
  if (!(Number.isFinite(n) && n >= 0))
    fail(`--min-batch-seconds: expected a number of seconds ≥ 0, received "${value}"`);
  return n;
})();
const perKind = parsed.all
  ? Number.MAX_SAFE_INTEGER
  : positiveInt(parsed['per-kind'], '--per-kind', DEFAULT_PER_KIND);
const corpusDir = resolve(parsed.corpus ?? DEFAULT_CORPUS);
const withReference = parsed.reference;
const withAuto = parsed.auto;
const withScore = parsed.score;
const withSearch = parsed.search;
// --quick is a smoke test that must stay well under a minute: the worst-case search is left out.
const withWorstCase = parsed['worst-case'] && !quick;
const minJobs = 2 * concurrency;

/** PNG is written for graphics; a photo as PNG is never what anyone should ship. */
function formatsFor(kind: Kind): BenchFormat[] {
  return formats.filter((f) => f !== 'png' || kind !== 'photo');
}

/** `count` items evenly spaced over `items` (first and last included), for a varied subset. */
function spread<T>(items: T[], count: number): T[] {
  if (items.length <= count) return items;
  if (count === 1) return [items[0]!];
  return Array.from({ length: count }, (_, i) => items[Math.round((i * (items.length - 1)) / (count - 1))]!);
}

function pickImages(all: CorpusImage[]): CorpusImage[] {
  const chosen: CorpusImage[] = [];
  for (const kind of kinds) {
    let ofKind = all.filter((i) => i.kind === kind);
    if (quick) {
      // The smallest image of each kind, and only small ones: a smoke run must stay well under a minute.
      ofKind = ofKind
        .filter((i) => i.width * i.height > 0 && i.width * i.height <= 600_000)
        .sort((a, b) => a.width * a.height - b.width * b.height)
        .slice(0, 1);
    }
    chosen.push(...spread(ofKind, perKind));
  }
  return chosen;
}

interface Encoded {
  image: CorpusImage;
  bytes: Uint8Array;
  format: OutputFormat;
  quality: number;
  /** Quality "auto": candidate encodes scored (info.auto_steps). */
  steps?: number;
  score?: number;
}

interface Batch {
  kind: Kind;
  format: BenchFormat;
  mode: Mode;
  encoder: string;
  images: CorpusImage[];
  /** Jobs in one round, and the mean seconds of a round (runRounds: `rounds` of them, --min-batch-seconds). */
  jobs: number;
  seconds: number;
  rounds: number;
  /**
   * CPU time of the whole process over one round of the batch (main, libvips and metric threads), seconds. Only
   * one batch runs at a time, so it is that batch's. Unlike `seconds` it does not count a core left
   * idle at the end of a small batch, which penalises the encoder whose per-image times vary most
   * (auto: 1 to 4 candidates) — a long stream of images (a catalog) has no such tail.
   */
  cpuSeconds?: number;
  /**
   * Engine batches: the share of samples (every 20 ms) in which an image waited for the engine's
   * memory budget while fewer than `concurrency` ran — a core the budget left idle. Quality "auto"
   * is counted at what it holds (memory-estimate.ts: 95 B a pixel more than the encoder, 155 for a
   * transparent image into WebP or AVIF, less what autos running together share of the metric
   * thread), so two large autos may not fit the budget together and run one after the other.
   */
  memoryHeld?: number;
  peakRss?: number;
  outputs: Map<string, Encoded>;
  errors: string[];
  identicalToEngine?: number;
}

const notes: string[] = [];
const batches: Batch[] = [];

function log(message: string) {
  process.stderr.write(`${message}\n`);
}

/** The engine with the pre-issue-11 bisection as its "auto", for mode "search". */
let searchEngine: Engine | undefined;

async function engineBatch(
  defaultEngine: Engine,
  kind: Kind,
  format: BenchFormat,
  mode: Mode,
  images: CorpusImage[],
): Promise<Batch> {
  const outputs = new Map<string, Encoded>();
  const errors: string[] = [];
  const jobs = fillJobs(images, minJobs);
  const engine = mode === 'search' ? searchEngine! : defaultEngine;
  const sampler = new RssSampler();
  sampler.start();
  let samples = 0;
  let held = 0;
  const admission = setInterval(() => {
    const stats = engine.stats();
    samples++;
    if (stats.waiting > 0 && stats.active < concurrency) held++;
  }, 20);
  const cpu = process.cpuUsage();
  const { seconds, rounds } = await runRounds(
    jobs,
    concurrency,
    async (image) => {
      try {
        const out = await engine.optimize(image.bytes, {
          output_format: format,
          quality: mode === 'default' ? DEFAULT_QUALITY : 'auto',
          max_dimension: maxDimension,
        });
        outputs.set(image.name, {
          image,
          bytes: out.data,
          format: out.info.output_format,
          quality: out.info.quality,
          ...(out.info.auto_steps !== undefined ? { steps: out.info.auto_steps } : {}),
        });
      } catch (error) {
        errors.push(`${image.name}: ${(error as Error).message}`);
      }
    },
    minBatchSeconds,
  );
  const used = process.cpuUsage(cpu);
  clearInterval(admission);
  const peakRss = sampler.stop();
  return {
    kind,
    format,
    mode,
    encoder: 'engine',
    images,
    jobs: jobs.length,
    seconds,
    rounds,
    cpuSeconds: (used.user + used.system) / 1e6 / rounds,
    memoryHeld: samples ? held / samples : 0,
    peakRss,
    outputs,
    errors: [...new Set(errors)],
  };
}

async function rawBatch(engineRun: Batch): Promise<Batch> {
  const { kind, format, mode } = engineRun;
  // Raw sharp gets only the images the engine handled, at the quality the engine used for each
  // (for "auto", the one its search chose: engine ÷ raw then shows what the search costs).
  const images = engineRun.images.filter((i) => engineRun.outputs.has(i.name));
  const outputs = new Map<string, Encoded>();
  const errors: string[] = [];
  const jobs = fillJobs(images, minJobs);
  const sampler = new RssSampler();
  sampler.start();
  const { seconds, rounds } = await runRounds(
    jobs,
    concurrency,
    async (image) => {
      const quality = engineRun.outputs.get(image.name)!.quality;
      try {
        const bytes = await rawEncode(image, format, quality, maxDimension);
        outputs.set(image.name, { image, bytes, format, quality });
      } catch (error) {
        errors.push(`${image.name}: ${(error as Error).message}`);
      }
    },
    minBatchSeconds,
  );
  const peakRss = sampler.stop();
  let identical = 0;
  for (const [name, out] of outputs) {
    if (Buffer.compare(Buffer.from(out.bytes), Buffer.from(engineRun.outputs.get(name)!.bytes)) === 0)
      identical++;
  }
  return {
    kind,
    format,
    mode,
    encoder: 'sharp',
    images,
    jobs: jobs.length,
    seconds,
    rounds,
    peakRss,
    outputs,
    errors: [...new Set(errors)],
    identicalToEngine: identical,
  };
}

async function autoAvailable(engine: Engine, sample: CorpusImage): Promise<string | undefined> {
  try {
    await engine.optimize(sample.bytes, { output_format: 'webp', quality: 'auto', max_dimension: 64 });
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/** Source pixels after the engine's own orientation and resize: what every output is compared to. */
async function referencePixels(image: CorpusImage): Promise<Reference> {
  const source = await openSource(image.bytes, DEFAULT_LIMITS);
  const options = parseCompressOptions({ max_dimension: maxDimension, output_format: 'png' });
  return referenceFrom(() => prepare(source, options, 'png'), source.hasAlpha);
}

async function referenceBatches(tools: ReferenceTool[], images: CorpusImage[]) {
  const dir = mkdtempSync(join(tmpdir(), 'compresso-bench-'));
  try {
    // The resized source as a fast lossless PNG, written once, untimed: every tool starts from it.
    const inputs = new Map<string, string>();
    await runBatch(images, concurrency, async (image) => {
      const source = await openSource(image.bytes, DEFAULT_LIMITS);
      const options = parseCompressOptions({ max_dimension: maxDimension, output_format: 'png' });
      const path = join(dir, `${image.name}.src.png`);
      await prepare(source, options, 'png').png({ compressionLevel: 1 }).toFile(path);
      inputs.set(image.name, path);
    });
    for (const tool of tools) {
      for (const kind of kinds) {
        const ofKind = images.filter(
          (i) => i.kind === kind && formatsFor(kind).includes(tool.format as BenchFormat),
        );
        if (!ofKind.length) continue;
        const outputs = new Map<string, Encoded>();
        const errors: string[] = [];
        const jobs = fillJobs(ofKind, minJobs);
        const seconds = await runBatch(jobs, concurrency, async (image, index) => {
          const out = join(dir, `${image.name}.${index}.${tool.name}.${tool.format}`);
          try {
            await runTool(tool, inputs.get(image.name)!, out, DEFAULT_QUALITY);
            outputs.set(image.name, {
              image,
              bytes: new Uint8Array(readFileSync(out)),
              format: tool.format,
              quality: DEFAULT_QUALITY,
            });
          } catch (error) {
            errors.push(`${image.name}: ${(error as Error).message.split('\n')[0]}`);
          }
        });
        batches.push({
          kind,
          format: tool.format as BenchFormat,
          mode: 'default',
          encoder: tool.name,
          images: ofKind,
          jobs: jobs.length,
          seconds,
          rounds: 1,
          outputs,
          errors,
        });
        log(`  ${tool.name} ${kind}: ${(jobs.length / seconds).toFixed(2)} img/s`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function scoreAll(images: CorpusImage[]) {
  const scored = batches.filter((b) => b.encoder !== 'sharp');
  for (const image of images) {
    const wanted = scored.map((b) => b.outputs.get(image.name)).filter((o): o is Encoded => o !== undefined);
    if (!wanted.length) continue;
    const reference = await referencePixels(image);
    await runBatch(wanted, concurrency, async (out) => {
      try {
        out.score = await scoreOutput(reference, out.bytes, out.format);
      } catch (error) {
        notes.push(`score failed for ${image.name}: ${(error as Error).message}`);
      }
    });
  }
}

/**
 * Per kind and lossy format: the fixed Q that reaches AUTO_FLOOR on every image of the kind, its total
 * bytes, and auto's bytes, scores and cost (images/s of the fixed default ÷ auto's) beside it.
 */
async function compareWithWorstCase(engine: Engine, images: CorpusImage[]): Promise<AutoVsFixed[]> {
  const out: AutoVsFixed[] = [];
  const references = new Map<string, Reference>();
  for (const kind of kinds) {
    const ofKind = images.filter((i) => i.kind === kind);
    for (const format of formatsFor(kind).filter((f) => f !== 'png')) {
      const auto = batches.find(
        (b) => b.kind === kind && b.format === format && b.mode === 'auto' && b.encoder === 'engine',
      );
      const fixed = batches.find(
        (b) => b.kind === kind && b.format === format && b.mode === 'default' && b.encoder === 'engine',
      );
      const search = batches.find(
        (b) => b.kind === kind && b.format === format && b.mode === 'search' && b.encoder === 'engine',
      );
      if (!auto || !fixed || !ofKind.length) continue;
      const cache = new Map<string, AtQuality>();
      const at = async (name: string, q: number): Promise<AtQuality> => {
        const key = `${name}|${q}`;
        const hit = cache.get(key);
        if (hit) return hit;
        const image = ofKind.find((i) => i.name === name)!;
        let reference = references.get(name);
        if (!reference) {
          reference = await referencePixels(image);
          references.set(name, reference);
        }
        const result = await engine.optimize(image.bytes, {
          output_format: format,
          quality: q,
          max_dimension: maxDimension,
        });
        const value = { score: await scoreOutput(reference, result.data, format), bytes: result.data.length };
        cache.set(key, value);
        return value;
      };
      const names = ofKind.filter((i) => auto.outputs.has(i.name)).map((i) => i.name);
      const worst = await worstCaseQuality(names, AUTO_FLOOR, at);
      const summary = (b: Batch) => {
        const outs = names.map((n) => b.outputs.get(n)).filter((o): o is Encoded => o !== undefined);
        const scores = outs.map((o) => o.score).filter((x): x is number => x !== undefined);
        const steps = outs.map((o) => o.steps).filter((x): x is number => x !== undefined);
        return {
          steps: steps.length ? round(sum(steps) / steps.length, 1) : null,
          bytes: sum(outs.map((o) => o.bytes.length)),
          meanScore: scores.length ? round(sum(scores) / scores.length, 1) : null,
          minScore: scores.length ? round(Math.min(...scores), 1) : null,
          imagesPerSecond: round(b.jobs / b.seconds),
          cpuPerImage: b.cpuSeconds === undefined ? undefined : b.cpuSeconds / b.jobs,
          memoryHeld: b.memoryHeld,
        };
      };
      const cpuCost = (x: { cpuPerImage?: number }) =>
        x.cpuPerImage !== undefined && f.cpuPerImage ? round(x.cpuPerImage / f.cpuPerImage, 1) : undefined;
      const a = summary(auto);
      const f = summary(fixed);
      const row: AutoVsFixed = {
        kind,
        format,
        floor: AUTO_FLOOR,
        images: names.length,
        worstCaseQ: worst.q,
        worstCaseBytes: worst.bytes,
        hardest: worst.hardest,
        autoBytes: a.bytes,
        autoVsWorstCasePercent: worst.bytes ? round((a.bytes / worst.bytes - 1) * 100, 1) : null,
        autoMeanScore: a.meanScore,
        autoMinScore: a.minScore,
        autoImagesPerSecond: a.imagesPerSecond,
        fixedImagesPerSecond: f.imagesPerSecond,
        autoCost: round(f.imagesPerSecond / a.imagesPerSecond, 1),
        ...(cpuCost(a) !== undefined ? { autoCpuCost: cpuCost(a) } : {}),
        ...(a.memoryHeld !== undefined ? { autoMemoryHeldPercent: round(a.memoryHeld * 100, 0) } : {}),
        autoSteps: a.steps,
      };
      if (search) {
        const s = summary(search);
        Object.assign(row, {
          searchBytes: s.bytes,
          searchMeanScore: s.meanScore,
          searchMinScore: s.minScore,
          searchImagesPerSecond: s.imagesPerSecond,
          searchCost: round(f.imagesPerSecond / s.imagesPerSecond, 1),
          searchCpuCost: cpuCost(s),
          searchSteps: s.steps,
          autoVsSearchPercent: s.bytes ? round((a.bytes / s.bytes - 1) * 100, 1) : null,
        });
      }
      out.push(row);
      log(
        `  worst case ${kind} ${format}: Q ${worst.q ?? 'none'} (${worst.probes} probes), auto ${row.autoVsWorstCasePercent ?? '—'} %`,
      );
    }
  }
  return out;
}

function sum(ns: number[]): number {
  return ns.reduce((a, b) => a + b, 0);
}

function toRow(kind: Kind | 'all', group: Batch[]): Row {
  const first = group[0]!;
  const outputs = group.flatMap((b) => [...b.outputs.values()]);
  const inputBytes = sum(outputs.map((o) => o.image.bytes.length));
  const outputBytes = sum(outputs.map((o) => o.bytes.length));
  const scores = outputs.map((o) => o.score).filter((s): s is number => s !== undefined);
  const jobs = sum(group.map((b) => b.jobs));
  const seconds = sum(group.map((b) => b.seconds));
  const peaks = group.map((b) => b.peakRss).filter((p): p is number => p !== undefined);
  const row: Row = {
    kind,
    format: first.format,
    mode: first.mode,
    encoder: first.encoder,
    images: outputs.length,
    jobs,
    seconds: round(seconds, 3),
    imagesPerSecond: round(jobs / seconds),
    inputBytes,
    outputBytes,
    savedPercent: inputBytes ? round((1 - outputBytes / inputBytes) * 100, 1) : 0,
    meanScore: scores.length ? round(sum(scores) / scores.length, 1) : null,
    minScore: scores.length ? round(Math.min(...scores), 1) : null,
    scored: scores.length,
    meanQuality: outputs.length ? round(sum(outputs.map((o) => o.quality)) / outputs.length, 1) : null,
    peakRssMiB: peaks.length ? round(Math.max(...peaks) / MiB, 0) : null,
    errors: group.flatMap((b) => b.errors),
  };
  if (first.encoder === 'sharp') row.identicalToEngine = sum(group.map((b) => b.identicalToEngine ?? 0));
  return row;
}

function rowsFor(selected: Batch[]): Row[] {
  const rows: Row[] = [];
  const keys = new Map<string, Batch[]>();
  for (const b of selected) {
    const key = `${b.format}|${b.mode}|${b.encoder}`;
    keys.set(key, [...(keys.get(key) ?? []), b]);
  }
  for (const kind of [...kinds, 'all'] as const) {
    for (const group of keys.values()) {
      const ofKind = kind === 'all' ? group : group.filter((b) => b.kind === kind);
      if (ofKind.length) rows.push(toRow(kind, ofKind));
    }
  }
  // Reference rows are sized against the engine at the same default quality.
  for (const row of rows) {
    if (row.encoder === 'engine' || row.encoder === 'sharp') continue;
    const engine = rows.find(
      (r) => r.encoder === 'engine' && r.kind === row.kind && r.format === row.format && r.mode === row.mode,
    );
    if (engine?.outputBytes && engine.images === row.images)
      row.bytesVsEnginePercent = round((row.outputBytes / engine.outputBytes - 1) * 100, 1);
  }
  // Engine rows carry their raw-sharp counterpart's speed and the overhead ratio.
  for (const row of rows) {
    if (row.encoder !== 'engine') continue;
    const raw = rows.find(
      (r) => r.encoder === 'sharp' && r.kind === row.kind && r.format === row.format && r.mode === row.mode,
    );
    if (raw) {
      row.rawImagesPerSecond = raw.imagesPerSecond;
      row.engineOverRaw = round(row.imagesPerSecond / raw.imagesPerSecond, 3);
    }
  }
  return rows;
}

/** Process tuning variables, recorded because they change both speed and memory. */
function environment(name: string): string | undefined {
  const env: Record<string, string | undefined> = process.env;
  return env[name];
}

function machine() {
  const cpu = cpus()[0];
  return {
    cpuModel: cpu?.model ?? 'unknown',
    cores: availableParallelism(),
    memoryGiB: round(totalmem() / 1024 ** 3, 1),
    platform: `${process.platform} ${release()}`,
    node: process.version,
    sharp: sharp.versions.sharp,
    libvips: sharp.versions.vips,
    libvipsThreadsPerImage: sharp.concurrency(),
    uvThreadpoolSize: environment('UV_THREADPOOL_SIZE') ?? '4 (default)',
    mallocArenaMax: environment('MALLOC_ARENA_MAX') ?? null,
    loadAverageAtStart: loadavg().map((n) => round(n)),
  };
}

async function main() {
  const started = Date.now();
  const info = machine();
  const all = await loadCorpus(corpusDir);
  if (!all.length) fail(`--corpus: no images found in ${corpusDir}`);
  const images = pickImages(all);
  if (!images.length) fail('no images match --kinds/--per-kind');
  log(
    `bench: ${images.length} images, formats ${formats.join(',')}, max ${maxDimension} px, ${concurrency} in flight`,
  );

  const engine = createEngine({ concurrency, memoryBudget });
  let modes: Mode[] = ['default'];
  if (withAuto) {
    const missing = await autoAvailable(engine, images[0]!);
    if (missing) notes.push(`quality "auto" not measured: ${missing}`);
    else modes = withSearch ? ['default', 'auto', 'search'] : ['default', 'auto'];
    if (withSearch)
      searchEngine = createEngine({ concurrency, memoryBudget, auto: createBisectionAutoEncoder() });
  } else notes.push('quality "auto" skipped (--no-auto)');
  if (!withScore) notes.push('scores skipped (--no-score)');

  // Warm-up, untimed: module loading, JIT and libvips' first-use setup would otherwise be billed to
  // whichever batch runs first.
  const warm = [...images].sort((a, b) => a.bytes.length - b.bytes.length)[0]!;
  for (const format of formats) {
    await engine.optimize(warm.bytes, { output_format: format, max_dimension: 256 }).catch(() => undefined);
    await rawEncode(warm, format, DEFAULT_QUALITY, 256).catch(() => undefined);
  }

  // The largest images at the bench's size, one per image in flight: the auto warm-up below.
  const largest = [...images].sort((a, b) => b.width * b.height - a.width * a.height).slice(0, concurrency);

  // Timed section: engine and raw sharp only, all in this process, before any scoring fills memory.
  const timedStart = Date.now();
  for (const format of BENCH_FORMATS.filter((f) => formats.includes(f))) {
    for (const mode of modes) {
      if (mode !== 'default') {
        // Untimed, like the warm-up above: the metric's thread exits after 10 s idle (the default
        // batches before this one take longer), and its start, its WebAssembly module and its
        // memory's growth would otherwise be billed to the first kind's batch alone. The memory
        // grows to what `concurrency` full-size autos in flight need (≈ 0.5 GB at 2048 px) and is
        // then reused; growing it costs page faults on first touch (on the 2-core VM of
        // 2026-11-28, a reference prepared in 67–232 ms instead of 33–64 and a first score in
        // 90–140 ms instead of 20–35 while it grew). Until then the warm-up was one 256-px auto,
        // which left that growth to the first kind's batches: photos in JPEG read 5.3× (2.65
        // images/s) instead of 3.2× (3.85) in two runs of the same code that day.
        // JPEG: the metric's memory depends on the size, not on the output format.
        const auto = mode === 'search' ? searchEngine! : engine;
        await Promise.all(
          largest.map((image) =>
            auto
              .optimize(image.bytes, { output_format: 'jpeg', quality: 'auto', max_dimension: maxDimension })
              .catch(() => undefined),
          ),
        );
      }
      for (const kind of kinds) {
        if (!formatsFor(kind).includes(format)) continue;
        const ofKind = images.filter((i) => i.kind === kind);
        if (!ofKind.length) continue;
        const engineRun = await engineBatch(engine, kind, format, mode, ofKind);
        const rawRun = await rawBatch(engineRun);
        // Best of N, alternating which side goes first: other processes on the machine only ever
        // slow a run down, so the fastest pass is the closest to what the code itself costs.
        // "auto" takes its best of N too: its cost is read against the fixed quality's best pass,
        // and until 2026-12-01 it ran once, so a slow moment in its one pass counted in full while
        // the fixed quality's was repeated away (auto rows moved by up to 50 % between runs of the
        // same code). "search", the old bisection kept for its bytes and a before/after, runs one
        // pass: it is the slowest part of the bench, and its cost is an upper bound. Every pass
        // lasts at least --min-batch-seconds (runRounds).
        for (let pass = 1; pass < (mode === 'search' ? 1 : repeat); pass++) {
          const pair =
            pass % 2 === 1
              ? [await rawBatch(engineRun), await engineBatch(engine, kind, format, mode, ofKind)]
              : [await engineBatch(engine, kind, format, mode, ofKind), await rawBatch(engineRun)];
          for (const again of pair) {
            const best = again.encoder === 'engine' ? engineRun : rawRun;
            best.seconds = Math.min(best.seconds, again.seconds);
            if (best.cpuSeconds !== undefined && again.cpuSeconds !== undefined)
              best.cpuSeconds = Math.min(best.cpuSeconds, again.cpuSeconds);
            best.peakRss = Math.max(best.peakRss ?? 0, again.peakRss ?? 0);
            if (again.memoryHeld !== undefined)
              best.memoryHeld = Math.max(best.memoryHeld ?? 0, again.memoryHeld);
          }
        }
        batches.push(engineRun, rawRun);
        log(
          `  ${format} ${mode} ${kind}: engine ${(engineRun.jobs / engineRun.seconds).toFixed(2)} img/s, sharp ${(rawRun.jobs / rawRun.seconds).toFixed(2)} img/s`,
        );
      }
    }
  }

  // AVIF at full web size: only images whose longer side reaches the resize bound.
  let avif2048: Row | null = null;
  if (formats.includes('avif')) {
    // Taken from the whole corpus (selected kinds), not the per-kind subset: few images are that big.
    const pool = quick ? images : all.filter((i) => kinds.includes(i.kind));
    const large = pool.filter((i) => Math.max(i.width, i.height) >= maxDimension);
    if (large.length) {
      const kindOf = large[0]!.kind;
      const run = await engineBatch(engine, kindOf, 'avif', 'default', large);
      for (let pass = 1; pass < repeat; pass++) {
        const again = await engineBatch(engine, kindOf, 'avif', 'default', large);
        run.seconds = Math.min(run.seconds, again.seconds);
        run.peakRss = Math.max(run.peakRss ?? 0, again.peakRss ?? 0);
      }
      avif2048 = { ...toRow('all', [run]), kind: 'all' };
      log(`  avif at ${maxDimension} px: ${avif2048.imagesPerSecond} img/s`);
    } else notes.push(`no selected image reaches ${maxDimension} px: AVIF-at-${maxDimension} row skipped`);
  }
  const timedSeconds = (Date.now() - timedStart) / 1000;
  let scoreSeconds = 0;
  const maxRssMiB = round((process.resourceUsage().maxRSS * 1024) / MiB, 0);

  let referenceTools: { name: string; format: string; version: string; settings: string }[] = [];
  if (withReference) {
    const found = await discoverReferenceTools(formats);
    notes.push(...found.notes);
    referenceTools = found.tools.map(({ name, format, version, settings }) => ({
      name,
      format,
      version,
      settings,
    }));
    if (found.tools.length) await referenceBatches(found.tools, images);
  } else notes.push('reference encoders skipped (--no-reference)');

  if (withScore) {
    const scoreStart = Date.now();
    await scoreAll(images);
    scoreSeconds = (Date.now() - scoreStart) / 1000;
  }
  let autoVsFixed: AutoVsFixed[] = [];
  if (withWorstCase && withScore && modes.includes('auto')) {
    const start = Date.now();
    autoVsFixed = await compareWithWorstCase(engine, images);
    log(`  worst-case fixed quality: ${((Date.now() - start) / 1000).toFixed(0)} s`);
  } else notes.push('worst-case fixed quality skipped (needs auto and scores; --no-worst-case)');
  await closeMetricPool();

  const rows = rowsFor(batches);
  const result: BenchResult = {
    benchmark: 'compresso',
    version: 1,
    date: new Date(started).toISOString(),
    durationSeconds: round((Date.now() - started) / 1000, 1),
    timedSeconds: round(timedSeconds, 1),
    machine: { ...info, loadAverageAtEnd: loadavg().map((n) => round(n)) },
    settings: {
      quick,
      perKind: perKind === Number.MAX_SAFE_INTEGER ? null : perKind,
      corpusImages: all.length,
      corpus: corpusDir,
      kinds,
      formats,
      modes,
      maxDimension,
      concurrency,
      defaultQuality: DEFAULT_QUALITY,
      avifEffort: AVIF_EFFORT,
      webpEffort: WEBP_EFFORT,
      minJobsPerBatch: minJobs,
      minBatchSeconds,
      memoryBudgetMiB: memoryBudget / MiB,
      repeat,
      autoRepeat: repeat,
      images: images.map((i) => i.name),
    },
    metric: {
      name: 'SSIMULACRA2',
      scored: withScore,
      note: withScore
        ? `@compresso/engine scoreAsync (${METRIC_THREADS} metric thread(s)); transparent images: the worse of ${ALPHA_BACKGROUNDS.length} backgrounds`
        : 'skipped (--no-score)',
      seconds: round(scoreSeconds, 1),
    },
    memory: { processMaxRssMiB: maxRssMiB },
    avifAtMaxDimension: avif2048,
    referenceTools,
    rows,
    autoVsFixed,
    notes,
  };

  const md = markdown(result);
  let jsonPath: string;
  if (parsed.out) {
    jsonPath = resolve(parsed.out);
    mkdirSync(dirname(jsonPath), { recursive: true });
    writeFileSync(jsonPath, `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(jsonPath.replace(/\.json$/i, '') + '.md', md);
  } else {
    const dir = join(HERE, 'results');
    mkdirSync(dir, { recursive: true });
    jsonPath = join(dir, 'latest.json');
    const text = `${JSON.stringify(result, null, 2)}\n`;
    writeFileSync(jsonPath, text);
    writeFileSync(join(dir, `${result.date.replace(/[:.]/g, '-')}.json`), text);
    writeFileSync(join(dir, 'latest.md'), md);
  }
  process.stdout.write(md);
  log(`bench: ${result.durationSeconds} s; results in ${jsonPath} (${statSync(jsonPath).size} bytes)`);
  // The HTTP path (POST /api/v1/compress against the engine, http.ts) follows a full run; --quick
  // and --no-http leave it out.
  if (parsed.http && !quick) {
    const http = spawnSync(process.execPath, [join(HERE, 'http.ts')], { stdio: 'inherit' });
    if (http.status !== 0) process.exitCode = http.status ?? 1;
  }
  // The scaled-out setup (scale.ts) too: it needs PostgreSQL and Redis, as the tests do.
  if (parsed.scale && !quick) {
    const scale = spawnSync(process.execPath, [join(HERE, 'scale.ts')], { stdio: 'inherit' });
    if (scale.status !== 0) process.exitCode = scale.status ?? 1;
  }
}

await main();
