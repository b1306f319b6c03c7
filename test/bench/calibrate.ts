/**
 * Calibrates Compresso's one quality scale and measures AVIF efforts, on the corpus photos resized to
 * 2048 px (the engine's typical web output), with the engine's own SSIMULACRA2.
 *
 *   node test/bench/calibrate.ts                    # both parts; writes test/bench/results/calibration.json
 *   node test/bench/calibrate.ts --part scale       # mozjpeg Q → WebP/AVIF encoder quality curves
 *   node test/bench/calibrate.ts --part efforts     # AVIF effort 0–4: time and bytes at equal score
 *   node test/bench/calibrate.ts --part auto        # quality "auto" strategies simulated on the scale rows
 *   node test/bench/calibrate.ts --part auto-real   # quality "auto" vs the fixed default through the engine
 *   node test/bench/calibrate.ts --photos 4 --max-dimension 1024   # a cheaper pass
 *
 * Scale: Compresso quality Q means "what mozjpeg reaches at Q". For each Q the mean SSIMULACRA2 of
 * mozjpeg over the photos is the target; WebP and AVIF are encoded on a grid of their own qualities,
 * and the encoder quality whose mean score meets the target is read off the (piecewise-linear) mean
 * curve. The result is what core/engine/src/quality.ts holds.
 *
 * Efforts: every effort encodes the same photos on a quality grid; bytes are compared at equal score
 * (log-bytes interpolated at fixed scores per photo), time as a ratio within the same run, so the load
 * other processes put on a shared machine cancels out.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  AVIF_EFFORT,
  closeMetricPool,
  createEngine,
  DEFAULT_LIMITS,
  decodeToRgb,
  openSource,
  type RgbImage,
  scoreAsync,
  WEBP_EFFORT,
} from '@compresso/engine';
import sharp from 'sharp';

const REPO = resolve(import.meta.dirname, '../..');
const CORPUS = resolve(REPO, '../shared/corpus');
const RESULTS = resolve(import.meta.dirname, 'results');

const { values: flags } = parseArgs({
  options: {
    part: { type: 'string', default: 'all' },
    photos: { type: 'string' },
    'effort-photos': { type: 'string', default: '4' },
    'max-dimension': { type: 'string', default: '2048' },
    'no-heic': { type: 'boolean', default: false },
    out: { type: 'string', default: join(RESULTS, 'calibration.json') },
  },
});

const Q_POINTS = [40, 50, 60, 70, 75, 80, 85, 90, 95];
const WEBP_GRID = [40, 50, 60, 70, 75, 80, 85, 88, 91, 94, 97];
const AVIF_GRID = [25, 35, 45, 50, 55, 60, 65, 70, 75, 82, 90];
const EFFORTS = [0, 1, 2, 3, 4];
const EFFORT_GRID = [40, 50, 60, 70];
const EFFORT_SCORES = [70, 75, 80];

type Encoder = 'mozjpeg' | 'webp' | 'avif';

interface Photo {
  name: string;
  /** The resized photo, losslessly stored: every encoder starts from the same pixels. */
  base: Buffer;
  reference: RgbImage;
}

interface Row {
  photo: string;
  encoder: Encoder;
  effort?: number;
  quality: number;
  bytes: number;
  score: number;
  ms: number;
}

async function loadPhotos(limit: number | undefined, maxDimension: number): Promise<Photo[]> {
  const names = readdirSync(CORPUS)
    .filter((n) => n.startsWith('photo-') && /\.(jpe?g|png|heic)$/i.test(n))
    .filter((n) => !(flags['no-heic'] && n.endsWith('.heic')))
    .sort();
  const photos: Photo[] = [];
  for (const name of names.slice(0, limit)) {
    // openSource handles HEIC (HEVC) too, which sharp alone cannot decode.
    const source = await openSource(new Uint8Array(readFileSync(join(CORPUS, name))), DEFAULT_LIMITS);
    const base = await source
      .pipeline({ firstFrameOnly: true })
      .autoOrient()
      .resize({ width: maxDimension, height: maxDimension, fit: 'inside', withoutEnlargement: true })
      .png({ compressionLevel: 1 })
      .toBuffer();
    photos.push({ name, base, reference: await decodeToRgb(base) });
  }
  return photos;
}

async function encodeOnly(photo: Photo, encoder: Encoder, quality: number, effort?: number) {
  const p = sharp(photo.base);
  const pipeline =
    encoder === 'mozjpeg'
      ? p.jpeg({ quality, mozjpeg: true })
      : encoder === 'webp'
        ? p.webp({ quality, effort: WEBP_EFFORT })
        : p.avif({ quality, effort: effort ?? AVIF_EFFORT, chromaSubsampling: '4:2:0' });
  const t0 = performance.now();
  const data = await pipeline.toBuffer();
  const ms = performance.now() - t0;
  return { data, ms };
}

async function encodeAndScore(
  photo: Photo,
  encoder: Encoder,
  quality: number,
  effort?: number,
): Promise<Row> {
  const { data, ms } = await encodeOnly(photo, encoder, quality, effort);
  return scored(photo, encoder, quality, effort, data, ms);
}

async function scored(
  photo: Photo,
  encoder: Encoder,
  quality: number,
  effort: number | undefined,
  data: Buffer,
  ms: number,
): Promise<Row> {
  const score = await scoreAsync(photo.reference, await decodeToRgb(data));
  return {
    photo: photo.name,
    encoder,
    ...(effort !== undefined ? { effort } : {}),
    quality,
    bytes: data.length,
    score: round(score, 3),
    ms: Math.round(ms),
  };
}

function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** Mean score per encoder quality, over the photos. */
function meanCurve(rows: Row[], encoder: Encoder): [quality: number, score: number][] {
  const byQ = new Map<number, number[]>();
  for (const r of rows)
    if (r.encoder === encoder) byQ.set(r.quality, [...(byQ.get(r.quality) ?? []), r.score]);
  return [...byQ.entries()].sort((a, b) => a[0] - b[0]).map(([q, s]) => [q, mean(s)]);
}

/** The (fractional) encoder quality where a rising mean curve reaches `target`. */
function invert(curve: [number, number][], target: number): number {
  if (target <= curve[0]![1]) return curve[0]![0];
  for (let i = 1; i < curve.length; i++) {
    const [q1, s1] = curve[i]!;
    const [q0, s0] = curve[i - 1]!;
    if (target <= s1 && s1 > s0) return q0 + ((q1 - q0) * (target - s0)) / (s1 - s0);
  }
  return curve[curve.length - 1]![0];
}

/** Bytes at a given score for one photo, interpolating log-bytes between the two grid points around it. */
function bytesAtScore(rows: Row[], score: number): number | undefined {
  const pts = [...rows].sort((a, b) => a.score - b.score);
  for (let i = 1; i < pts.length; i++) {
    const a = pts[i - 1]!;
    const b = pts[i]!;
    if (a.score <= score && score <= b.score && b.score > a.score) {
      const t = (score - a.score) / (b.score - a.score);
      return Math.exp(Math.log(a.bytes) + t * (Math.log(b.bytes) - Math.log(a.bytes)));
    }
  }
  return undefined;
}

async function scalePart(photos: Photo[]) {
  const rows: Row[] = [];
  for (const photo of photos) {
    const jobs: Promise<Row>[] = [];
    for (const q of Q_POINTS) jobs.push(encodeAndScore(photo, 'mozjpeg', q));
    for (const q of WEBP_GRID) jobs.push(encodeAndScore(photo, 'webp', q));
    for (const q of AVIF_GRID) jobs.push(encodeAndScore(photo, 'avif', q));
    rows.push(...(await Promise.all(jobs)));
    process.stderr.write(`scale: ${photo.name} done\n`);
  }
  const jpeg = meanCurve(rows, 'mozjpeg');
  const webp = meanCurve(rows, 'webp');
  const avif = meanCurve(rows, 'avif');
  const points = Q_POINTS.map((q) => {
    const target = jpeg.find(([jq]) => jq === q)![1];
    return {
      q,
      mozjpegMeanScore: round(target),
      webpQuality: round(invert(webp, target), 1),
      avifQuality: round(invert(avif, target), 1),
    };
  });
  return {
    avifEffort: AVIF_EFFORT,
    webpEffort: WEBP_EFFORT,
    meanCurves: {
      mozjpeg: jpeg.map(([q, s]) => [q, round(s)]),
      webp: webp.map(([q, s]) => [q, round(s)]),
      avif: avif.map(([q, s]) => [q, round(s)]),
    },
    points,
    rows,
  };
}

async function effortPart(photos: Photo[]) {
  const pending: Promise<Row>[] = [];
  for (const photo of photos) {
    // Encodes one at a time, efforts interleaved, so every effort sees the same load; the scores
    // queue in the metric pool meanwhile.
    for (const q of EFFORT_GRID) {
      for (const effort of EFFORTS) {
        const { data, ms } = await encodeOnly(photo, 'avif', q, effort);
        pending.push(scored(photo, 'avif', q, effort, data, ms));
      }
    }
    process.stderr.write(`efforts: ${photo.name} encoded\n`);
  }
  const rows = await Promise.all(pending);
  const table = EFFORTS.map((effort) => {
    const mine = rows.filter((r) => r.effort === effort);
    const ratios: number[] = [];
    for (const photo of photos) {
      for (const s of EFFORT_SCORES) {
        const b = bytesAtScore(
          mine.filter((r) => r.photo === photo.name),
          s,
        );
        const ref = bytesAtScore(
          rows.filter((r) => r.effort === 4 && r.photo === photo.name),
          s,
        );
        if (b !== undefined && ref !== undefined) ratios.push(b / ref);
      }
    }
    const ms = mean(mine.map((r) => r.ms));
    return {
      effort,
      meanEncodeMs: Math.round(ms),
      timeVsEffort4: round(ms / mean(rows.filter((r) => r.effort === 4).map((r) => r.ms)), 3),
      // One image per core at once (sharp runs one libvips thread per image here).
      imagesPerSecondOnAllCores: round((1000 / ms) * availableParallelism(), 2),
      bytesVsEffort4AtEqualScore: ratios.length ? round(mean(ratios), 4) : null,
      comparisons: ratios.length,
    };
  });
  return { grid: EFFORT_GRID, atScores: EFFORT_SCORES, table, rows };
}

/**
 * Quality "auto" simulated on the scale rows (no new encodes): per photo, score and log-bytes are
 * interpolated along each encoder's quality grid, Compresso Q is mapped through the freshly fitted
 * curve, and a strategy picks a Q per photo. Compared with the fixed default (Q=80) and with the fixed
 * Q whose mean score equals the strategy's (the fair "equal mean" comparison).
 */
function autoSimulation(rows: Row[], points: { q: number; webpQuality: number; avifQuality: number }[]) {
  const encoderQ = (encoder: Encoder, q: number): number => {
    if (encoder === 'mozjpeg') return q;
    const curve: [number, number][] = [
      [1, 1],
      ...points.map((p): [number, number] => [p.q, encoder === 'webp' ? p.webpQuality : p.avifQuality]),
      [100, 100],
    ];
    for (let i = 1; i < curve.length; i++) {
      const [q1, e1] = curve[i]!;
      const [q0, e0] = curve[i - 1]!;
      if (q <= q1) return e0 + ((e1 - e0) * (q - q0)) / (q1 - q0);
    }
    return 100;
  };
  const photosOf = [...new Set(rows.map((r) => r.photo))];
  /** Score and bytes of one photo at Compresso quality q (linear in encoder quality; clamped to the grid). */
  const at = (photo: string, encoder: Encoder, q: number): { score: number; bytes: number } => {
    const pts = rows
      .filter((r) => r.photo === photo && r.encoder === encoder)
      .sort((a, b) => a.quality - b.quality);
    const e = Math.min(Math.max(encoderQ(encoder, q), pts[0]!.quality), pts[pts.length - 1]!.quality);
    for (let i = 1; i < pts.length; i++) {
      const a = pts[i - 1]!;
      const b = pts[i]!;
      if (e <= b.quality) {
        const t = (e - a.quality) / (b.quality - a.quality);
        return {
          score: a.score + t * (b.score - a.score),
          bytes: Math.exp(Math.log(a.bytes) + t * (Math.log(b.bytes) - Math.log(a.bytes))),
        };
      }
    }
    return { score: pts[pts.length - 1]!.score, bytes: pts[pts.length - 1]!.bytes };
  };
  const summary = (picks: { score: number; bytes: number }[]) => ({
    meanScore: mean(picks.map((p) => p.score)),
    minScore: Math.min(...picks.map((p) => p.score)),
    totalBytes: picks.reduce((a, p) => a + p.bytes, 0),
  });
  const fixedAt = (encoder: Encoder, q: number) => summary(photosOf.map((p) => at(p, encoder, q)));
  /** Fixed Q (fractional) whose mean score equals `target`, and its total bytes. */
  const fixedAtMean = (encoder: Encoder, target: number) => {
    let lo = 30;
    let hi = 100;
    for (let i = 0; i < 30; i++) {
      const mid = (lo + hi) / 2;
      if (fixedAt(encoder, mid).meanScore < target) lo = mid;
      else hi = mid;
    }
    return { q: round(hi, 1), ...fixedAt(encoder, hi) };
  };
  const out: Record<string, unknown>[] = [];
  for (const encoder of ['mozjpeg', 'webp', 'avif'] as const) {
    const fixed = fixedAt(encoder, 80);
    const strategies: Record<string, unknown>[] = [];
    for (const target of [72, 74, 75, 76, 77, 78, 80]) {
      for (const maxQ of [85, 90, 95, 98]) {
        // Smallest Q on a step of 2 reaching the target (what the bisection finds), capped at maxQ.
        const picks = photosOf.map((p) => {
          for (let q = 30; q <= maxQ; q += 2) {
            const r = at(p, encoder, q);
            if (r.score >= target) return { ...r, q };
          }
          return { ...at(p, encoder, maxQ), q: maxQ };
        });
        const s = summary(picks);
        const fair = fixedAtMean(encoder, s.meanScore);
        strategies.push({
          target,
          maxQ,
          meanScore: round(s.meanScore),
          minScore: round(s.minScore),
          bytesVsFixed80: round(s.totalBytes / fixed.totalBytes, 3),
          fixedQAtEqualMean: fair.q,
          bytesVsFixedAtEqualMean: round(s.totalBytes / fair.totalBytes, 3),
        });
      }
    }
    // The best any per-photo choice of Q can do at equal mean: maximise score − λ·ln(bytes) per photo.
    const lagrangian: Record<string, unknown>[] = [];
    for (const lambda of [2, 4, 6, 8, 10, 14, 20]) {
      const picks = photosOf.map((p) => {
        let best = at(p, encoder, 30);
        for (let q = 30; q <= 98; q++) {
          const r = at(p, encoder, q);
          if (r.score - lambda * Math.log(r.bytes) > best.score - lambda * Math.log(best.bytes)) best = r;
        }
        return best;
      });
      const s = summary(picks);
      const fair = fixedAtMean(encoder, s.meanScore);
      lagrangian.push({
        lambda,
        meanScore: round(s.meanScore),
        minScore: round(s.minScore),
        fixedQAtEqualMean: fair.q,
        bytesVsFixedAtEqualMean: round(s.totalBytes / fair.totalBytes, 3),
      });
    }
    out.push({
      encoder,
      fixed80: {
        meanScore: round(fixed.meanScore),
        minScore: round(fixed.minScore),
        totalBytes: Math.round(fixed.totalBytes),
      },
      strategies,
      lagrangian,
    });
  }
  return out;
}

/**
 * Quality "auto" for real, through the engine: every photo (already at 2048 px) at the fixed default
 * and at "auto", per format; bytes, scores against the same reference, chosen Q and time.
 */
async function autoPart(photos: Photo[]) {
  const engine = createEngine({ concurrency: 1 });
  const rows: Record<string, unknown>[] = [];
  for (const format of ['jpeg', 'webp', 'avif'] as const) {
    for (const photo of photos) {
      const fixed = await engine.optimize(photo.base, { output_format: format });
      const fixedScore = await scoreAsync(photo.reference, await decodeToRgb(fixed.data));
      const t0 = performance.now();
      const auto = await engine.optimize(photo.base, { output_format: format, quality: 'auto' });
      const ms = performance.now() - t0;
      const autoScore = await scoreAsync(photo.reference, await decodeToRgb(auto.data));
      rows.push({
        format,
        photo: photo.name,
        fixedBytes: fixed.data.length,
        fixedScore: round(fixedScore),
        autoBytes: auto.data.length,
        autoScore: round(autoScore),
        reportedScore: auto.info.score,
        autoQ: auto.info.quality,
        autoMs: Math.round(ms),
      });
    }
    process.stderr.write(`auto: ${format} done\n`);
  }
  const summary = (['jpeg', 'webp', 'avif'] as const).map((format) => {
    const r = rows.filter((x) => x.format === format) as Record<string, number>[];
    const sum = (k: string) => r.reduce((a, x) => a + x[k]!, 0);
    return {
      format,
      fixedMeanScore: round(mean(r.map((x) => x.fixedScore!))),
      autoMeanScore: round(mean(r.map((x) => x.autoScore!))),
      fixedMinScore: round(Math.min(...r.map((x) => x.fixedScore!))),
      autoMinScore: round(Math.min(...r.map((x) => x.autoScore!))),
      autoBytesVsFixed: round(sum('autoBytes') / sum('fixedBytes'), 3),
      meanPerImageBytesRatio: round(mean(r.map((x) => x.autoBytes! / x.fixedBytes!)), 3),
      meanAutoQ: round(mean(r.map((x) => x.autoQ!)), 1),
      meanAutoSeconds: round(mean(r.map((x) => x.autoMs!)) / 1000, 1),
    };
  });
  return { summary, rows };
}

const maxDimension = Number(flags['max-dimension']);
const part = flags.part;
const previous = existsSync(flags.out) ? JSON.parse(readFileSync(flags.out, 'utf8')) : {};
const result: Record<string, unknown> = {
  ...previous,
  date: new Date().toISOString(),
  machine: { cpu: cpus()[0]?.model, cores: availableParallelism(), loadavgAtStart: loadavg() },
  sharp: sharp.versions,
  maxDimension,
};
const photos =
  part === 'auto' ? [] : await loadPhotos(flags.photos ? Number(flags.photos) : undefined, maxDimension);
if (part === 'all' || part === 'efforts') {
  const subset = photos
    .filter((p) => !p.name.endsWith('.heic'))
    .sort((a, b) => b.reference.width * b.reference.height - a.reference.width * a.reference.height)
    .slice(0, Number(flags['effort-photos']));
  result.efforts = { photos: subset.map((p) => p.name), ...(await effortPart(subset)) };
  console.table((result.efforts as { table: object[] }).table);
}
if (part === 'all' || part === 'scale') {
  result.scale = { photos: photos.map((p) => p.name), ...(await scalePart(photos)) };
  console.table((result.scale as { points: object[] }).points);
}
if (part === 'auto-real') {
  result.auto = { photos: photos.map((p) => p.name), ...(await autoPart(photos)) };
  console.table((result.auto as { summary: object[] }).summary);
}
if (part === 'all' || part === 'scale' || part === 'auto') {
  const scale = result.scale as {
    rows: Row[];
    points: { q: number; webpQuality: number; avifQuality: number }[];
  };
  result.autoSimulation = autoSimulation(scale.rows, scale.points);
}
result.loadavgAtEnd = loadavg();
mkdirSync(RESULTS, { recursive: true });
writeFileSync(flags.out, `${JSON.stringify(result, null, 1)}\n`);
console.log(`wrote ${flags.out}`);
await closeMetricPool();
// The HEIC decoder's idle workers would keep the process up for their idle timeout.
process.exit(0);
