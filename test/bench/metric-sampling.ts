/**
 * How well a row-sampled SSIMULACRA2 (ssimulacra2.ts RowSampling: at full resolution only some bands
 * of rows are scored) estimates the full score: for corpus images resized to at most 2048 px (those
 * with at least AUTO_ROW_SAMPLING.minHeight rows, the only ones auto samples), real encodes at several qualities, the score
 * with the reference prepared whole and with it prepared sampled. Prints, per sampling and overall,
 * the mean, SD and maximum of (sampled − full) and the CPU time of each kind of score.
 *
 * Usage: node test/bench/metric-sampling.ts [--kinds photo,screenshot] [--max N]
 */
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { decodeToRgb } from '../../core/engine/src/metric/index.ts';
import {
  AUTO_ROW_SAMPLING,
  prepareReference,
  type RowSampling,
  ssimulacra2,
} from '../../core/engine/src/metric/ssimulacra2.ts';
import { DEFAULT_CORPUS, type Kind, loadCorpus } from './corpus.ts';

const { values } = parseArgs({ options: { kinds: { type: 'string' }, max: { type: 'string' } } });
const kinds = (values.kinds ?? 'photo,screenshot').split(',') as Kind[];
/** AUTO_ROW_SAMPLING first, then a denser and a sparser alternative. */
const SAMPLINGS: RowSampling[] = [
  AUTO_ROW_SAMPLING,
  { ...AUTO_ROW_SAMPLING, band: 16 },
  { ...AUTO_ROW_SAMPLING, every: 2 },
];
const MINH = Math.min(...SAMPLINGS.map((s) => s.minHeight));
const DISTORTIONS = [
  ['jpeg', 60],
  ['jpeg', 78],
  ['jpeg', 90],
  ['webp', 70],
  ['webp', 84],
  ['avif', 50],
] as const;

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const corpus = (await loadCorpus(DEFAULT_CORPUS)).filter((i) => kinds.includes(i.kind) && !i.heic);
const images = corpus.slice(0, Number(values.max ?? corpus.length));
const diffs = SAMPLINGS.map(() => [] as number[]);
const time = { full: 0, sampled: SAMPLINGS.map(() => 0), prepFull: 0, prepSampled: SAMPLINGS.map(() => 0) };
let scores = 0;
for (const image of images) {
  const ref = sharp(image.bytes, { limitInputPixels: false })
    .rotate()
    .resize(2048, 2048, { fit: 'inside', withoutEnlargement: true })
    .removeAlpha();
  const raw = await ref.clone().png({ compressionLevel: 0 }).toBuffer();
  const reference = await decodeToRgb(raw);
  if (reference.height < MINH) continue;
  let t = cpuMs();
  const full = prepareReference(reference);
  time.prepFull += cpuMs() - t;
  const sampled = SAMPLINGS.map((s, i) => {
    const t0 = cpuMs();
    const p = prepareReference(reference, s);
    time.prepSampled[i]! += cpuMs() - t0;
    return p;
  });
  const line: string[] = [];
  for (const [format, quality] of DISTORTIONS) {
    const encoded =
      format === 'avif'
        ? await sharp(raw).avif({ quality, effort: 2 }).toBuffer()
        : await sharp(raw)[format]({ quality }).toBuffer();
    const distorted = await decodeToRgb(encoded);
    t = cpuMs();
    const f = ssimulacra2(full, distorted);
    time.full += cpuMs() - t;
    scores++;
    const ds = sampled.map((p, i) => {
      const t0 = cpuMs();
      const v = ssimulacra2(p, distorted);
      time.sampled[i]! += cpuMs() - t0;
      diffs[i]!.push(v - f);
      return v - f;
    });
    line.push(`${format}${quality} ${f.toFixed(1)} ${ds.map((d) => d.toFixed(2)).join('/')}`);
  }
  console.log(`${image.name} ${reference.width}×${reference.height}: ${line.join('  ')}`);
}
console.log(
  `\n${scores} pairs; full score ${(time.full / scores).toFixed(0)} ms CPU, reference ${(time.prepFull / (scores / DISTORTIONS.length)).toFixed(0)} ms`,
);
SAMPLINGS.forEach((s, i) => {
  const d = diffs[i]!;
  const mean = d.reduce((a, b) => a + b, 0) / d.length;
  const sd = Math.sqrt(d.reduce((a, b) => a + (b - mean) ** 2, 0) / d.length);
  const max = Math.max(...d.map(Math.abs));
  console.log(
    `band ${s.band} every ${s.every}: sampled − full mean ${mean.toFixed(3)}, SD ${sd.toFixed(3)}, max |Δ| ${max.toFixed(2)}; score ${(time.sampled[i]! / scores).toFixed(0)} ms, reference ${(time.prepSampled[i]! / (scores / DISTORTIONS.length)).toFixed(0)} ms`,
  );
});
