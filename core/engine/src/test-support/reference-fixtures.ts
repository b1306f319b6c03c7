import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import sharp from 'sharp';

/**
 * Image pairs with the score the reference SSIMULACRA2 tool gave them, recorded by
 * test/bench/metric-check.ts --write, checked by metric/reference-agreement.test.ts without the tool.
 */
export const FIXTURE_DIR = resolve(import.meta.dirname, '../metric/fixtures/reference-agreement');
export const MANIFEST_PATH = join(FIXTURE_DIR, 'reference-scores.json');

export type DistortionFormat = 'jpeg' | 'webp' | 'avif';

export interface Pair {
  kind: string;
  width: number;
  height: number;
  /** Scored over dark and light grey, the worse counts (engine and reference tool alike). */
  transparent: boolean;
  format: DistortionFormat;
  /** Small pairs: files in FIXTURE_DIR. */
  reference?: string;
  distorted?: string;
  /**
   * Large pairs, too big to commit: the corpus image resized to fit maxDimension (lossless PNG), and
   * that encoded at `quality` (AVIF at effort 2), through the sharp version the manifest records.
   */
  large?: { corpus: string; maxDimension: number; format: DistortionFormat; quality: number };
  /** What the reference tool printed for the pair. */
  score: number;
}

export interface Manifest {
  /** The tool's own banner (version and SIMD targets). */
  tool: string;
  sharp: string;
  vips: string;
  pairs: Pair[];
}

export function readManifest(): Manifest {
  return JSON.parse(readFileSync(MANIFEST_PATH, 'utf8')) as Manifest;
}

/**
 * Pairs on which the engine and the reference tool differ by more than a point, with why. Each is
 * still checked, against the bound given here, so it cannot drift further unseen.
 */
export const KNOWN_DIVERGENCES: Record<string, { bound: number; why: string }> = {
  'graphic-mate-Arc-Colors-Transparent.png': {
    bound: 6,
    why:
      'a near-flat grey graphic (standard deviation ≈ 2 codes): the reference tool scores such images ' +
      'lower the larger they are (a flat field with ±1-code noise: 98.6 at 64 px, 90.3 at 1024; ours ' +
      '96.6–97.0 from 128 px on), float32 rounding in its recursive blur (reproduced by emulating it); README.quality.md',
  },
};

/** The distortions: real encodes through sharp; AVIF at effort 2 to keep the check fast. */
export function encode(input: Buffer, format: DistortionFormat, quality: number): Promise<Buffer> {
  if (format === 'avif') return sharp(input).avif({ quality, effort: 2 }).toBuffer();
  return sharp(input)[format]({ quality }).toBuffer();
}

/** The two encoded images of a pair, read from the fixtures or made from the corpus. */
export async function pairSources(
  pair: Pair,
  corpusDir: string,
): Promise<{ reference: Buffer; distorted: Buffer }> {
  if (pair.reference && pair.distorted) {
    return {
      reference: readFileSync(join(FIXTURE_DIR, pair.reference)),
      distorted: readFileSync(join(FIXTURE_DIR, pair.distorted)),
    };
  }
  if (!pair.large) throw new Error(`pair ${JSON.stringify(pair)} has neither files nor a corpus source`);
  const { corpus, maxDimension, format, quality } = pair.large;
  // compressionLevel 0: the PNG only carries pixels to the decoder, and 2048-px deflate costs seconds.
  const reference = await sharp(join(corpusDir, corpus))
    .resize(maxDimension, maxDimension, { fit: 'inside', withoutEnlargement: true })
    .png({ compressionLevel: 0 })
    .toBuffer();
  return { reference, distorted: await encode(reference, format, quality) };
}

/** The size band a pair falls in, by its longer side (the README's agreement table). */
export function sizeBand(pair: Pair): string {
  const side = Math.max(pair.width, pair.height);
  const bands = [16, 32, 64, 128, 256, 512, 1024, 2048];
  for (let i = bands.length - 1; i >= 0; i--) {
    if (side >= bands[i]!) return i === bands.length - 1 ? '2048' : `${bands[i]}–${bands[i + 1]! - 1}`;
  }
  return `<16`;
}
