/**
 * Can a mosaic of a photo's tiles stand in for the photo in quality "auto"'s search? (Issue 11: a
 * trial encode scored at reduced cost, then one full-size score.) Tried on 2026-11-27 and not
 * adopted; this script is the record (results/auto-mosaic*.json, core/engine/README.quality.md
 * "Mosaic search").
 *
 * Per corpus image (resized to fit --max-dimension, 2048 by default) and format, with the settings
 * auto uses for it (4:2:0 for photos, 4:4:4 for graphics; WebP lossy):
 * - qFull: the smallest Compresso quality whose full-size score reaches the format's target
 *   (bisection over 30–98, scored as auto scores: row-sampled for photos of 320 rows or more);
 * - qMosaic: the same on the image's mosaic (exact scores);
 * - fullAtMosaic: the full-size score at qMosaic, and `under`, how far under the target that is —
 *   the offset a mosaic search would have to add to its goal. The median per format is printed.
 * Images too small to tile are listed without a mosaic.
 *
 * Usage: node test/bench/auto-mosaic.ts [--kinds photo,...] [--formats jpeg,...] [--max-dimension N]
 *        [--out FILE]
 * Writes results/auto-mosaic.json.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { AUTO_SETTINGS, applyEncoder, isSynthetic, measureFeatures } from '@compresso/engine';
import sharp from 'sharp';
import { decodeToRgb } from '../../core/engine/src/metric/index.ts';
import {
  AUTO_ROW_SAMPLING,
  type PreparedReference,
  prepareReference,
  type RgbImage,
  ssimulacra2,
} from '../../core/engine/src/metric/ssimulacra2.ts';
import { DEFAULT_CORPUS, type Kind, loadCorpus } from './corpus.ts';
import { median } from './measure.ts';

/**
 * A mosaic of tiles cut from an image at full resolution: quality "auto" searches for a photo's
 * quality on it before it spends one full-size encode and score (issue 11). Compression artefacts
 * are local (JPEG and WebP code 16-px blocks, AVIF larger ones, each from the pixels around it), so
 * a tile encodes much as the same pixels do inside the whole image, and the mosaic's SSIMULACRA2
 * follows the image's as the quality changes, at the cost of the mosaic's area. What it does not
 * keep is the level: tiles lose the image's coarsest structure, so a mosaic scores a little higher
 * or lower than the whole at one quality, by an amount that depends on the format, not much on the
 * photo. That offset is calibrated per format (MOSAIC_OFFSET, measured by test/bench/auto-mosaic.ts)
 * and the quality the mosaic finds is checked by a full-size score, which decides.
 *
 * The tiles sample the image evenly: the image is divided into a grid of about as many cells as
 * tiles, and each tile is the middle of its cell, aligned to 16 px (a JPEG or WebP block of the
 * image is a block of the tile). They are laid out in the same grid, so the mosaic keeps the image's
 * aspect ratio.
 */
interface MosaicOptions {
  /** Tile side in pixels, a multiple of 16. */
  tile: number;
  /** The share of the image's area the mosaic aims at. */
  fraction: number;
  /** Fewer tiles than this do not sample an image well: no mosaic. */
  minTiles: number;
  /**
   * A mosaic larger than this share of the image's area saves too little over scoring the image
   * itself (small images): no mosaic.
   */
  maxFraction: number;
}

/** The smallest side on which SSIMULACRA2 computes all six scales (the coarsest is then 8 px). */
const MIN_SIDE = 256;

const MOSAIC: MosaicOptions = { tile: 128, fraction: 1 / 8, minTiles: 8, maxFraction: 0.2 };

/** The mosaic of `image` (RGB; transparent images are not tiled), or undefined when it would not pay. */
function buildMosaic(image: RgbImage, options: MosaicOptions = MOSAIC): RgbImage | undefined {
  if (image.rgba) return undefined;
  const { width, height, data } = image;
  const { tile } = options;
  const wanted = Math.max(options.minTiles, Math.round((options.fraction * width * height) / (tile * tile)));
  // At least MIN_SIDE px each way, so the metric computes all six of its scales on the mosaic (with
  // fewer it weighs its terms differently, see ssimulacra2.ts subScores).
  const least = Math.ceil(MIN_SIDE / tile);
  const columns = Math.max(least, Math.round(Math.sqrt((wanted * width) / height)));
  const rows = Math.max(least, Math.ceil(wanted / columns));
  const cellWidth = Math.floor(width / columns);
  const cellHeight = Math.floor(height / rows);
  if (cellWidth < tile || cellHeight < tile) return undefined;
  const mosaicWidth = columns * tile;
  const mosaicHeight = rows * tile;
  if (mosaicWidth * mosaicHeight > options.maxFraction * width * height) return undefined;
  const out = new Uint8Array(mosaicWidth * mosaicHeight * 3);
  const rowBytes = tile * 3;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < columns; c++) {
      // The middle of the cell, moved back onto the 16-px grid (it stays inside the cell).
      const x0 = Math.floor((c * cellWidth + (cellWidth - tile) / 2) / 16) * 16;
      const y0 = Math.floor((r * cellHeight + (cellHeight - tile) / 2) / 16) * 16;
      for (let y = 0; y < tile; y++) {
        const from = ((y0 + y) * width + x0) * 3;
        out.set(data.subarray(from, from + rowBytes), ((r * tile + y) * mosaicWidth + c * tile) * 3);
      }
    }
  }
  return { width: mosaicWidth, height: mosaicHeight, data: out };
}

const HERE = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    kinds: { type: 'string' },
    formats: { type: 'string' },
    'max-dimension': { type: 'string' },
    out: { type: 'string' },
  },
});
const maxDimension = Number(values['max-dimension'] ?? 2048);
const kinds = (values.kinds?.split(',') ?? ['photo']) as Kind[];
const formats = (values.formats?.split(',') ?? ['jpeg']) as ('jpeg' | 'webp' | 'avif')[];
const out = values.out ?? join(HERE, 'results', 'auto-mosaic.json');

const images = (await loadCorpus(DEFAULT_CORPUS)).filter((i) => kinds.includes(i.kind) && !i.heic);
const rows: Record<string, unknown>[] = [];
const started = Date.now();
for (const image of images) {
  const full = await decodeToRgb(
    sharp(image.bytes)
      .autoOrient()
      .resize(maxDimension, maxDimension, { fit: 'inside', withoutEnlargement: true }),
  );
  const { width, height } = full;
  const synthetic = isSynthetic(
    await measureFeatures(sharp(full.data, { raw: { width, height, channels: 3 } })),
  );
  const mosaic = buildMosaic(full);
  const sampled = !synthetic && height >= AUTO_ROW_SAMPLING.minHeight;
  const fullRef = prepareReference(full, sampled ? AUTO_ROW_SAMPLING : undefined);
  const mosaicRef = mosaic ? prepareReference(mosaic) : undefined;
  for (const format of formats) {
    const target = AUTO_SETTINGS[format].target;
    const chromaSubsampling = format === 'webp' ? undefined : synthetic ? '4:4:4' : '4:2:0';
    const scorer = (img: RgbImage, ref: PreparedReference) => {
      const scores = new Map<number, number>();
      return async (q: number) => {
        let s = scores.get(q);
        if (s === undefined) {
          const pixels = sharp(img.data, { raw: { width: img.width, height: img.height, channels: 3 } });
          const bytes = await applyEncoder(pixels, {
            format,
            quality: q,
            ...(chromaSubsampling ? { chromaSubsampling } : {}),
          }).toBuffer();
          s = ssimulacra2(ref, await decodeToRgb(bytes));
          scores.set(q, s);
        }
        return s;
      };
    };
    /** The smallest q reaching the target, assuming scores rise with q (99: none up to 98). */
    const smallestReaching = async (score: (q: number) => Promise<number>) => {
      let lo = 30;
      let hi = 98;
      if ((await score(hi)) < target) return 99;
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if ((await score(mid)) >= target) hi = mid;
        else lo = mid;
      }
      return hi;
    };
    const fullScore = scorer(full, fullRef);
    const qFull = await smallestReaching(fullScore);
    const row: Record<string, unknown> = { name: image.name, kind: image.kind, format, width, height, qFull };
    if (mosaic && mosaicRef) {
      const qMosaic = await smallestReaching(scorer(mosaic, mosaicRef));
      const fullAtMosaic = qMosaic <= 98 ? await fullScore(qMosaic) : Number.NaN;
      Object.assign(row, {
        mosaic: `${mosaic.width}×${mosaic.height}`,
        qMosaic,
        fullAtMosaic: Math.round(fullAtMosaic * 100) / 100,
        under: Math.round((target - fullAtMosaic) * 100) / 100,
      });
    }
    rows.push(row);
    process.stderr.write(`${JSON.stringify(row)}\n`);
  }
}
const offsets = Object.fromEntries(
  formats.map((format) => [
    format,
    median(
      rows
        .filter((r) => r.format === format && r.kind === 'photo' && typeof r.under === 'number')
        .map((r) => r.under as number)
        .filter((u) => Number.isFinite(u)),
    ),
  ]),
);
writeFileSync(
  out,
  `${JSON.stringify({ date: new Date().toISOString(), maxDimension, mosaic: MOSAIC, seconds: Math.round((Date.now() - started) / 1000), offsets, rows }, null, 2)}\n`,
);
process.stderr.write(
  `median offsets (target − full score at the mosaic's quality): ${JSON.stringify(offsets)}\n`,
);
