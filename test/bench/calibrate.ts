/**
 * Calibrates Compresso's one quality scale and measures AVIF efforts, on the corpus photos resized to
 * 2048 px (the engine's typical web output), with the engine's own SSIMULACRA2.
 *
 *   node test/bench/calibrate.ts                    # both parts; writes test/bench/results/calibration.json
 *   node test/bench/calibrate.ts --part scale       # mozjpeg Q → WebP/AVIF encoder quality curves
 *   node test/bench/calibrate.ts --part efforts     # AVIF effort 0–4: time and bytes at equal score
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
const photos = await loadPhotos(flags.photos ? Number(flags.photos) : undefined, maxDimension);
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
result.loadavgAtEnd = loadavg();
mkdirSync(RESULTS, { recursive: true });
writeFileSync(flags.out, `${JSON.stringify(result, null, 1)}\n`);
console.log(`wrote ${flags.out}`);
await closeMetricPool();
// The HEIC decoder's idle workers would keep the process up for their idle timeout.
process.exit(0);
