import { DEFAULT_QUALITY, type OutputFormat } from '@compresso/schema';

/** The fixed default on the scale; quality "auto" aims at the score it reaches. */
export const DEFAULT_SCALE_QUALITY = DEFAULT_QUALITY;

/**
 * Compresso's one quality scale. A quality Q means "the visual quality mozjpeg reaches at Q"; the
 * other encoders are mapped onto it so that the same Q gives the same mean perceptual score
 * (SSIMULACRA2) in every format. Interpolated linearly between the points.
 *
 * Measured by test/bench/calibrate.ts --part scale on 2026-11-22 (results:
 * test/bench/results/calibration.json): the 14 corpus photos (12 JPEG/PNG + 2 HEIC) resized to fit
 * 2048 px, mozjpeg at Q ∈ {40,50,60,70,75,80,85,90,95}; WebP (effort 4) and AVIF (effort 3,
 * 4:2:0) on grids of their own quality; for each Q the encoder quality whose mean score equals
 * mozjpeg's was read off the mean curve. At the default Q=80 the means are mozjpeg 75.9, WebP 75.8,
 * AVIF 75.9. Q below 40 and the WebP point at 40 are extrapolated (WebP's lowest grid point, 40,
 * already scores above mozjpeg Q40).
 */
type Curve = readonly (readonly [q: number, encoderQuality: number])[];

const WEBP: Curve = [
  [1, 1],
  [40, 35],
  [50, 49],
  [60, 61],
  [70, 76],
  [75, 81],
  [80, 84],
  [85, 88],
  [90, 92],
  [95, 97],
  [100, 100],
];
const AVIF: Curve = [
  [1, 1],
  [40, 34],
  [50, 40],
  [60, 44],
  [70, 50],
  [75, 56],
  [80, 61],
  [85, 68],
  [90, 77],
  [95, 87],
  [100, 100],
];

/**
 * Mean SSIMULACRA2 mozjpeg reaches at Q on the photo corpus (same calibration run): what a quality Q
 * *means*. Used as the bar a palette PNG must clear at quality Q before it is preferred to lossless.
 * The point at 100 is an estimate (not on the calibration grid).
 */
const SCORE: Curve = [
  [1, 0],
  [40, 50.8],
  [50, 57.8],
  [60, 62.6],
  [70, 68.4],
  [75, 72.7],
  [80, 75.9],
  [85, 78.9],
  [90, 83.1],
  [95, 86.7],
  [100, 92],
];

function interpolateExact(curve: Curve, q: number): number {
  const first = curve[0]!;
  if (q <= first[0]) return first[1];
  for (let i = 1; i < curve.length; i++) {
    const [q1, e1] = curve[i]!;
    const [q0, e0] = curve[i - 1]!;
    if (q <= q1) return e0 + ((e1 - e0) * (q - q0)) / (q1 - q0);
  }
  return curve[curve.length - 1]![1];
}

/** The SSIMULACRA2 that quality `q` stands for (mozjpeg's mean on photos at q). */
export function scoreForQuality(q: number): number {
  return interpolateExact(SCORE, q);
}

function interpolate(curve: Curve, q: number): number {
  const first = curve[0]!;
  if (q <= first[0]) return first[1];
  for (let i = 1; i < curve.length; i++) {
    const [q1, e1] = curve[i]!;
    const [q0, e0] = curve[i - 1]!;
    if (q <= q1) return Math.round(e0 + ((e1 - e0) * (q - q0)) / (q1 - q0));
  }
  return curve[curve.length - 1]![1];
}

/** The encoder's own quality for Compresso quality `q` (1–100). PNG and GIF map to palette quality. */
export function encoderQuality(format: OutputFormat, q: number): number {
  switch (format) {
    case 'jpeg':
      return q;
    case 'webp':
      return interpolate(WEBP, q);
    case 'avif':
      return interpolate(AVIF, q);
    case 'png':
    case 'gif':
      return q;
  }
}
