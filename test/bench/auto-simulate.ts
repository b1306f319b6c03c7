/**
 * Replays quality "auto"'s photo path (predicted first probe, slope correction, secant search, band
 * acceptance, cap, floor) on the calibration curves of test/bench/results/auto-calibration.json →
 * curves (every corpus photo's score and bytes at Q 56, 66, 74, 80, 86, 94 in each format, with the
 * settings auto uses), interpolating score and ln(bytes) linearly between the grid points. No encode,
 * no score: it runs in a second, so choices of band and target can be compared before they are
 * measured for real (auto-speed.ts, the bench). Per format it prints the scored encodes per photo, the
 * mean and minimum score, and the bytes against the fixed quality with the same worst case (the
 * smallest Q at which every photo reaches the floor, the issue 11 yardstick).
 *
 * Usage: node test/bench/auto-simulate.ts [--below N] [--above N] [--target-delta J,W,A]
 *        [--synthetic FILE [--start J,W,A] [--slope S]]
 *        node test/bench/auto-simulate.ts --slopes [--synthetic FILE]
 *   (defaults: the engine's AUTO_BELOW, AUTO_TOLERANCE and AUTO_SETTINGS targets)
 * --slopes prints, per format, the slope between the predicted first probe and where each curve
 * crosses the target, for the images whose first probe missed, by the direction of the miss (what
 * auto-predict.ts's correction slopes are read from).
 * --synthetic replays the synthetic images' curves of FILE (auto-calibrate.ts --part curves --kinds
 * screenshot,graphic,icon,chart,illus --out FILE) instead, each with the chroma auto picks for it
 * (4:4:4 where chromaEdgeShare ≥ 0.01); --start and --slope put another first probe and first
 * correction in place of auto-predict.ts's SYNTHETIC model, to compare one with the other. Synthetic
 * curves are rougher than photos' (a logo's JPEG score can fall from Q 74 to Q 80), so the replay's
 * step counts are an estimate to be checked with auto-speed.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AUTO_BELOW, AUTO_FLOOR, AUTO_SETTINGS, AUTO_TOLERANCE } from '../../core/engine/src/auto.ts';
import { predictQuality } from '../../core/engine/src/auto-predict.ts';
import { type ImageFeatures, isSynthetic } from '../../core/engine/src/image-features.ts';

type Lossy = 'jpeg' | 'webp' | 'avif';
interface Row {
  name: string;
  kind: string;
  format: Lossy;
  features: ImageFeatures;
  points: { q: number; bytes: number; score: number }[];
}

const { values } = parseArgs({
  options: {
    below: { type: 'string' },
    above: { type: 'string' },
    'target-delta': { type: 'string' },
    synthetic: { type: 'string' },
    start: { type: 'string' },
    slope: { type: 'string' },
    'far-above': { type: 'string' },
    slopes: { type: 'boolean' },
  },
});
const below = Number(values.below ?? AUTO_BELOW);
const above = Number(values.above ?? AUTO_TOLERANCE);
const delta = (values['target-delta'] ?? '0,0,0').split(',').map(Number);
const MAX_STEPS = 4;
/** auto.ts's FAR_ABOVE (not exported there): a first probe this far over the target jumps to Q 30. */
const farAbove = Number(values['far-above'] ?? 10);

interface SyntheticRow extends Row {
  variant: string;
  synthetic: boolean;
}
const curvesFile = values.synthetic ?? join(import.meta.dirname, 'results', 'auto-calibration.json');
const curves = JSON.parse(readFileSync(curvesFile, 'utf8')).curves as { rows: SyntheticRow[] };
const rows: Row[] = values.synthetic
  ? curves.rows.filter(
      (r) =>
        r.kind !== 'photo' &&
        (r.format === 'webp' ||
          r.variant === (r.synthetic && r.features.chromaEdgeShare >= 0.01 ? '4:4:4' : '4:2:0')),
    )
  : curves.rows.filter((r) => r.kind === 'photo');
const startOverride = values.start?.split(',').map(Number);
const slopeOverride = values.slope === undefined ? undefined : Number(values.slope);
const FORMAT_INDEX = { jpeg: 0, webp: 1, avif: 2 } as const;

function interp(row: Row, q: number, f: (p: Row['points'][number]) => number): number {
  const pts = row.points;
  let i = 0;
  while (i < pts.length - 2 && q >= pts[i + 1]!.q) i++;
  const a = pts[i]!;
  const b = pts[i + 1]!;
  return f(a) + ((f(b) - f(a)) * (q - a.q)) / (b.q - a.q);
}
const scoreAt = (r: Row, q: number) => interp(r, q, (p) => p.score);
const bytesAt = (r: Row, q: number) => Math.exp(interp(r, q, (p) => Math.log(p.bytes)));

interface Trial {
  q: number;
  score: number;
  bytes: number;
}

/** auto.ts's photo path for one image, on its curve. */
function auto(r: Row, target: number, cap: number): { t: Trial; steps: number } {
  const trials: Trial[] = [];
  const at = (q: number): Trial => {
    let t = trials.find((x) => x.q === q);
    if (!t) {
      t = { q, score: scoreAt(r, q), bytes: bytesAt(r, q) };
      trials.push(t);
    }
    return t;
  };
  const inBand = (t: Trial) => t.score >= target - below && t.score - target <= above;
  const model = predictQuality(r.format, r.features, {}, target);
  const predicted = {
    q: startOverride ? startOverride[FORMAT_INDEX[r.format]]! : model.q,
    slope: slopeOverride === undefined ? model.slope : { up: slopeOverride, down: slopeOverride },
  };
  const first = at(Math.min(cap, Math.max(30, predicted.q)));
  if (!inBand(first)) {
    const off = first.score - target;
    let q =
      off < 0
        ? Math.min(cap, first.q + Math.max(1, Math.ceil((0.3 - off) / predicted.slope.up)))
        : off > farAbove
          ? 30
          : Math.max(30, first.q - Math.max(1, Math.floor((off - 0.2) / predicted.slope.down)));
    let pass = first.score >= target ? first : undefined;
    let fail = first.score >= target ? undefined : first;
    for (let step = 0; step < MAX_STEPS && q !== first.q; step++) {
      const t = at(q);
      if (t.score >= target) {
        if (!pass || t.q < pass.q) pass = t;
      } else if (!fail || t.q > fail.q) fail = t;
      if (inBand(t) || (pass && fail && pass.q - fail.q <= 1)) break;
      let next: number;
      if (pass && fail) {
        const slope = (pass.score - fail.score) / (pass.q - fail.q);
        next = fail.q + Math.ceil((target + 0.2 - fail.score) / Math.max(slope, 0.05));
        next = Math.min(pass.q - 1, Math.max(fail.q + 1, next));
        // auto.ts's MIN_STEP_SAVING.
        if (next === pass.q - 1 && (pass.bytes / fail.bytes) ** (1 / (pass.q - fail.q)) - 1 < 0.03) break;
      } else {
        const [a, b] = trials.slice(-2);
        const measured = a && b && b.q !== a.q ? (b.score - a.score) / (b.q - a.q) : 0;
        const slope = measured > 0.1 ? measured : 0.6;
        if (pass) {
          if (pass.q <= 30) break;
          next = pass.q - Math.max(1, Math.floor((pass.score - target - 0.2) / slope));
        } else {
          if (fail!.q >= cap) break;
          next = fail!.q + Math.max(1, Math.ceil((target + 0.3 - fail!.score) / slope));
        }
        next = Math.min(cap, Math.max(30, next));
      }
      if (trials.some((x) => x.q === next)) break;
      q = next;
    }
  }
  const smallest = (goal: number) =>
    trials
      .filter((t) => t.score >= goal)
      .reduce<Trial | undefined>((a, b) => (!a || b.bytes < a.bytes ? b : a), undefined);
  const found = smallest(target - below) ?? smallest(AUTO_FLOOR);
  if (found) return { t: found, steps: trials.length };
  // Above the cap to the floor (the real search takes a few steps; counted as one more here).
  for (let q = cap + 1; q <= 98; q++)
    if (scoreAt(r, q) >= AUTO_FLOOR) return { t: at(q), steps: trials.length + 1 };
  return { t: at(98), steps: trials.length + 1 };
}

/**
 * Per format: for each image whose first probe (the predicted quality, capped) misses the band (and
 * is not FAR_ABOVE over it, where the search jumps to Q 30 instead of using a slope), the
 * score gained per step between that probe and where the curve crosses the target (+0.25, the middle
 * of the band), split by the direction of the miss. Its "median" is the middle value, the upper of
 * the two middle ones for an even count (measure.ts's `median` averages them: AVIF photos from under
 * would read 0.85 instead of the 0.87 auto-predict.ts was measured with).
 */
function printSlopes(): void {
  console.log('format  miss   images  slopes (points a step)                       median');
  for (const [i, format] of (['jpeg', 'webp', 'avif'] as const).entries()) {
    const target = AUTO_SETTINGS[format].target + delta[i]!;
    const cap = AUTO_SETTINGS[format].maxQ;
    const split: Record<'under' | 'over', number[]> = { under: [], over: [] };
    // The images of the model being read: synthetic ones from --synthetic's file, photos otherwise.
    const model = rows.filter(
      (x) => x.format === format && isSynthetic(x.features) === Boolean(values.synthetic),
    );
    for (const r of model) {
      const q1 = Math.min(cap, Math.max(30, predictQuality(format, r.features, {}, target).q));
      const s1 = scoreAt(r, q1);
      // In the band, or so far over that the search jumps to Q 30 without the slope (FAR_ABOVE).
      if ((s1 >= target - below && s1 - target <= above) || s1 - target > farAbove) continue;
      let crossing: number | undefined;
      for (let q = 30; q <= 98 && crossing === undefined; q += 0.1)
        if (scoreAt(r, q) >= target + 0.25) crossing = q;
      if (crossing === undefined) continue;
      split[s1 < target ? 'under' : 'over'].push((scoreAt(r, crossing) - s1) / (crossing - q1));
    }
    for (const miss of ['under', 'over'] as const) {
      const v = split[miss].sort((a, b) => a - b);
      const median = v.length ? v[Math.floor(v.length / 2)]!.toFixed(2) : '—';
      console.log(
        `${format.padEnd(7)} ${miss.padEnd(6)} ${String(v.length).padStart(6)}  ${v
          .map((x) => x.toFixed(2))
          .join(' ')
          .padEnd(44)} ${median}`,
      );
    }
  }
}

if (values.slopes) {
  printSlopes();
  process.exit(0);
}

console.log(`band [target − ${below}, target + ${above}], target deltas ${delta.join(', ')}`);
console.log(
  `format  target  ${values.synthetic ? 'images' : 'photos'}  steps  mean   min   fixed Q (same worst case)  bytes vs fixed`,
);
(['jpeg', 'webp', 'avif'] as const).forEach((format, i) => {
  const target = AUTO_SETTINGS[format].target + delta[i]!;
  const rs = rows.filter((r) => r.format === format);
  let fixedQ = 98;
  for (let q = 30; q <= 98; q++) {
    if (rs.every((r) => scoreAt(r, q) >= AUTO_FLOOR)) {
      fixedQ = q;
      break;
    }
  }
  let bytes = 0;
  let fixedBytes = 0;
  let steps = 0;
  let sum = 0;
  let min = Infinity;
  for (const r of rs) {
    const { t, steps: s } = auto(r, target, AUTO_SETTINGS[format].maxQ);
    bytes += t.bytes;
    fixedBytes += bytesAt(r, fixedQ);
    steps += s;
    sum += t.score;
    min = Math.min(min, t.score);
  }
  console.log(
    `${format.padEnd(7)} ${String(target).padStart(6)} ${String(rs.length).padStart(7)} ${(steps / rs.length).toFixed(2).padStart(6)} ${(sum / rs.length).toFixed(1).padStart(5)} ${min.toFixed(1).padStart(5)} ${String(fixedQ).padStart(26)} ${`${((bytes / fixedBytes - 1) * 100).toFixed(1)} %`.padStart(15)}`,
  );
});
