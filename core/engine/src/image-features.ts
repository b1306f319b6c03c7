import type { Sharp } from 'sharp';

/**
 * Cheap facts about an image, measured on a copy no larger than FEATURE_SIDE px (nearest-neighbour,
 * so flat areas and exact colours survive the downscale). About a millisecond of work: quality
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

export async function measureFeatures(pipeline: Sharp): Promise<ImageFeatures> {
  const { data, info } = await pipeline
    .resize(FEATURE_SIDE, FEATURE_SIDE, { fit: 'inside', withoutEnlargement: true, kernel: 'nearest' })
    .flatten({ background: { r: 128, g: 128, b: 128 } })
    .toColourspace('srgb')
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  const { width, height, channels } = info;
  const seen = new Set<number>();
  let pairs = 0;
  let flat = 0;
  let edges = 0;
  let chromaEdges = 0;
  let gradient = 0;
  const luma = (i: number) => 0.299 * data[i]! + 0.587 * data[i + 1]! + 0.114 * data[i + 2]!;
  const cb = (i: number) => data[i + 2]! - luma(i);
  const cr = (i: number) => data[i]! - luma(i);
  const compare = (a: number, b: number) => {
    pairs++;
    if (data[a] === data[b] && data[a + 1] === data[b + 1] && data[a + 2] === data[b + 2]) {
      flat++;
      return;
    }
    const dl = Math.abs(luma(a) - luma(b));
    gradient += dl;
    if (dl > 32) edges++;
    if (Math.abs(cb(a) - cb(b)) + Math.abs(cr(a) - cr(b)) > 24) chromaEdges++;
  };
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * channels;
      if (seen.size < COLOUR_CAP) seen.add((data[i]! << 16) | (data[i + 1]! << 8) | data[i + 2]!);
      if (x + 1 < width) compare(i, i + channels);
      if (y + 1 < height) compare(i, i + width * channels);
    }
  }
  const share = (n: number) => (pairs ? n / pairs : 0);
  return {
    flatShare: share(flat),
    colours: seen.size,
    edgeShare: share(edges),
    chromaEdgeShare: share(chromaEdges),
    meanGradient: share(gradient),
  };
}
