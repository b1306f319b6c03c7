import type { Sharp } from 'sharp';

/**
 * Cheap facts about an image, measured on a copy no larger than FEATURE_SIDE px (nearest-neighbour,
 * so flat areas and exact colours survive the downscale). 2–6 ms of work, 1–5 of them the downscale
 * (2026-12-01, a 256-px icon and a 1689 × 1800 logo, measured as raw pixels in memory): quality
 * "auto" uses them to pick encoder settings before it spends a single full-size score.
 */
export interface ImageFeatures {
  /** Share of horizontally and vertically adjacent pixel pairs that are exactly equal (0–1). */
  flatShare: number;
  /** Distinct RGB colours in the copy (counted up to COLOUR_CAP). */
  colours: number;
  /** Share of adjacent pairs whose luma differs by more than 32 of 255: hard edges, text. */
  edgeShare: number;
  /** Share of adjacent pairs whose chroma (|Cb|+|Cr| change) differs by more than 24: coloured edges. */
  chromaEdgeShare: number;
  /** Mean absolute luma difference of adjacent pairs (0–255): texture and noise, what costs bytes. */
  meanGradient: number;
}

export const FEATURE_SIDE = 256;
const COLOUR_CAP = 65_536;

/**
 * Screenshots, charts, logos and text: large exactly-flat regions or a small palette. Measured on the
 * corpus at ≤ 2048 px (test/bench/results/auto-calibration.json → features): every photo has
 * flatShare ≤ 0.21 (a rocket on a clear sky) and ≥ 6 800 colours in the copy; the screenshots,
 * charts and graphics have flatShare ≥ 0.45 or < 2 000 colours, except a screenshot that is mostly a
 * photo (curves-lighten-2: 0.17, 13 000 colours), which is treated as one — the floor search still
 * moves it to 4:4:4 when 4:2:0 cannot reach the floor.
 */
export function isSynthetic(f: ImageFeatures): boolean {
  return f.flatShare >= 0.3 || f.colours < 4_000;
}

/**
 * The working memory of `measureFeatures`, allocated once per process (3 MiB) and reused: a distinct
 * colour bitset over all 2^24 RGB values (a Set of up to 65 536 numbers was most of the function's
 * 10–30 ms, 2026-11-27), the words of it a call set (to clear them after), and luma and the two
 * colour differences of the copy's pixels. Allocated fresh on every call until 2026-12-01, they cost
 * 6–10 ms of page faults on the 2-core VM, on a 256-px icon more than its JPEG encode; the pixel
 * loops themselves take about a millisecond. The loops run without an await, so calls never share it
 * at once.
 */
const scratch = {
  seen: new Uint32Array(1 << 19),
  touched: new Uint32Array(COLOUR_CAP),
  Y: new Int32Array(FEATURE_SIDE * FEATURE_SIDE),
  CB: new Int32Array(FEATURE_SIDE * FEATURE_SIDE),
  CR: new Int32Array(FEATURE_SIDE * FEATURE_SIDE),
};

export async function measureFeatures(pipeline: Sharp): Promise<ImageFeatures> {
  const { data, info } = await pipeline
    .resize(FEATURE_SIDE, FEATURE_SIDE, { fit: 'inside', withoutEnlargement: true, kernel: 'nearest' })
    .flatten({ background: { r: 128, g: 128, b: 128 } })
    .toColourspace('srgb')
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  const { width, height, channels } = info;
  const seen = scratch.seen;
  const touched = scratch.touched;
  let colours = 0;
  let pairs = 0;
  let flat = 0;
  let edges = 0;
  let chromaEdges = 0;
  let gradient = 0;
  // Luma and the two colour differences in units of 1/1000, from integer weights (0.299, 0.587, 0.114).
  const n = width * height;
  const { Y, CB, CR } = scratch;
  for (let p = 0, i = 0; p < n; p++, i += channels) {
    const r = data[i]!;
    const g = data[i + 1]!;
    const b = data[i + 2]!;
    const y = 299 * r + 587 * g + 114 * b;
    Y[p] = y;
    CB[p] = 1000 * b - y;
    CR[p] = 1000 * r - y;
    if (colours < COLOUR_CAP) {
      const rgb = (r << 16) | (g << 8) | b;
      const word = rgb >>> 5;
      const bit = 1 << (rgb & 31);
      if ((seen[word]! & bit) === 0) {
        seen[word] = seen[word]! | bit;
        touched[colours] = word;
        colours++;
      }
    }
  }
  const compare = (a: number, b: number) => {
    pairs++;
    const dl = Math.abs(Y[a]! - Y[b]!);
    const dc = Math.abs(CB[a]! - CB[b]!) + Math.abs(CR[a]! - CR[b]!);
    if (dl === 0 && dc === 0) {
      // Equal luma and colour differences: the same RGB.
      flat++;
      return;
    }
    gradient += dl;
    if (dl > 32_000) edges++;
    if (dc > 24_000) chromaEdges++;
  };
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const p = y * width + x;
      if (x + 1 < width) compare(p, p + 1);
      if (y + 1 < height) compare(p, p + width);
    }
  }
  // Left clear for the next call: only the words this one set.
  for (let i = 0; i < colours; i++) seen[touched[i]!] = 0;
  gradient /= 1000;
  const share = (n: number) => (pairs ? n / pairs : 0);
  return {
    flatShare: share(flat),
    colours,
    edgeShare: share(edges),
    chromaEdgeShare: share(chromaEdges),
    meanGradient: share(gradient),
  };
}
