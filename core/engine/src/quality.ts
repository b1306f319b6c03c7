import { DEFAULT_QUALITY, type OutputFormat } from '@compresso/schema';

/** The fixed default on the scale; quality "auto" aims at the score it reaches. */
export const DEFAULT_SCALE_QUALITY = DEFAULT_QUALITY;

/**
 * Compresso's one quality scale. A quality Q means "the visual quality mozjpeg reaches at Q"; the
 * other encoders are mapped onto it so that the same Q gives the same perceptual score
 * (SSIMULACRA2) in every format. The tables are measured on the photo corpus — see
 * test/bench/calibrate.ts and the engine README — and interpolated linearly between points.
 *
 * PROVISIONAL: the points below are the field-notes estimates; calibrate.ts replaces them.
 */
type Curve = readonly (readonly [q: number, encoderQuality: number])[];

const WEBP: Curve = [
  [1, 1],
  [50, 56],
  [75, 80],
  [80, 86],
  [90, 94],
  [100, 100],
];
const AVIF: Curve = [
  [1, 1],
  [50, 32],
  [75, 55],
  [80, 60],
  [90, 74],
  [100, 100],
];

/**
 * Mean SSIMULACRA2 mozjpeg reaches at Q on the photo corpus: what a quality Q *means*. Used as the
 * bar a palette PNG must clear at quality Q before it is preferred to lossless.
 */
const SCORE: Curve = [
  [1, 0],
  [40, 55],
  [60, 67],
  [80, 77],
  [90, 84],
  [100, 95],
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
