/**
 * How well can the cheap image features (image-features.ts) predict the quality a photo needs? For
 * each lossy format, q* of each calibration photo (where its curve in results/auto-calibration.json
 * → curves crosses the format's target, linearly interpolated; 96 when it never does) is predicted by a
 * least-squares line in a set of features, fitted on the other photos (leave-one-out). Prints the
 * root-mean-square and largest miss in quality steps per feature set; "mean" is no feature at all.
 * What auto-predict.ts uses is "ln colours".
 *
 * Usage: node test/bench/auto-features.ts
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

interface Curve {
  name: string;
  format: 'jpeg' | 'webp' | 'avif';
  synthetic: boolean;
  width: number;
  height: number;
  features: { colours: number; meanGradient: number; edgeShare: number; chromaEdgeShare: number };
  points: { q: number; score: number }[];
}

const HERE = dirname(fileURLToPath(import.meta.url));
const data = JSON.parse(readFileSync(join(HERE, 'results', 'auto-calibration.json'), 'utf8')) as {
  curves: { rows: Curve[] };
};
/** The targets the calibration curves were read at (auto-predict.ts TARGET). */
const TARGET = { jpeg: 76, webp: 75, avif: 75 } as const;

function qStar(c: Curve, target: number): number {
  const p = c.points;
  if (p[0]!.score >= target) return p[0]!.q;
  for (let i = 1; i < p.length; i++) {
    const a = p[i - 1]!;
    const b = p[i]!;
    if (a.score < target && b.score >= target)
      return a.q + ((target - a.score) * (b.q - a.q)) / (b.score - a.score);
  }
  return 96;
}

const FEATURES: Record<string, (c: Curve) => number> = {
  'ln colours': (c) => Math.log(c.features.colours),
  'ln gradient': (c) => Math.log(c.features.meanGradient + 0.1),
  edges: (c) => c.features.edgeShare,
  'chroma edges': (c) => c.features.chromaEdgeShare,
  'ln pixels': (c) => Math.log(c.width * c.height),
};
const SETS = [
  [],
  ['ln colours'],
  ['ln gradient'],
  ['ln colours', 'ln gradient'],
  ['ln colours', 'edges'],
  ['ln colours', 'ln pixels'],
  ['ln colours', 'ln gradient', 'chroma edges'],
];

/** Least squares by the normal equations (a handful of columns), Gauss–Jordan with pivoting. */
function leastSquares(rows: number[][], y: number[]): number[] {
  const k = rows[0]!.length;
  const m = Array.from({ length: k }, (_, i) => [
    ...Array.from({ length: k }, (_, j) => rows.reduce((s, r) => s + r[i]! * r[j]!, 0)),
    rows.reduce((s, r, n) => s + r[i]! * y[n]!, 0),
  ]);
  for (let c = 0; c < k; c++) {
    let pivot = c;
    for (let r = c + 1; r < k; r++) if (Math.abs(m[r]![c]!) > Math.abs(m[pivot]![c]!)) pivot = r;
    [m[c], m[pivot]] = [m[pivot]!, m[c]!];
    for (let r = 0; r < k; r++) {
      if (r === c) continue;
      const f = m[r]![c]! / m[c]![c]!;
      for (let j = c; j <= k; j++) m[r]![j]! -= f * m[c]![j]!;
    }
  }
  return m.map((row, i) => row[k]! / row[i]!);
}

for (const format of ['jpeg', 'webp', 'avif'] as const) {
  const photos = data.curves.rows.filter((c) => c.format === format && !c.synthetic);
  const y = photos.map((c) => qStar(c, TARGET[format]));
  const parts = SETS.map((set) => {
    const x = photos.map((c) => [1, ...set.map((f) => FEATURES[f]!(c))]);
    const misses = photos.map((_, i) => {
      const w = leastSquares(
        x.filter((_, j) => j !== i),
        y.filter((_, j) => j !== i),
      );
      return y[i]! - x[i]!.reduce((s, v, j) => s + v * w[j]!, 0);
    });
    const rms = Math.sqrt(misses.reduce((s, e) => s + e * e, 0) / misses.length);
    const worst = Math.max(...misses.map(Math.abs));
    return `${set.length ? set.join(' + ') : 'mean'}: ${rms.toFixed(1)} (max ${worst.toFixed(1)})`;
  });
  process.stdout.write(
    `${format}, ${photos.length} photos, leave-one-out miss in quality steps, RMS (max):\n  ${parts.join('\n  ')}\n`,
  );
}
