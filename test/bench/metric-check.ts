/**
 * The engine's SSIMULACRA2 against the reference tool (cloudinary/ssimulacra2), from 16 to 2048 px.
 *
 *   node test/bench/metric-check.ts                      # measure: engine vs reference, per pair and per size band
 *   node test/bench/metric-check.ts --write              # also rewrite the committed fixtures and recorded scores
 *   node test/bench/metric-check.ts --metric /tmp/old-ssimulacra2.ts   # measure another implementation
 *   node test/bench/metric-check.ts --tool /path/to/ssimulacra2        # the tool elsewhere
 *   node test/bench/metric-check.ts --near-flat [--write]             # only the near-flat fields
 *
 * The pairs are the ones core/engine/src/metric/reference-agreement.test.ts checks: small ones (16–256
 * px; photos, a screenshot, graphics with and without transparency; square and odd sizes such as
 * 70×46 and 45×31) committed as files under core/engine/src/metric/fixtures/reference-agreement, and
 * large ones (512–2048 px) made from the shared corpus with the settings the manifest records. Each
 * distortion is a real encode through sharp (JPEG, WebP, AVIF). Both tools read the same decoded
 * pixels: the script writes sharp's decode of every file as a PNG for the reference tool, so what is
 * compared is the metric, not two decoders.
 *
 * Transparent pairs are scored as the engine's auto search scores them (metric/compare.ts: over dark
 * and light grey, the worse counts), and the reference tool does the same with a transparent PNG;
 * only WebP and AVIF distortions, which keep the alpha channel (a JPEG of a transparent image is
 * judged on white by the engine, a choice the reference tool has no equivalent for).
 *
 * Building the reference tool: see core/engine/README.quality.md ("Verified against the reference tool").
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import sharp from 'sharp';
import { backgroundsFor } from '../../core/engine/src/metric/compare.ts';
import { decodeToRgb, type RgbImage } from '../../core/engine/src/metric/index.ts';
import {
  encode,
  FIXTURE_DIR,
  flatField,
  MANIFEST_PATH,
  type Manifest,
  NEAR_FLAT_GREYS,
  NEAR_FLAT_SIDES,
  type NearFlat,
  nearFlatBound,
  type Pair,
  pairSources,
  readManifest,
  sizeBand,
} from '../../core/engine/src/test-support/reference-fixtures.ts';

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
const CORPUS = resolve(REPO, '../shared/corpus');

const { values: args } = parseArgs({
  options: {
    write: { type: 'boolean', default: false },
    /** Only the near-flat fields (with --write: record their scores, keep the pairs as they are). */
    'near-flat': { type: 'boolean', default: false },
    metric: { type: 'string' },
    tool: { type: 'string', default: '/work/ssim2-build/ssimulacra2' },
  },
});
const TOOL = args.tool;

type Score = (reference: RgbImage, distorted: RgbImage) => number;
const metricModule = args.metric
  ? resolve(args.metric)
  : resolve(REPO, 'core/engine/src/metric/ssimulacra2.ts');
const { ssimulacra2 } = (await import(metricModule)) as { ssimulacra2: Score };

/** Small sources: [file in the corpus, kind, transparent?]. */
const SMALL_SOURCES = [
  ['photo-skimage-chelsea.png', 'photo', false],
  ['photo-mate-LadyBird.jpg', 'photo', false],
  ['screenshot-gimp-assign-5.png', 'screenshot', false],
  ['graphic-skimage-logo.png', 'graphic', false],
  ['icon-oxygen-konqueror.png', 'icon', true],
] as const;
/** Square, the sizes the issue measured, and odd sizes (an odd side makes every downscale repeat an edge). */
const SMALL_SIZES: [number, number][] = [
  [16, 16],
  [24, 24],
  [32, 32],
  [48, 48],
  [45, 31],
  [64, 64],
  [70, 46],
  [96, 96],
  [128, 128],
  [156, 78],
  [176, 108],
  [201, 133],
  [256, 256],
];
const DISTORTIONS = [
  ['jpeg', 40],
  ['webp', 60],
  ['avif', 45],
] as const;
/** Large pairs: made from the corpus at test time (too big to commit). */
const LARGE: Pair['large'][] = [
  { corpus: 'photo-mate-Dune.jpg', maxDimension: 2048, format: 'webp', quality: 70 },
  { corpus: 'photo-sharpfixture-2569067123.jpg', maxDimension: 2048, format: 'jpeg', quality: 50 },
  { corpus: 'photo-mate-LadyBird.jpg', maxDimension: 2048, format: 'avif', quality: 50 },
  { corpus: 'screenshot-gimp-multi-window.png', maxDimension: 1024, format: 'webp', quality: 75 },
  { corpus: 'photo-skimage-astronaut.png', maxDimension: 512, format: 'jpeg', quality: 60 },
  { corpus: 'graphic-mate-Arc-Colors-Transparent.png', maxDimension: 512, format: 'webp', quality: 80 },
  { corpus: 'graphic-sharpfixture-alpha-paper.png', maxDimension: 512, format: 'avif', quality: 50 },
];

async function writeFixtures(): Promise<Pair[]> {
  rmSync(FIXTURE_DIR, { recursive: true, force: true });
  mkdirSync(FIXTURE_DIR, { recursive: true });
  const pairs: Pair[] = [];
  for (const [file, kind, transparent] of SMALL_SOURCES) {
    const stem = file.replace(/\.[a-z]+$/, '').replace(/^[a-z]+-[a-z]+-/, '');
    // One photo stops at 176 px: the two larger photo references alone would be a third of the fixtures.
    for (const [width, height] of SMALL_SIZES.filter(
      ([w]) => kind !== 'photo' || file.includes('chelsea') || w <= 176,
    )) {
      const resized = sharp(join(CORPUS, file)).resize(width, height, { fit: 'cover' });
      // Lossless WebP: the same pixels as a PNG in about two thirds of the bytes.
      const ref = await (transparent ? resized.ensureAlpha() : resized.removeAlpha())
        .webp({ lossless: true, effort: 6 })
        .toBuffer();
      const refName = `${stem}-${width}x${height}.webp`;
      writeFileSync(join(FIXTURE_DIR, refName), ref);
      for (const [format, quality] of DISTORTIONS) {
        if (transparent && format === 'jpeg') continue;
        const distName = `${stem}-${width}x${height}-${format}-q${quality}.${format === 'jpeg' ? 'jpg' : format}`;
        writeFileSync(join(FIXTURE_DIR, distName), await encode(ref, format, quality));
        pairs.push({
          kind,
          width,
          height,
          transparent,
          format,
          reference: refName,
          distorted: distName,
          score: NaN,
        });
      }
    }
  }
  for (const large of LARGE) {
    const { corpus, maxDimension, format } = large!;
    const meta = await sharp(join(CORPUS, corpus)).metadata();
    const scale = Math.min(1, maxDimension / Math.max(meta.width, meta.height));
    pairs.push({
      kind: corpus.split('-')[0]!,
      width: Math.round(meta.width * scale),
      height: Math.round(meta.height * scale),
      transparent: meta.hasAlpha,
      format,
      large,
      score: NaN,
    });
  }
  return pairs;
}

/** The scores the reference tool gives the same decoded pixels; needs the binary. */
async function referenceScore(refPng: Buffer, distPng: Buffer, dir: string): Promise<number> {
  const a = join(dir, 'reference.png');
  const b = join(dir, 'distorted.png');
  writeFileSync(a, refPng);
  writeFileSync(b, distPng);
  const { stdout } = await run(TOOL, [a, b]);
  const score = Number(stdout.trim());
  if (!Number.isFinite(score)) throw new Error(`reference tool printed ${JSON.stringify(stdout)}`);
  return score;
}

const nearFlatOnly = args['near-flat'];
const manifest: Manifest =
  args.write && !nearFlatOnly
    ? { tool: '', sharp: sharp.versions.sharp, vips: sharp.versions.vips, pairs: await writeFixtures() }
    : readManifest();
if (args.write && !nearFlatOnly) {
  const { stderr } = await run(TOOL, []).catch((e: { stderr: string }) => e);
  manifest.tool = stderr.split('\n')[0]!.trim();
}

const dir = mkdtempSync(join(tmpdir(), 'metric-check-'));
const bands = new Map<string, number>();
let worst = 0;
try {
  console.log('kind        size        format  reference  engine     diff');
  for (const pair of nearFlatOnly ? [] : manifest.pairs) {
    const { reference, distorted } = await pairSources(pair, CORPUS);
    // The tool reads PNGs: sharp's decode of both, alpha kept where the pair has it.
    const asPng = (input: Buffer) =>
      (pair.transparent ? sharp(input).ensureAlpha() : sharp(input).removeAlpha()).png().toBuffer();
    const ref = await referenceScore(await asPng(reference), await asPng(distorted), dir);
    let engine = Infinity;
    for (const background of backgroundsFor(pair.transparent, pair.format)) {
      engine = Math.min(
        engine,
        ssimulacra2(
          await decodeToRgb(reference, { background }),
          await decodeToRgb(distorted, { background }),
        ),
      );
    }
    if (args.write) pair.score = Math.round(ref * 1e4) / 1e4;
    else if (Math.abs(pair.score - ref) > 0.01) {
      console.warn(`  recorded ${pair.score} but the tool now says ${ref.toFixed(4)}: rerun with --write`);
    }
    const diff = engine - ref;
    const band = sizeBand(pair);
    bands.set(band, Math.max(bands.get(band) ?? 0, Math.abs(diff)));
    worst = Math.max(worst, Math.abs(diff));
    console.log(
      `${pair.kind.padEnd(11)} ${`${pair.width}×${pair.height}`.padEnd(11)} ${pair.format.padEnd(7)} ${ref.toFixed(2).padStart(9)} ${engine.toFixed(2).padStart(7)} ${diff.toFixed(2).padStart(8)}`,
    );
  }
  // Near-flat fields (README.quality.md, "Known divergence"): made in code, the tool's scores recorded.
  console.log('\nnear-flat field  side  reference  engine     diff  bound');
  const nearFlat: NearFlat[] = [];
  for (const grey of NEAR_FLAT_GREYS) {
    for (const side of NEAR_FLAT_SIDES) {
      const { reference, distorted } = flatField(side, grey);
      const raw = { raw: { width: side, height: side, channels: 3 as const } };
      const ref = await referenceScore(
        await sharp(reference, raw).png().toBuffer(),
        await sharp(distorted, raw).png().toBuffer(),
        dir,
      );
      const engine = ssimulacra2(
        { width: side, height: side, data: reference },
        { width: side, height: side, data: distorted },
      );
      const recorded = manifest.nearFlat?.find((f) => f.grey === grey && f.side === side);
      if (!args.write && recorded && Math.abs(recorded.score - ref) > 0.01) {
        console.warn(
          `  recorded ${recorded.score} but the tool now says ${ref.toFixed(4)}: rerun with --write`,
        );
      }
      nearFlat.push({ grey, side, score: Math.round(ref * 1e4) / 1e4 });
      console.log(
        `grey ${String(grey).padEnd(11)} ${String(side).padStart(5)} ${ref.toFixed(2).padStart(10)} ${engine.toFixed(2).padStart(7)} ${(engine - ref).toFixed(2).padStart(8)} ${nearFlatBound(side).toFixed(1).padStart(6)}`,
      );
    }
  }
  if (args.write) manifest.nearFlat = nearFlat;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log('\nmax |engine − reference| by longer side:');
for (const [band, max] of [...bands].sort((a, b) => Number.parseInt(a[0], 10) - Number.parseInt(b[0], 10))) {
  console.log(`  ${band.padEnd(12)} ${max.toFixed(2)}`);
}
console.log(`  all          ${worst.toFixed(2)} over ${manifest.pairs.length} pairs`);
if (args.write) {
  writeFileSync(MANIFEST_PATH, `${JSON.stringify(manifest, null, 2)}\n`);
  const files = new Set(
    manifest.pairs.flatMap((p) => [p.reference, p.distorted].filter((f) => f !== undefined)),
  );
  let bytes = 0;
  for (const f of files) bytes += statSync(join(FIXTURE_DIR, f)).size;
  console.log(
    `wrote ${MANIFEST_PATH} (${manifest.pairs.length} pairs; ${files.size} files, ${(bytes / 1024).toFixed(0)} KB)`,
  );
}
