/**
 * SSIMULACRA2 (version 2.1, Jon Sneyers / Cloudinary), written from the published description and
 * constants: linear sRGB → XYB (rescaled to roughly 0..1 per channel), six scales (2×2 box downsample
 * in linear RGB), per scale and channel an SSIM map without the luminance-gamma term plus two
 * edge-difference maps (ringing/blocking where the original is smooth, blur where it has edges),
 * each summarised by its 1-norm and 4-norm: 108 numbers, weighted, then mapped to a score where
 * 100 is identical, 90 visually lossless, 70 high quality and negative very poor.
 *
 * Checked against the reference tool (cloudinary/ssimulacra2) from 16 to 2048 px
 * (reference-agreement.test.ts): the blur is the reference's recursive Gaussian written as the 9-tap
 * kernel it equals, with zero outside the image; scales stop where the reference stops; and an image
 * with fewer than six scales weighs its sub-scores the way the reference does (packed, see
 * `subScores`). Images under 8 px, which the reference refuses, are padded (see `padToMinimum`).
 *
 * Everything is Float32Array planes allocated once per call; no per-pixel allocation. The reference
 * side can be prepared once (`prepareReference`) and reused for many distorted candidates (the score
 * is bit-identical), and the score skips the terms whose weight is 0 or negligible (`weighted`,
 * NEGLIGIBLE_WEIGHT: at most 0.003 points from the computation of all 108, metric.test.ts checks
 * 0.005); with the blur's row-wise passes and a table-seeded cube root this makes a score about 2–2.5×
 * cheaper than the straightforward two-pass code.
 */

export interface RgbImage {
  width: number;
  height: number;
  /** 8-bit sRGB, 3 channels interleaved, row-major, no padding. */
  data: Uint8Array;
  /**
   * A transparent image before compositing: 8-bit sRGB + straight alpha, 4 channels interleaved, and
   * the background (sRGB, 0–255) it is judged over. When both are there the metric composites in
   * floating point, as the reference tool does, instead of reading the 8-bit `data` (which is the
   * same composite rounded): rounding to 8 bits hides alpha differences under half a code value, and
   * put the engine up to 3 points above the reference tool on anti-aliased transparent graphics.
   */
  rgba?: Uint8Array;
  background?: { r: number; g: number; b: number };
}

const SCALES = 6;
const C2 = 0.0009;

// Opsin absorbance (libjxl's XYB): linear sRGB mixed into three cone-like responses, plus a bias
// that keeps the cube root away from its infinite slope at zero.
const M00 = 0.3;
const M01 = 0.622;
const M02 = 0.078;
const M10 = 0.23;
const M11 = 0.692;
const M12 = 0.078;
const M20 = 0.24342268924547819;
const M21 = 0.20476744424496821;
const M22 = 1 - M20 - M21;
const BIAS = 0.0037930732552754493;
const CBRT_BIAS = Math.cbrt(BIAS);

/**
 * The 108 weights of version 2.1, ordered channel (X, Y, B) → scale (1:1…1:32) → norm (1, 4) →
 * map (SSIM, ringing, blur).
 */
const WEIGHTS = new Float64Array([
  0.0, 0.0007376606707406586, 0.0, 0.0, 0.0007793481682867309, 0.0, 0.0, 0.0004371155730107379, 0.0,
  1.1041726426657346, 0.00066284834129271, 0.00015231632783718752, 0.0, 0.0016406437456599754, 0.0,
  1.8422455520539298, 11.441172603757666, 0.0, 0.0007989109436015163, 0.000176816438078653, 0.0,
  1.8787594979546387, 10.94906990605142, 0.0, 0.0007289346991508072, 0.9677937080626833, 0.0,
  0.00014003424285435884, 0.9981766977854967, 0.00031949755934435053, 0.0004550992113792063, 0.0, 0.0,
  0.0013648766163243398, 0.0, 0.0, 0.0, 0.0, 0.0, 7.466890328078848, 0.0, 17.445833984131262,
  0.0006235601634041466, 0.0, 0.0, 6.683678146179332, 0.00037724407979611296, 1.027889937768264,
  225.20515300849274, 0.0, 0.0, 19.213238186143016, 0.0011401524586618361, 0.001237755635509985,
  176.39317598450694, 0.0, 0.0, 24.43300999870476, 0.28520802612117757, 0.0004485436923833408, 0.0, 0.0, 0.0,
  34.77906344483772, 44.835625328877896, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0008680556573291698, 0.0,
  0.0, 0.0, 0.0, 0.0, 0.0005313191874358747, 0.0, 0.00016533814161379112, 0.0, 0.0, 0.0, 0.0, 0.0,
  0.0004179171803251336, 0.0017290828234722833, 0.0, 0.0020827005846636437, 0.0, 0.0, 8.826982764996862,
  23.19243343998926, 0.0, 95.1080498811086, 0.9863978034400682, 0.9834382792465353, 0.0012286405048278493,
  171.2667255897307, 0.9807858872435379, 0.0, 0.0, 0.0, 0.0005130064588990679, 0.0, 0.00010854057858411537,
]);

/** sRGB transfer curve decoded once for all 256 codes. */
export const SRGB_TO_LINEAR = new Float32Array(256);
for (let i = 0; i < 256; i++) SRGB_TO_LINEAR[i] = srgbToLinear(i / 255);

/**
 * The blur of the published metric is a recursive Gaussian (sigma 1.5) built as in Charalampidis,
 * "Recursive implementation of the Gaussian filter using truncated cosine functions" (2016): three
 * resonators whose sum is exactly a finite kernel, g(t) = Σ β_k cos(ω_k t) for |t| < N, zero from
 * |t| = N on, with N = round(3.2795 σ + 0.2546) = 5 and ω_k = (2k − 1)π / 2N. So the filter is a
 * 9-tap FIR, and here it is applied as one: same weights as the recursion (not a sampled Gaussian —
 * that one's 11 taps put 0.5 % more on the centre and 19 % less on ±4, which kept every score about
 * 0.1–0.2 above the reference tool), and fewer taps than the sampled one, so no slower.
 * β solves the paper's 3×3 system (its equations 53–56), which ties the kernel to a unit sum and to
 * the Gaussian's width and spectrum at the three ω_k.
 */
function truncatedCosineKernel(sigma: number): Float32Array {
  const n = Math.round(3.2795 * sigma + 0.2546);
  const omega = [1, 3, 5].map((k) => (k * Math.PI) / (2 * n)) as [number, number, number];
  const p = [
    1 / Math.tan(0.5 * omega[0]),
    -1 / Math.tan(0.5 * omega[1]),
    1 / Math.tan(0.5 * omega[2]),
  ] as const;
  const r = [
    (p[0] * p[0]) / Math.sin(omega[0]),
    -(p[1] * p[1]) / Math.sin(omega[1]),
    (p[2] * p[2]) / Math.sin(omega[2]),
  ] as const;
  const rho = omega.map((w) => Math.exp(-0.5 * sigma * sigma * w * w) / n) as [number, number, number];
  const d13 = p[0] * r[1] - r[0] * p[1];
  const zeta15 = (p[1] * r[2] - r[1] * p[2]) / d13;
  const zeta35 = (p[2] * r[0] - r[2] * p[0]) / d13;
  // A β = γ, solved by Cramer's rule (3×3, once at load).
  const a = [
    [p[0], p[1], p[2]],
    [r[0], r[1], r[2]],
    [zeta15, zeta35, 1],
  ];
  const g = [1, n * n - sigma * sigma, zeta15 * rho[0] + zeta35 * rho[1] + rho[2]];
  const det = (m: number[][]): number =>
    m[0]![0]! * (m[1]![1]! * m[2]![2]! - m[1]![2]! * m[2]![1]!) -
    m[0]![1]! * (m[1]![0]! * m[2]![2]! - m[1]![2]! * m[2]![0]!) +
    m[0]![2]! * (m[1]![0]! * m[2]![1]! - m[1]![1]! * m[2]![0]!);
  const d = det(a);
  const beta = [0, 1, 2].map((col) => det(a.map((row, i) => row.map((v, j) => (j === col ? g[i]! : v)))) / d);
  const radius = n - 1;
  const k = new Float32Array(2 * radius + 1);
  for (let t = -radius; t <= radius; t++) {
    k[t + radius] =
      beta[0]! * Math.cos(omega[0] * t) +
      beta[1]! * Math.cos(omega[1] * t) +
      beta[2]! * Math.cos(omega[2] * t);
  }
  return k;
}

const RADIUS = 4;
export const KERNEL = truncatedCosineKernel(1.5);
if (KERNEL.length !== 2 * RADIUS + 1) throw new Error('SSIMULACRA2 blur: unexpected kernel size');

/** Three planes of one image at one scale. */
export type Planes = [Float32Array, Float32Array, Float32Array];

function planes(n: number): Planes {
  return [new Float32Array(n), new Float32Array(n), new Float32Array(n)];
}

function srgbToLinear(v: number): number {
  return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
}

/**
 * The sRGB transfer curve at k / 255² for every k from 0 to 255²: an 8-bit value c at 8-bit alpha a
 * over an 8-bit background value g blends to (a·c + (255 − a)·g) / 255², so compositing a transparent
 * image takes one lookup a channel instead of a power function (on a 2048×1148 graphic with soft
 * shadows the power function and its loop were ~55 % of the CPU of preparing and scoring). The same values as computing the blend in
 * doubles and decoding it, but for the rounding of the blend itself (below a Float32 step). Built on
 * first use: 254 KiB.
 */
const COMPOSITE_STEPS = 255 * 255;
let compositeToLinear: Float32Array | undefined;

function compositeTable(): Float32Array {
  if (!compositeToLinear) {
    const table = new Float32Array(COMPOSITE_STEPS + 1);
    for (let k = 0; k <= COMPOSITE_STEPS; k++) table[k] = srgbToLinear(k / COMPOSITE_STEPS);
    compositeToLinear = table;
  }
  return compositeToLinear;
}

export function toLinear(image: RgbImage, out: Planes = planes(image.width * image.height)): Planes {
  const n = image.width * image.height;
  const [r, g, b] = out;
  const { rgba, background } = image;
  if (rgba && background) {
    // Blend in sRGB-encoded values (as browsers and the reference tool do), then decode; opaque
    // pixels take the table.
    const bg = [background.r, background.g, background.b] as const;
    if (bg.every((v) => Number.isInteger(v) && v >= 0 && v <= 255)) {
      // 8-bit background: the blend is (a·c + (255 − a)·bg) / 255², one lookup in COMPOSITE_STEPS.
      const table = compositeTable();
      for (let i = 0, j = 0; i < n; i++, j += 4) {
        const a = rgba[j + 3]!;
        if (a === 255) {
          r[i] = SRGB_TO_LINEAR[rgba[j]!]!;
          g[i] = SRGB_TO_LINEAR[rgba[j + 1]!]!;
          b[i] = SRGB_TO_LINEAR[rgba[j + 2]!]!;
        } else {
          const rest = 255 - a;
          r[i] = table[a * rgba[j]! + rest * bg[0]]!;
          g[i] = table[a * rgba[j + 1]! + rest * bg[1]]!;
          b[i] = table[a * rgba[j + 2]! + rest * bg[2]]!;
        }
      }
      return out;
    }
    for (let i = 0, j = 0; i < n; i++, j += 4) {
      const a = rgba[j + 3]!;
      const t = a / 255;
      r[i] = srgbToLinear((t * rgba[j]!) / 255 + ((1 - t) * bg[0]) / 255);
      g[i] = srgbToLinear((t * rgba[j + 1]!) / 255 + ((1 - t) * bg[1]) / 255);
      b[i] = srgbToLinear((t * rgba[j + 2]!) / 255 + ((1 - t) * bg[2]) / 255);
    }
    return out;
  }
  const d = image.data;
  for (let i = 0, j = 0; i < n; i++, j += 3) {
    r[i] = SRGB_TO_LINEAR[d[j]!]!;
    g[i] = SRGB_TO_LINEAR[d[j + 1]!]!;
    b[i] = SRGB_TO_LINEAR[d[j + 2]!]!;
  }
  return out;
}

/**
 * The full-resolution scale's linear light: planes for a transparent image (composited in floating
 * point), otherwise the 8-bit pixels themselves, which `toXyb` and `downsample` decode through
 * SRGB_TO_LINEAR as they read them. The same Float32 values either way, so the same score to the
 * last bit; skipping the three full-size planes saves their writes and allocation (at 2048 px,
 * 12 % of a row-sampled score's CPU, whose other work is mostly on a quarter of the rows).
 */
type Linear = Planes | Uint8Array;

function linearOf(image: RgbImage): Linear {
  return image.rgba && image.background ? toLinear(image) : image.data;
}

/** 2×2 box average; an odd last row/column repeats the edge pixel, as the reference does. */
function downsample(src: Linear, width: number, height: number): Planes {
  if (src instanceof Uint8Array) return downsampleBytes(src, width, height);
  const w = (width + 1) >> 1;
  const h = (height + 1) >> 1;
  const out = planes(w * h);
  for (let c = 0; c < 3; c++) {
    const s = src[c]!;
    const o = out[c]!;
    for (let oy = 0; oy < h; oy++) {
      const y0 = 2 * oy * width;
      const y1 = Math.min(2 * oy + 1, height - 1) * width;
      for (let ox = 0; ox < w; ox++) {
        const x0 = 2 * ox;
        const x1 = Math.min(x0 + 1, width - 1);
        o[oy * w + ox] = (s[y0 + x0]! + s[y0 + x1]! + s[y1 + x0]! + s[y1 + x1]!) * 0.25;
      }
    }
  }
  return out;
}

/** `downsample(toLinear(image))` from the 8-bit pixels, in the same order of additions. */
function downsampleBytes(d: Uint8Array, width: number, height: number): Planes {
  const w = (width + 1) >> 1;
  const h = (height + 1) >> 1;
  const out = planes(w * h);
  for (let c = 0; c < 3; c++) {
    const o = out[c]!;
    for (let oy = 0; oy < h; oy++) {
      const y0 = 2 * oy * width;
      const y1 = Math.min(2 * oy + 1, height - 1) * width;
      for (let ox = 0; ox < w; ox++) {
        const x0 = 2 * ox;
        const x1 = Math.min(x0 + 1, width - 1);
        o[oy * w + ox] =
          (SRGB_TO_LINEAR[d[(y0 + x0) * 3 + c]!]! +
            SRGB_TO_LINEAR[d[(y0 + x1) * 3 + c]!]! +
            SRGB_TO_LINEAR[d[(y1 + x0) * 3 + c]!]! +
            SRGB_TO_LINEAR[d[(y1 + x1) * 3 + c]!]!) *
          0.25;
      }
    }
  }
  return out;
}

/**
 * Cube root for the opsin responses, whose argument lies in [BIAS, 1 + BIAS]: linear interpolation
 * in a table of CBRT_STEPS intervals (relative error under 2e-4), then one Halley step, which cubes
 * the error (under 1e-11, far below the Float32 rounding every XYB value gets). Twice as fast as
 * Math.cbrt, which V8 does not inline; outside the table's range (never, for 8-bit input) it is used.
 */
const CBRT_STEPS = 4096;
const CBRT_RANGE = 1.01;
const CBRT_TABLE = new Float64Array(CBRT_STEPS + 2);
for (let i = 0; i < CBRT_TABLE.length; i++) CBRT_TABLE[i] = Math.cbrt((i * CBRT_RANGE) / CBRT_STEPS);

function cbrt(v: number): number {
  if (!(v >= BIAS && v < CBRT_RANGE)) return Math.cbrt(v);
  const f = v * (CBRT_STEPS / CBRT_RANGE);
  const i = f | 0;
  const t0 = CBRT_TABLE[i]!;
  const y = t0 + (CBRT_TABLE[i + 1]! - t0) * (f - i);
  const y3 = y * y * y;
  return (y * (y3 + 2 * v)) / (2 * y3 + v);
}

/**
 * Linear RGB → XYB shifted and scaled into roughly 0..1 (the metric's own offsets), into `out`. Only
 * the channels in `need` are written (Y needs two of the three cube roots, B all three, X the first two).
 */
function toXyb(
  lin: Linear,
  n: number,
  out: Planes,
  need: readonly boolean[] = ALL_CHANNELS,
  rows?: RowMask,
  width = 0,
): void {
  const range = lin instanceof Uint8Array ? toXybRangeBytes : toXybRange;
  if (rows) {
    // Only the rows the sampled scale reads (kept rows and their blur halo).
    for (let y = 0; y < rows.length; y++)
      if (rows[y]) range(lin as Planes & Uint8Array, y * width, (y + 1) * width, out, need);
    return;
  }
  range(lin as Planes & Uint8Array, 0, n, out, need);
}

/** `toXybRange` reading 8-bit sRGB pixels through SRGB_TO_LINEAR (the same values toLinear writes). */
function toXybRangeBytes(
  d: Uint8Array,
  from: number,
  to: number,
  out: Planes,
  need: readonly boolean[],
): void {
  const [ox, oy, ob] = out;
  const [nx, ny, nb] = need;
  for (let i = from, j = from * 3; i < to; i++, j += 3) {
    const lr = SRGB_TO_LINEAR[d[j]!]!;
    const lg = SRGB_TO_LINEAR[d[j + 1]!]!;
    const lb = SRGB_TO_LINEAR[d[j + 2]!]!;
    const m0 = cbrt(M00 * lr + M01 * lg + M02 * lb + BIAS) - CBRT_BIAS;
    const m1 = cbrt(M10 * lr + M11 * lg + M12 * lb + BIAS) - CBRT_BIAS;
    const y = 0.5 * (m0 + m1);
    if (nx) ox[i] = 0.5 * (m0 - m1) * 14 + 0.42;
    if (ny) oy[i] = y + 0.01;
    if (nb) ob[i] = cbrt(M20 * lr + M21 * lg + M22 * lb + BIAS) - CBRT_BIAS - y + 0.55;
  }
}

function toXybRange(lin: Planes, from: number, to: number, out: Planes, need: readonly boolean[]): void {
  const [r, g, b] = lin;
  const [ox, oy, ob] = out;
  const [nx, ny, nb] = need;
  for (let i = from; i < to; i++) {
    const lr = r[i]!;
    const lg = g[i]!;
    const lb = b[i]!;
    const m0 = cbrt(M00 * lr + M01 * lg + M02 * lb + BIAS) - CBRT_BIAS;
    const m1 = cbrt(M10 * lr + M11 * lg + M12 * lb + BIAS) - CBRT_BIAS;
    const y = 0.5 * (m0 + m1);
    if (nx) ox[i] = 0.5 * (m0 - m1) * 14 + 0.42;
    if (ny) oy[i] = y + 0.01;
    if (nb) ob[i] = cbrt(M20 * lr + M21 * lg + M22 * lb + BIAS) - CBRT_BIAS - y + 0.55;
  }
}

const ALL_CHANNELS = [true, true, true] as const;

// The kernel is symmetric: interior pixels take one unrolled expression (one multiply per tap
// pair), only the 4-pixel borders use the zero-boundary loop (pixels outside the image count as 0,
// as in the reference's filter). Every intermediate plane is Float32, rounded where the
// straightforward two-pass blur would store it, so the sums are the same to the last bit.
const K0 = KERNEL[4]!,
  K1 = KERNEL[5]!,
  K2 = KERNEL[6]!,
  K3 = KERNEL[7]!,
  K4 = KERNEL[8]!;

/** One pixel of the horizontal pass near a border: the generic loop, zero outside the row. */
function edgeH(src: Float32Array, from: number, width: number, x: number): number {
  let acc = 0;
  for (let t = -RADIUS; t <= RADIUS; t++) {
    const xx = x + t;
    if (xx >= 0 && xx < width) acc += KERNEL[t + RADIUS]! * src[from + xx]!;
  }
  return acc;
}

/**
 * Horizontal pass over one row (`src` from `from`, `out` from `to`). The interior keeps the nine taps
 * in locals and loads one new pixel per step: the blur is bound by loads, not arithmetic.
 */
function blurRowH(src: Float32Array, from: number, width: number, out: Float32Array, to: number): void {
  const edgeEnd = Math.min(RADIUS, width);
  const innerEnd = width - RADIUS;
  for (let x = 0; x < edgeEnd; x++) out[to + x] = edgeH(src, from, width, x);
  if (innerEnd > RADIUS) {
    let v0 = src[from]!;
    let v1 = src[from + 1]!;
    let v2 = src[from + 2]!;
    let v3 = src[from + 3]!;
    let v4 = src[from + 4]!;
    let v5 = src[from + 5]!;
    let v6 = src[from + 6]!;
    let v7 = src[from + 7]!;
    for (let x = RADIUS; x < innerEnd; x++) {
      const v8 = src[from + x + 4]!;
      out[to + x] = K0 * v4 + K1 * (v3 + v5) + K2 * (v2 + v6) + K3 * (v1 + v7) + K4 * (v0 + v8);
      v0 = v1;
      v1 = v2;
      v2 = v3;
      v3 = v4;
      v4 = v5;
      v5 = v6;
      v6 = v7;
      v7 = v8;
    }
  }
  for (let x = Math.max(innerEnd, edgeEnd); x < width; x++) out[to + x] = edgeH(src, from, width, x);
}

/** Vertical pass for row `y` of `tmp` (the horizontal pass's plane) into `out` from `to`. */
function blurColumnRow(
  tmp: Float32Array,
  width: number,
  height: number,
  y: number,
  out: Float32Array,
  to: number,
): void {
  const w = width;
  const row = y * width;
  if (y >= RADIUS && y + RADIUS < height) {
    for (let x = 0; x < width; x++) {
      const i = row + x;
      out[to + x] =
        K0 * tmp[i]! +
        K1 * (tmp[i - w]! + tmp[i + w]!) +
        K2 * (tmp[i - 2 * w]! + tmp[i + 2 * w]!) +
        K3 * (tmp[i - 3 * w]! + tmp[i + 3 * w]!) +
        K4 * (tmp[i - 4 * w]! + tmp[i + 4 * w]!);
    }
    return;
  }
  // Border rows accumulate in the Float32 output, rounding after each tap.
  const lo = Math.max(0, y - RADIUS);
  const hi = Math.min(height - 1, y + RADIUS);
  out.fill(0, to, to + width);
  for (let yy = lo; yy <= hi; yy++) {
    const wt = KERNEL[yy - y + RADIUS]!;
    const srow = yy * width;
    for (let x = 0; x < width; x++) out[to + x]! += wt * tmp[srow + x]!;
  }
}

/** Separable Gaussian with zero outside the image; `tmp` is scratch of the same size. */
function blur(
  src: Float32Array,
  width: number,
  height: number,
  tmp: Float32Array,
  out: Float32Array,
  rows?: RowMask,
): void {
  for (let y = 0; y < height; y++) if (!rows || rows[y]) blurRowH(src, y * width, width, tmp, y * width);
  for (let y = 0; y < height; y++)
    if (!rows || rows[y] === KEPT) blurColumnRow(tmp, width, height, y, out, y * width);
}

/** Blur of a·b (each product rounded to Float32, as a stored product plane would be). */
function blurProduct(
  a: Float32Array,
  b: Float32Array,
  width: number,
  height: number,
  row: Float32Array,
  tmp: Float32Array,
  out: Float32Array,
  rows?: RowMask,
): void {
  for (let y = 0; y < height; y++) {
    if (rows && !rows[y]) continue;
    const off = y * width;
    for (let x = 0; x < width; x++) row[x] = a[off + x]! * b[off + x]!;
    blurRowH(row, 0, width, tmp, off);
  }
  for (let y = 0; y < height; y++)
    if (!rows || rows[y] === KEPT) blurColumnRow(tmp, width, height, y, out, y * width);
}

/**
 * Row sampling of the full-resolution scale, for a cheaper estimate of the score (quality "auto"'s
 * search): at 1:1, three quarters of a score's work, only bands of `band` rows out of every `every`
 * bands have their maps computed (plus the 4-row halo their vertical blur reads); the norms are
 * taken over the kept rows, so they estimate the full-image means, and the coarser scales are
 * computed whole. Images under `minHeight` rows are never sampled.
 */
export interface RowSampling {
  band: number;
  every: number;
  minHeight: number;
}

/** The sampling quality "auto" uses (accuracy measured in README.quality.md). */
export const AUTO_ROW_SAMPLING: RowSampling = { band: 16, every: 4, minHeight: 320 };

/** Per row: 0 not read, 1 read by a kept row's vertical blur, 2 kept (its maps summed). */
type RowMask = Uint8Array;
const KEPT = 2;

function rowMask(height: number, sampling: RowSampling | undefined): RowMask | undefined {
  if (!sampling || height < sampling.minHeight || sampling.every <= 1) return undefined;
  const mask = new Uint8Array(height);
  for (let y = 0; y < height; y++) {
    if (Math.floor(y / sampling.band) % sampling.every !== 0) continue;
    mask[y] = KEPT;
    for (let d = 1; d <= RADIUS; d++) {
      if (y - d >= 0 && !mask[y - d]) mask[y - d] = 1;
      if (y + d < height && !mask[y + d]) mask[y + d] = 1;
    }
  }
  return mask;
}

export function checkRgb(name: string, img: RgbImage): void {
  if (img.data.length !== img.width * img.height * 3) {
    throw new RangeError(
      `${name}: expected ${img.width * img.height * 3} bytes of RGB, got ${img.data.length}`,
    );
  }
  if (img.rgba && img.rgba.length !== img.width * img.height * 4) {
    throw new RangeError(
      `${name}: expected ${img.width * img.height * 4} bytes of RGBA, got ${img.rgba.length}`,
    );
  }
}

/**
 * One scale of a prepared reference: its XYB planes, their blurred means, and the blurred squares of
 * the channels whose SSIM term carries weight (the others are made when `subScores` asks for them).
 */
interface ReferenceScale {
  width: number;
  height: number;
  xyb: Planes;
  mu: (Float32Array | undefined)[];
  sigmaSq: (Float32Array | undefined)[];
}

/**
 * Everything about the reference that does not depend on the distorted image, computed once. A
 * search that scores several candidates against one reference (quality "auto", calibration) skips
 * the reference's blurs, colour conversion and downsampling on every score.
 */
export interface PreparedReference {
  width: number;
  height: number;
  scales: ReferenceScale[];
  /** Per scale, its row sampling, when prepared with one (see RowSampling). */
  rows?: (RowMask | undefined)[];
}

/** How many scales the metric computes for an image (it stops where a side would be under 8). */
export function scaleCount(width: number, height: number): number {
  let count = 0;
  for (let w = width, h = height; count < SCALES && w >= 8 && h >= 8; count++) {
    w = (w + 1) >> 1;
    h = (h + 1) >> 1;
  }
  return count;
}

/**
 * Weights under this are treated as 0 by `ssimulacra2()`. 27 of the 108 published weights are
 * between 0.0001 and 0.0021, against 0.14–225 for the others, and the terms they multiply are norms of
 * maps of order 0.01–1: skipping them moved no score by more than 0.0024 points (8 corpus images —
 * photos, a screenshot, a chart, graphics, icons, one transparent — at 9 to 1024 px, JPEG q40/q85,
 * WebP q60, AVIF q50: 256 pairs; metric.test.ts holds it to 0.005). Skipping them is what makes the
 * full-resolution scale cheaper: at 1:1 (three quarters of the work) every term of X and B is among
 * them, so only Y is converted and blurred there (3 of the distorted side's blurs instead of 5, two
 * cube roots instead of three).
 */
export const NEGLIGIBLE_WEIGHT = 0.0025;

/**
 * Which terms of channel `c` at `scale` carry weight, with `scales` scales computed (the weights are
 * packed over the scales an image has, see the end of `subScores`). About half of the 108 weights are
 * 0 and a quarter negligible (NEGLIGIBLE_WEIGHT) — at full size every term of X and B at 1:1, of B
 * at 1:2 and 1:4 and of every channel at 1:32, X's edge terms at 1:2 — so `ssimulacra2()` skips
 * their conversion and blurs.
 */
export function weighted(
  c: number,
  scale: number,
  scales: number,
  threshold = NEGLIGIBLE_WEIGHT,
): { ssim: boolean; edge: boolean } {
  const base = (c * scales + scale) * 6;
  const w = (i: number) => Math.abs(WEIGHTS[base + i]!) > threshold;
  return { ssim: w(0) || w(3), edge: w(1) || w(2) || w(4) || w(5) };
}

/** The blurred mean of channel `c` of a prepared scale, made on first use. */
function muOf(r: ReferenceScale, c: number, rows?: RowMask): Float32Array {
  let plane = r.mu[c];
  if (!plane) {
    plane = new Float32Array(r.width * r.height);
    blur(r.xyb[c]!, r.width, r.height, new Float32Array(r.width * r.height), plane, rows);
    r.mu[c] = plane;
  }
  return plane;
}

/** The blurred square of channel `c` of a prepared scale, made on first use. */
function sigmaSqOf(r: ReferenceScale, c: number, rows?: RowMask): Float32Array {
  let plane = r.sigmaSq[c];
  if (!plane) {
    const n = r.width * r.height;
    plane = new Float32Array(n);
    const x = r.xyb[c]!;
    blurProduct(x, x, r.width, r.height, new Float32Array(r.width), new Float32Array(n), plane, rows);
    r.sigmaSq[c] = plane;
  }
  return plane;
}

/**
 * The reference tool refuses images under 8 pixels on a side (no scale can be computed, and every
 * sub-score would stay 0: a "perfect" 100 for any difference). Icons, spacers and thin strips do reach
 * the engine, so such images are padded to 8 by repeating their edge pixels: the score then judges
 * the content that is there, with each pixel weighted by how often it was repeated.
 */
export function padToMinimum(img: RgbImage): RgbImage {
  if (img.width >= 8 && img.height >= 8) return img;
  const width = Math.max(8, img.width);
  const height = Math.max(8, img.height);
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    const sy = Math.min(y, img.height - 1);
    for (let x = 0; x < width; x++) {
      const sx = Math.min(x, img.width - 1);
      const from = (sy * img.width + sx) * 3;
      const to = (y * width + x) * 3;
      data[to] = img.data[from]!;
      data[to + 1] = img.data[from + 1]!;
      data[to + 2] = img.data[from + 2]!;
    }
  }
  return { width, height, data };
}

export function prepareReference(reference: RgbImage, sampling?: RowSampling): PreparedReference {
  checkRgb('reference', reference);
  const original = reference;
  reference = padToMinimum(reference);
  const rows: (RowMask | undefined)[] = [];
  let width = reference.width;
  let height = reference.height;
  const tmp = new Float32Array(width * height);
  const row = new Float32Array(width);
  const scales: ReferenceScale[] = [];
  const count = scaleCount(width, height);
  let lin: Linear = linearOf(reference);
  for (let scale = 0; scale < SCALES; scale++) {
    if (width < 8 || height < 8) break;
    if (scale > 0) {
      lin = downsample(lin, width, height);
      width = (width + 1) >> 1;
      height = (height + 1) >> 1;
    }
    const n = width * height;
    const xyb = planes(n);
    const sampled = rowMask(height, sampling);
    rows.push(sampled);
    toXyb(lin, n, xyb, ALL_CHANNELS, sampled, width);
    const mu: (Float32Array | undefined)[] = [undefined, undefined, undefined];
    const sigmaSq: (Float32Array | undefined)[] = [undefined, undefined, undefined];
    for (let c = 0; c < 3; c++) {
      const want = weighted(c, scale, count);
      if (!want.ssim && !want.edge) continue;
      const m = new Float32Array(n);
      blur(xyb[c]!, width, height, tmp, m, sampled);
      mu[c] = m;
      if (want.ssim) {
        const plane = new Float32Array(n);
        blurProduct(xyb[c]!, xyb[c]!, width, height, row, tmp, plane, sampled);
        sigmaSq[c] = plane;
      }
    }
    scales.push({ width, height, xyb, mu, sigmaSq });
  }
  return {
    width: original.width,
    height: original.height,
    scales,
    ...(rows.some((r) => r !== undefined) ? { rows } : {}),
  };
}

/**
 * The ringing and blur sums (1-norm and 4th powers) of one channel, for a channel whose SSIM term
 * has no weight: the same loop as in `subScores` without the SSIM part, in the same order.
 */
function edgeTerms(
  a: Float32Array,
  b: Float32Array,
  mu1: Float32Array,
  width: number,
  height: number,
  tb: Float32Array,
  mu2: Float32Array,
  rows?: RowMask,
): [[number, number], [number, number]] {
  for (let y = 0; y < height; y++) if (!rows || rows[y]) blurRowH(b, y * width, width, tb, y * width);
  let art1 = 0;
  let art4 = 0;
  let det1 = 0;
  let det4 = 0;
  for (let y = 0; y < height; y++) {
    if (rows && rows[y] !== KEPT) continue;
    blurColumnRow(tb, width, height, y, mu2, 0);
    const off = y * width;
    for (let x = 0; x < width; x++) {
      const i = off + x;
      const e = (1 + Math.abs(b[i]! - mu2[x]!)) / (1 + Math.abs(a[i]! - mu1[i]!)) - 1;
      if (e > 0) {
        art1 += e;
        const e2 = e * e;
        art4 += e2 * e2;
      } else if (e < 0) {
        det1 -= e;
        const e2 = e * e;
        det4 += e2 * e2;
      }
    }
  }
  return [
    [art1, art4],
    [det1, det4],
  ];
}

/**
 * The 108 sub-scores for one pair, each |norm| in the order the weights expect: channel (X, Y, B) →
 * computed scale → norm (1, 4) → map (SSIM, ringing, blur), packed over the scales the image has and
 * zero after them (see the end of this function). Exposed so tests and tuning can look inside;
 * `ssimulacra2()` is what callers want.
 */
export function subScores(
  reference: RgbImage | PreparedReference,
  distorted: RgbImage,
  /** Only the terms that carry weight (the rest stay 0): what `ssimulacra2()` needs. */
  weightedOnly = false,
): Float64Array {
  const ref = 'scales' in reference ? reference : undefined;
  if (reference.width !== distorted.width || reference.height !== distorted.height) {
    throw new RangeError(
      `SSIMULACRA2 needs images of the same size: reference ${reference.width}×${reference.height}, distorted ${distorted.width}×${distorted.height}`,
    );
  }
  checkRgb('distorted', distorted);
  const prepared = ref ?? prepareReference(reference as RgbImage);
  distorted = padToMinimum(distorted);
  let width = distorted.width;
  let height = distorted.height;
  const n0 = width * height;
  const xyb2 = planes(n0);
  const row = new Float32Array(width);
  const tb = new Float32Array(n0);
  const tbb = new Float32Array(n0);
  const tab = new Float32Array(n0);
  const mu2 = new Float32Array(width);
  const s22 = new Float32Array(width);
  const s12 = new Float32Array(width);
  // [scale][c*2+norm] and [scale][c*4+k], as in the published description.
  const ssim = new Float64Array(SCALES * 6);
  const edge = new Float64Array(SCALES * 12);
  let lin2: Linear = linearOf(distorted);
  const scalesDone = prepared.scales.length;
  for (let scale = 0; scale < scalesDone; scale++) {
    const r = prepared.scales[scale]!;
    if (scale > 0) {
      lin2 = downsample(lin2, width, height);
      width = (width + 1) >> 1;
      height = (height + 1) >> 1;
    }
    const n = width * height;
    const wants = [0, 1, 2].map((c) =>
      weightedOnly ? weighted(c, scale, scalesDone) : { ssim: true, edge: true },
    );
    const rows = prepared.rows?.[scale];
    toXyb(
      lin2,
      n,
      xyb2,
      wants.map((w) => w.ssim || w.edge),
      rows,
      width,
    );
    let kept = n;
    if (rows) {
      kept = 0;
      for (let y = 0; y < height; y++) if (rows[y] === KEPT) kept += width;
    }
    const inv = 1 / kept;
    for (let c = 0; c < 3; c++) {
      const want = wants[c]!;
      if (!want.ssim && !want.edge) continue;
      const a = r.xyb[c]!;
      const b = xyb2[c]!;
      const mu1 = muOf(r, c, rows);
      if (!want.ssim) {
        // Edge terms only: they need the distorted plane's blurred mean, nothing else.
        const [art, det] = edgeTerms(a, b, mu1, width, height, tb, mu2, rows);
        edge[scale * 12 + c * 4] = art[0] * inv;
        edge[scale * 12 + c * 4 + 1] = Math.sqrt(Math.sqrt(art[1] * inv));
        edge[scale * 12 + c * 4 + 2] = det[0] * inv;
        edge[scale * 12 + c * 4 + 3] = Math.sqrt(Math.sqrt(det[1] * inv));
        continue;
      }
      const s11 = sigmaSqOf(r, c, rows);
      // Horizontal passes of the three planes first, then row by row the vertical pass into
      // one-row buffers and the sums straight after: the blurred planes are never stored whole.
      for (let y = 0; y < height; y++) {
        if (rows && !rows[y]) continue;
        const off = y * width;
        blurRowH(b, off, width, tb, off);
        for (let x = 0; x < width; x++) row[x] = b[off + x]! * b[off + x]!;
        blurRowH(row, 0, width, tbb, off);
        for (let x = 0; x < width; x++) row[x] = a[off + x]! * b[off + x]!;
        blurRowH(row, 0, width, tab, off);
      }
      let ssim1 = 0;
      let ssim4 = 0;
      let art1 = 0;
      let art4 = 0;
      let det1 = 0;
      let det4 = 0;
      for (let y = 0; y < height; y++) {
        if (rows && rows[y] !== KEPT) continue;
        blurColumnRow(tb, width, height, y, mu2, 0);
        blurColumnRow(tbb, width, height, y, s22, 0);
        blurColumnRow(tab, width, height, y, s12, 0);
        const off = y * width;
        for (let x = 0; x < width; x++) {
          const i = off + x;
          const m1 = mu1[i]!;
          const m2 = mu2[x]!;
          const dm = m1 - m2;
          const numM = 1 - dm * dm;
          const numS = 2 * (s12[x]! - m1 * m2) + C2;
          const denS = s11[i]! - m1 * m1 + (s22[x]! - m2 * m2) + C2;
          let d = 1 - (numM * numS) / denS;
          if (d > 0) {
            ssim1 += d;
            d *= d;
            ssim4 += d * d;
          }
          const e = (1 + Math.abs(b[i]! - m2)) / (1 + Math.abs(a[i]! - m1)) - 1;
          if (e > 0) {
            art1 += e;
            const e2 = e * e;
            art4 += e2 * e2;
          } else if (e < 0) {
            det1 -= e;
            const e2 = e * e;
            det4 += e2 * e2;
          }
        }
      }
      ssim[scale * 6 + c * 2] = ssim1 * inv;
      ssim[scale * 6 + c * 2 + 1] = Math.sqrt(Math.sqrt(ssim4 * inv));
      edge[scale * 12 + c * 4] = art1 * inv;
      edge[scale * 12 + c * 4 + 1] = Math.sqrt(Math.sqrt(art4 * inv));
      edge[scale * 12 + c * 4 + 2] = det1 * inv;
      edge[scale * 12 + c * 4 + 3] = Math.sqrt(Math.sqrt(det4 * inv));
    }
  }
  return packSubScores(ssim, edge, scalesDone);
}

/**
 * The 108 sub-scores from the per-scale norms (`ssim`: [scale][c*2+norm], `edge`: [scale][c*4+k]).
 * The reference tool walks the weights with one running index over the scales it computed: an
 * image with fewer than six scales (short side under 113 px) takes the first 6 × scales weights for
 * X, the next ones for Y, then B — not the weights of "its" scales. That order is what the published
 * scores (and the reference tool on small images) mean, so the sub-scores are packed the same way
 * and the tail left 0. Zero-filling the missing scales instead (this file before) scored a 70×46
 * WebP 75 where the reference says 18.
 */
export function packSubScores(ssim: Float64Array, edge: Float64Array, scalesDone: number): Float64Array {
  const out = new Float64Array(108);
  let i = 0;
  for (let c = 0; c < 3; c++) {
    for (let scale = 0; scale < scalesDone; scale++) {
      for (let norm = 0; norm < 2; norm++) {
        out[i++] = Math.abs(ssim[scale * 6 + c * 2 + norm]!);
        out[i++] = Math.abs(edge[scale * 12 + c * 4 + norm]!);
        out[i++] = Math.abs(edge[scale * 12 + c * 4 + norm + 2]!);
      }
    }
  }
  return out;
}

/** The weighted sum mapped onto the published scale (100 = identical). */
export function scoreFromSubScores(sub: Float64Array): number {
  let x = 0;
  for (let i = 0; i < 108; i++) x += WEIGHTS[i]! * sub[i]!;
  x *= 0.9562382616834844;
  x = 2.326765642916932 * x - 0.020884521182843837 * x * x + 6.248496625763138e-5 * x * x * x;
  return x > 0 ? 100 - 10 * x ** 0.6276336467831387 : 100;
}

/**
 * SSIMULACRA2 of `distorted` against `reference` (same size, 8-bit sRGB RGB). Synchronous and
 * CPU-heavy (about a second for a 3-megapixel pair): servers should call `scoreAsync`.
 */
export function ssimulacra2(reference: RgbImage | PreparedReference, distorted: RgbImage): number {
  return scoreFromSubScores(subScores(reference, distorted, true));
}
