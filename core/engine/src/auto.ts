import type { CompressOptions, OutputFormat } from '@compresso/schema';
import sharp from 'sharp';
import { predictQuality } from './auto-predict.ts';
import { applyEncoder, type ChromaSubsampling } from './encode.ts';
import { type ImageFeatures, isSynthetic, measureFeatures } from './image-features.ts';
import { withTimeLimit } from './limits.ts';
import {
  backgroundsFor,
  decodeReferences,
  prepareReferences,
  type Reference,
  scoreEncoded,
} from './metric/compare.ts';
import { SharedScratch } from './metric/index.ts';
import { AUTO_ROW_SAMPLING, type RgbImage } from './metric/ssimulacra2.ts';
import {
  type AutoEncoder,
  type EncodeVariant,
  encoderInput,
  prepare,
  shareDecodedPixels,
} from './optimize.ts';
import { DEFAULT_SCALE_QUALITY } from './quality.ts';

type Encoded = Awaited<ReturnType<Parameters<AutoEncoder>[3]>>;

/**
 * What quality "auto" aims for, per format: the smallest output whose SSIMULACRA2 reaches `target`,
 * searched over Compresso quality up to `maxQ`.
 *
 * Chosen from the simulation in test/bench/calibrate.ts (auto vs fixed on the 14 calibration photos
 * at 2048 px, 2026-11-22; test/bench/results/calibration.json → autoSimulation). The target sits at
 * the fixed default's mean (Q=80 gives 75.9 in every format) and the cap keeps hard photos (a Hubble
 * deep field, a noisy rocket launch) from buying their last points at 2–3× the bytes: a per-image
 * target spends bytes where they are dearest, so without the cap auto is *larger* than the fixed
 * default at an equal mean score.
 */
export const AUTO_SETTINGS: Readonly<Record<'jpeg' | 'webp' | 'avif', { target: number; maxQ: number }>> = {
  jpeg: { target: 76, maxQ: 90 },
  webp: { target: 75, maxQ: 85 },
  // AVIF aims lower (issue 11, 2026-11-27): measured against the fixed quality a user would have to
  // pick for the same worst case (every photo at the floor: Q 83 in AVIF), a target of 75 saved only
  // 20 % of the bytes, because AVIF's hardest photos are not far behind the others. At 72 (still 2 over
  // the floor, which is unchanged) auto-simulate.ts on the 12 calibration photos gives −29.4 % (73:
  // −24.4 %), mean 72.6, minimum 71.9.
  avif: { target: 72, maxQ: 85 },
};

/** Back-compat view of the targets alone. */
export const AUTO_TARGET: Readonly<Record<'jpeg' | 'webp' | 'avif', number>> = {
  jpeg: AUTO_SETTINGS.jpeg.target,
  webp: AUTO_SETTINGS.webp.target,
  avif: AUTO_SETTINGS.avif.target,
};

/**
 * The floor: no "auto" output scores below 70 ("high quality" on the published scale). When the
 * capped search cannot reach the target and the cap scores under the floor, the search goes on above
 * the cap, then with 4:4:4 chroma (JPEG, AVIF), then lossless (WebP, AVIF), for the smallest output
 * at the floor. JPEG has no lossless mode: its last step is Q 100 at 4:4:4, and only a JPEG that
 * scores under 70 even there is returned under the floor (its `info.score` says so).
 */
export const AUTO_FLOOR = 70;

/**
 * Candidates of photos (not `isSynthetic`) with AUTO_ROW_SAMPLING.minHeight rows or more are scored
 * row-sampled, an estimate at about half the CPU of an exact score (metric/ssimulacra2.ts
 * RowSampling). On the corpus photos its error was at most 0.38 points (72 pairs; screenshots, whose
 * text can sit in a few rows, strayed up to 0.81 and are scored exactly): where the floor decides, the
 * estimate must clear it by this margin.
 */
export const SAMPLED_FLOOR_MARGIN = 0.5;

/**
 * Synthetic images with fewer coloured edges than this (share of neighbour pairs, image-features.ts)
 * are written as 4:2:0 JPEG and AVIF first. On the corpus the graphics without coloured text or
 * lines (the Debian logo, the flat-colour Arc graphic, black text on white, the two MATE
 * illustrations) measure under 0.005, the ones with them (the scikit-image logo, charts, the curve
 * screenshots) 0.02 and more. AVIF took 4:4:4 for every synthetic image until 2026-11-27: the 15
 * synthetic corpus images at 2048 px in AVIF auto then wrote 1 072 795 bytes, with this test 685 640
 * (−36 %; the Gulp illustration 623 674 → 242 279 at the same score, 73.0; the Debian logo −16 %;
 * the rest unchanged or within 0.3 %), every one still in the acceptance band of its target.
 */
const CHROMA_EDGE_SHARE = 0.01;

/**
 * JPEG asks for more before it gives up 4:2:0 (2026-11-28): its 4:4:4 costs more than AVIF's, so
 * only a synthetic image this dense in coloured edges, or an output whose shorter side is at most
 * JPEG_FULL_CHROMA_SIDE (where each 4:2:0 chroma sample smears a larger share of the picture), is
 * written 4:4:4 first. Measured with auto itself, 4:2:0 against 4:4:4 on the synthetic corpus fitted
 * into 2048, 1024, 512 and 256 px, the three corpus images between the thresholds: the
 * scikit-image logo (0.052) and the sharp alpha-paper fixture (0.024) wrote 18.6 % and 18.1 % fewer
 * bytes at 4:2:0 at their own size (500 × 500, 2048 × 1536; the same scores within 0.7), and
 * alpha-paper 8.9 % fewer at 1024 × 768, but 2.7 % and 5.4 % more at 512 × 384 and 256 × 192, as
 * the red folder icon (0.030, 256 × 256) did, 9.4 %.
 * With both rules, of the 46 synthetic cases only those three large ones change, and JPEG auto writes
 * 1.2 % fewer bytes over all 46 (1 937 448 → 1 913 356); the scikit-image logo at 256 px, 3.1 %
 * smaller at 4:2:0, is the one case the side rule keeps at the dearer setting. Over 0.06 no single
 * number separates them: the chart and the GIMP multi-window screenshot (0.079, 0.077) are about
 * 20 % smaller at 4:4:4 (auto-calibration-synthetic.json → curves), the GIMP single-window one
 * (0.155) 5–11 % smaller at 4:2:0 at 512–2048 px (results/auto-sizes-jpeg-second-opinion.jsonl);
 * they all stay at 4:4:4. AVIF measured the logo and alpha-paper within 1 % either way and the
 * folder icon 54 % smaller at 4:4:4, and keeps CHROMA_EDGE_SHARE.
 */
const JPEG_CHROMA_EDGE_SHARE = 0.06;
const JPEG_FULL_CHROMA_SIDE = 400;

/** Whether auto writes a synthetic image's JPEG or AVIF at 4:4:4 from the start (before the floor chain). */
export function fullChromaFirst(
  format: 'jpeg' | 'avif',
  features: ImageFeatures,
  width: number,
  height: number,
): boolean {
  if (features.chromaEdgeShare < CHROMA_EDGE_SHARE) return false;
  if (format === 'avif') return true;
  return (
    features.chromaEdgeShare >= JPEG_CHROMA_EDGE_SHARE || Math.min(width, height) <= JPEG_FULL_CHROMA_SIDE
  );
}

/**
 * WebP lossless for a synthetic image is encoded only when it can be the smaller output: an estimate
 * of its size (LOSSLESS_SAMPLE: the image's rows in bands of 32, one band of every 4, encoded
 * lossless at effort 1 and scaled by the rows left out) must be at most this many times the lossy
 * answer's bytes. A full lossless encode costs 4–5 lossy ones on a screenshot (issue 11: it was most
 * of what made screenshot WebP the dearest auto). Measured against the true size of the lossless
 * encode auto keeps (effort 4) on the 15 synthetic corpus images fitted into 2048, 1024, 512 and 256
 * px (2026-11-27, 60 cases from 92 to 1 800 rows): the estimate was 0.68–1.30× the true size
 * (0.79–1.23× at 2048 px). It costs about a twentieth of the lossless encode; images of every height
 * are estimated since then (before, under 256 rows the lossless encode itself was made: 2.5 fixed
 * encodes' worth on a 448 × 172 text graphic whose lossless was 5.6× its lossy answer).
 *
 * 1.1, not 1.3 (2026-11-28): the estimate mostly runs over the true size (effort 1 writes more
 * than effort 4): 1.02–1.07× on the four images at their own size of 1 000 px or more whose estimate
 * came within 1.3× of the lossy answer. Of the 32 distinct synthetic cases (same sizes) that reached
 * the estimate, 1.3 encoded lossless on 9, and it was smaller on 1 (the Gulp illustration at
 * 1920 × 1200: estimate 0.83×, true 0.79× the lossy answer); the 8 it lost were 1.02–1.58× the
 * lossy answer, and 1.1 skips 6 of them (the two GIMP window screenshots at their own size:
 * estimate 1.16× and 1.21×, true 1.14× and 1.19×; 1.3 and 1.6 fixed encodes each). What 1.1 can
 * miss is a lossless output whose estimate ran over by more than 10 %: with the largest overrun
 * measured (1.28×), one at most 0.86× the lossy answer. No measured case was missed.
 */
export const LOSSLESS_TRY_RATIO = 1.1;
const LOSSLESS_SAMPLE = { band: 32, every: 4, effort: 1 };

/**
 * A first WebP probe this many points under the target on a synthetic image goes straight to
 * lossless: lossy WebP is 4:2:0 only, and an image that scores this low at the predicted quality has
 * colour detail that 4:2:0 destroys at any quality (the companding-curves screenshot: 41.9–46.8 from
 * Q 56 to 94). The lossy search up to the cap only added encodes before the floor chain reached
 * lossless anyway.
 */
const FAR_BELOW = 20;

/** The estimated lossless WebP size of `image` (see LOSSLESS_TRY_RATIO). */
async function estimateLosslessWebp(image: RgbImage): Promise<number> {
  const channels = image.rgba ? 4 : 3;
  const pixels = image.rgba ?? image.data;
  const stride = image.width * channels;
  const rows: number[] = [];
  for (let y = 0; y < image.height; y++)
    if (Math.floor(y / LOSSLESS_SAMPLE.band) % LOSSLESS_SAMPLE.every === 0) rows.push(y);
  const sample = Buffer.alloc(rows.length * stride);
  rows.forEach((y, i) => {
    sample.set(pixels.subarray(y * stride, (y + 1) * stride), i * stride);
  });
  const encoded = await sharp(sample, { raw: { width: image.width, height: rows.length, channels } })
    .webp({ lossless: true, effort: LOSSLESS_SAMPLE.effort })
    .toBuffer();
  return (encoded.length * image.height) / rows.length;
}

/** The search range on Compresso's scale. */
export const AUTO_MIN_Q = 30;
export const AUTO_MAX_Q = 98;

/**
 * The search for the target stops at the first candidate scoring within [target − AUTO_BELOW,
 * target + AUTO_TOLERANCE]: a band of 2.5 points, about four Compresso quality steps near the target
 * (≈ 0.6 points and 1.5–2.5 % of the bytes a step). Replayed on the calibration curves (12 photos ×
 * 3 formats, test/bench/auto-simulate.ts), this band instead of [target, target +
 * 0.8] takes 2.08 / 1.58 / 2.0 scored encodes a photo instead of 2.67 / 2.17 / 2.42 (JPEG / WebP /
 * AVIF) at the same bytes (−0.2 to +0.3 %) and mean scores within 0.3. The floor is not banded: an
 * output under AUTO_FLOOR is never accepted this way.
 */
export const AUTO_TOLERANCE = 1.5;
/** How far under the target a candidate may score and still end the search (see AUTO_TOLERANCE). */
export const AUTO_BELOW = 1;

/**
 * A first probe this many points over the target goes straight to AUTO_MIN_Q. Such an image
 * (a logo, flat colours, a soft illustration) has a flat curve: on the synthetic corpus curves the
 * Arc graphic scores 98.3 in JPEG from Q 56 to 94, the Debian logo 88–94 in WebP and the Gulp
 * illustration 87–92 in JPEG, so a jump by the photo slope (0.6 a step) landed on a quality that
 * still passed by far and took a third probe to reach the bottom. Where the bottom fails, it brackets
 * the target with the first probe and the secant search goes on from there.
 */
const FAR_ABOVE = 10;

/**
 * Large flat graphics in JPEG and WebP start at AUTO_MIN_Q when a copy at half the size, encoded
 * there with the same settings and scored exactly, clears the target by `margin`: logos and flat
 * illustrations score far above the target at any quality (the Arc graphic 97.9 in WebP from Q 30 to
 * 70), and their first probe at the predicted quality only led to FAR_ABOVE's jump to Q 30, one
 * full-size encode and score too many (a 3-megapixel logo in WebP: 1.0–1.3 s each). The copy costs
 * about a quarter of that. Measured on the corpus at 2048 px (2026-11-28), half size against full
 * size at Q 30: the four flat graphics (Arc, the Debian logo, sharp's alpha-paper fixture, Gulp)
 * scored 81.4–93.5 against 84.8–97.9 in WebP, and Arc and Gulp 93.9 and 90.1 against 91.0 and 88.8
 * in JPEG: with a margin of 4 every one that starts at Q 30 passes there in full, and the others
 * (the Debian logo and alpha-paper in JPEG, 4:2:0 and 4:4:4: 56.1 and 62.4) do not start there. Only images of a
 * megapixel or more (where the saved encode is dear) with a mean gradient under `maxGradient` are
 * checked (the flat graphics measure 0.8–3.9; screenshots and charts 8.7–20.7), since the check is
 * wasted where it fails. Not AVIF: at Q 30 it passed on the Debian logo alone, and a half-size AVIF
 * encode costs 0.3–0.9 s, more than that one hit saved over the corpus. In JPEG only with at most
 * `jpegMaxColours` colours (on the features' 256-px copy): JPEG at Q 30 draws a smooth gradient in
 * blocks, so flat graphics with many colours failed there (the Debian logo's gradients, 5 957 colours,
 * and alpha-paper, 487: the 56.1 and 62.4 above), and on the Debian logo the wasted check cost 0.7 of
 * a fixed encode (2026-11-28); the two that passed have 1 and 46 (Arc, Gulp). The full-size score
 * still decides; a miss costs probes, never quality.
 */
export const FLAT_CHECK = { minPixels: 1_000_000, maxGradient: 6, margin: 4, jpegMaxColours: 256 } as const;

/** Whether auto checks a half-size copy at AUTO_MIN_Q before its first probe (FLAT_CHECK). */
export function flatCheckApplies(
  format: 'jpeg' | 'webp' | 'avif',
  features: ImageFeatures,
  width: number,
  height: number,
): boolean {
  return (
    format !== 'avif' &&
    isSynthetic(features) &&
    width * height >= FLAT_CHECK.minPixels &&
    features.meanGradient < FLAT_CHECK.maxGradient &&
    (format !== 'jpeg' || features.colours <= FLAT_CHECK.jpegMaxColours)
  );
}

/**
 * SSIMULACRA2 of a half-size copy of the encoder's input, encoded at AUTO_MIN_Q with `variant`,
 * against the same copy: exact, over the references' backgrounds.
 */
async function halfSizeScore(
  references: Reference[],
  format: 'jpeg' | 'webp' | 'avif',
  variant: EncodeVariant,
  timeoutSeconds: number,
): Promise<number> {
  const { width, height, data, rgba } = references[0]!.image;
  // What the encoder reads: RGBA into WebP and AVIF, the RGB on white (the JPEG reference) into JPEG.
  const channels = rgba && format !== 'jpeg' ? 4 : 3;
  const half = await sharp(channels === 4 ? rgba! : data, { raw: { width, height, channels } })
    .resize(Math.max(1, Math.round(width / 2)), Math.max(1, Math.round(height / 2)))
    .raw()
    .toBuffer({ resolveWithObject: true });
  const raw = { raw: { width: half.info.width, height: half.info.height, channels: half.info.channels } };
  const halfReferences = await decodeReferences(
    () => sharp(half.data, raw),
    references.map((r) => r.background),
  );
  const encoded = await withTimeLimit(
    applyEncoder(sharp(half.data, raw), { format, quality: AUTO_MIN_Q, ...variant }).toBuffer(),
    timeoutSeconds,
  );
  return scoreEncoded(halfReferences, encoded);
}

/**
 * With the target bracketed and the secant pointing one quality step under the passing candidate,
 * the search stops there unless a step saves at least this share of the bytes (as measured between
 * the bracket's two candidates). Near the target a step is worth 1.5–2.5 % on most photos, but an
 * icon's WebP grew 18 % from Q 83 to Q 85 and a photo's AVIF 6 % from Q 73 to Q 74 (2026-11-27):
 * there the extra encode pays.
 */
const MIN_STEP_SAVING = 0.03;

/** The mean share of bytes one quality step adds between a failing and a passing candidate. */
function stepSaving(pass: Trial, fail: Trial): number {
  return (pass.encoded.data.length / fail.encoded.data.length) ** (1 / (pass.q - fail.q)) - 1;
}

/** Encodes scored at most per goal (target, then floor) before the best passing one is taken. */
const MAX_STEPS = 4;

/**
 * Score points per Compresso quality step near the target, from the calibration's mean mozjpeg curve
 * (72.7 at Q75, 75.9 at Q80, 78.9 at Q85: 0.62 per step); used for the first jump, before the image's
 * own slope is known.
 */
const DEFAULT_SLOPE = 0.6;

/**
 * Images whose shorter side is under this are "small". Measured with the reference SSIMULACRA2 tool
 * on photos, a logo and a screenshot at 16–256 px (test/bench/results/auto-calibration.json → small,
 * written by test/bench/auto-calibrate.ts): fixed Q80 at 4:2:0 scored −30 to 58 on shorter sides of
 * 30–110 px, and lossy WebP (4:2:0 only) never reached 70 there at any quality; from 117 px up
 * (176×117, 128×128, 256×133) the usual settings behave as on large images. Small outputs therefore
 * start at 4:4:4 (JPEG, AVIF) from SMALL_START_Q, and WebP is written near-lossless
 * (NEAR_LOSSLESS_LEVEL; 81.5–100 by the reference tool). The engine's metric agrees with the reference
 * tool on these sizes since the small-image metric fix (issue 11; the JSON's engineScore column was
 * measured before it), so the search and the floor chain are trusted here as on large images.
 */
export const SMALL_IMAGE_SIDE = 117;
/** JPEG 4:4:4 scored 69–78 at Q95 and 86–98 at Q100 on 70-px photos (reference tool): start high. */
const SMALL_START_Q = 95;

/**
 * PNG under "auto": no search. The palette-or-lossless decision in the encoder already keeps a
 * palette only when it scores at the threshold for the requested quality (see optimize.ts), so the
 * default quality is used and that score is reported. GIF: fixed, its palette quality is not what
 * limits it.
 */
export const AUTO_FIXED_FORMATS: ReadonlySet<OutputFormat> = new Set<OutputFormat>(['png', 'gif']);

/**
 * The shared memory candidates are decoded into for their scores, reused from one score to the next
 * and from one search to the next (SharedScratch). Until 2026-12-01 each search had its own, so the
 * first candidate of every search was decoded into fresh memory: on the 2-core VM its page faults
 * made that decode 14–67 ms instead of 9–13 for a 3-megapixel graphic (five runs of one image). At
 * most MAX_FREE buffers and CANDIDATE_SCRATCH_BYTES stay with the process between searches: enough
 * for two opaque 2048 × 2048 candidates or one transparent 2048 × 1148 one over its two backgrounds.
 */
export const CANDIDATE_SCRATCH_BYTES = 32 * 1024 * 1024;
const candidateScratch = new SharedScratch({ maxFreeBytes: CANDIDATE_SCRATCH_BYTES });

interface Trial {
  q: number;
  variant: EncodeVariant;
  encoded: Encoded;
  score: number;
}

/** How createAutoEncoder finds the quality. */
export interface AutoEncoderOptions {
  /**
   * true (default): the first probe is the quality predicted from the image's features
   * (auto-predict.ts), accepted when its score lands in the band around the target (AUTO_BELOW under
   * it to AUTO_TOLERANCE over), else
   * corrected once by the format's calibrated slope; only when that second probe also misses does the
   * secant search go on. false: the secant search from the per-class mean quality alone (the auto of
   * before the predictor; kept so the benchmark can measure one against the other in one run).
   */
  predict?: boolean;
  /**
   * true (default): candidates of photos with AUTO_ROW_SAMPLING.minHeight rows or more are scored
   * row-sampled (see SAMPLED_FLOOR_MARGIN). false: every score exact.
   */
  sampled?: boolean;
}

/**
 * Quality "auto": encoder settings chosen from cheap image features (image-features.ts), the quality
 * predicted from them (auto-predict.ts) and checked by one full-size SSIMULACRA2 score against the
 * resized source, corrected by a second when the prediction missed, with the secant search over
 * Compresso quality as the fallback; capped per format (AUTO_SETTINGS), with a floor (AUTO_FLOOR)
 * that moves to 4:4:4 chroma and lossless modes when the quality number alone cannot reach it. The
 * reference side of the metric is prepared in the metric thread while the first candidate encodes.
 */
export function createAutoEncoder(
  settings: Partial<Record<'jpeg' | 'webp' | 'avif', { target: number; maxQ: number }>> = {},
  { predict = true, sampled: sampling = true }: AutoEncoderOptions = {},
): AutoEncoder {
  const all = { ...AUTO_SETTINGS, ...settings };
  return async (source, options: CompressOptions, format: OutputFormat, encodeAtQuality) => {
    if (AUTO_FIXED_FORMATS.has(format)) {
      const encoded = await encodeAtQuality(DEFAULT_SCALE_QUALITY);
      return { encoded, ...(encoded.score !== undefined ? { score: encoded.score } : {}), steps: 0 };
    }
    const lossy = format as 'jpeg' | 'webp' | 'avif';
    const { target, maxQ } = all[lossy];
    // 'jpeg' never keeps animation frames, so this is the first frame, oriented and resized exactly
    // as the output will be. Into JPEG it is the encoder's own input: a transparent source flattened
    // on white by the encoder's pipeline (optimize.ts JPEG_BACKGROUND), so the metric compares the
    // output with exactly what was encoded, and the candidates are encoded from these pixels
    // (`shareDecodedPixels`) without decoding the source a second time.
    const referenceOptions = { ...options, strip_exif: true };
    const reference = () =>
      lossy === 'jpeg'
        ? encoderInput(source, referenceOptions, 'jpeg')
        : prepare(source, referenceOptions, 'jpeg');
    const references = await decodeReferences(reference, backgroundsFor(source.hasAlpha, format));
    const { width, height, data } = references[0]!.image;
    // Features from the pixels already decoded for the metric: no second decode and resize.
    const features = await measureFeatures(sharp(data, { raw: { width, height, channels: 3 } }));
    const small = Math.min(width, height) < SMALL_IMAGE_SIDE;
    const synthetic = isSynthetic(features);
    // Photos only: a screenshot's text can sit in a few rows, and its estimate strayed up to 0.8.
    const sampled = sampling && !synthetic && height >= AUTO_ROW_SAMPLING.minHeight;
    const floorGoal = sampled ? AUTO_FLOOR + SAMPLED_FLOOR_MARGIN : AUTO_FLOOR;
    // Animated WebP stays lossy: lossless animation frames are many times larger.
    const animated = source.frames > 1 && format === 'webp';
    // 4:4:4 where colour has sharp edges (coloured text, thin coloured lines): 4:2:0 smears them
    // (fullChromaFirst: JPEG asks for denser ones, or a small output).
    // A graphic whose edges are all in luma (grey text, flat fills, soft gradients) keeps 4:2:0,
    // which reaches the target at fewer bytes; the floor chain still moves it to 4:4:4 when 4:2:0
    // cannot. (WebP's lossy mode is 4:2:0 only.)
    const chroma: ChromaSubsampling | undefined =
      lossy === 'webp'
        ? undefined
        : small || (synthetic && fullChromaFirst(lossy, features, width, height))
          ? '4:4:4'
          : '4:2:0';
    const primary: EncodeVariant = chroma ? { chromaSubsampling: chroma } : {};
    // A large flat graphic whose half-size copy clears the target by far at the lowest quality
    // starts there (FLAT_CHECK). Before the reference is prepared: the metric thread keeps two
    // prepared references, and the half-size ones must not push the full-size ones out.
    const startAtMinimum =
      predict &&
      !small &&
      !animated &&
      flatCheckApplies(lossy, features, width, height) &&
      (await halfSizeScore(references, lossy, primary, source.limits.timeoutSeconds)) >=
        target + FLAT_CHECK.margin;
    // The reference side of the metric runs in its thread while the first candidate encodes; its
    // failure surfaces through the first score, which prepares it again.
    const ready = prepareReferences(references, { sampled }).catch(() => undefined);
    // The candidates are encoded from pixels decoded once where that gives the same bytes (optimize.ts).
    shareDecodedPixels(source, options, format, references[0]!.image);

    const trials: Trial[] = [];
    const key = (q: number, v: EncodeVariant) =>
      `${q}|${v.chromaSubsampling ?? ''}|${v.lossless ?? false}|${v.nearLossless ?? false}`;
    const cache = new Map<string, Trial>();
    const at = async (q: number, variant: EncodeVariant): Promise<Trial> => {
      let hit = cache.get(key(q, variant));
      if (!hit) {
        const encoded = await encodeAtQuality(q, variant);
        // Neighbouring qualities can give the same bytes (seen in AVIF: Q 61 and Q 64 of a
        // screenshot wrote the same file): their score is already known.
        const same = trials.find((t) => t.encoded.data.equals(encoded.data));
        await ready;
        const score = same
          ? same.score
          : await scoreEncoded(references, encoded.data, { sampled }, candidateScratch);
        hit = { q, variant, encoded, score };
        cache.set(key(q, variant), hit);
        trials.push(hit);
      }
      return hit;
    };
    const smallest = (goal: number, among: Trial[] = trials) => {
      const passing = among.filter((t) => t.score >= goal);
      // Bytes are not strictly monotonic in quality; of everything that passed, keep the smallest.
      return passing.length === 0
        ? undefined
        : passing.reduce((a, b) => (b.encoded.data.length < a.encoded.data.length ? b : a));
    };
    const done = (t: Trial) => ({ encoded: t.encoded, score: t.score, steps: trials.length });

    /**
     * Secant search for the smallest q in [lo, hi] reaching `goal`: probe `start`, then step by the
     * image's own slope (DEFAULT_SLOPE until two points are known), interpolating once a pass and a
     * fail bracket the goal; stop at a candidate within [goal − below, goal + AUTO_TOLERANCE], a
     * bracket of one step, or MAX_STEPS. `below` is AUTO_BELOW for the target, 0 for the floor.
     */
    const search = async (
      goal: number,
      lo: number,
      hi: number,
      start: number,
      variant: EncodeVariant,
      below = 0,
    ) => {
      const inBand = (t: Trial) => t.score >= goal - below && t.score - goal <= AUTO_TOLERANCE;
      // Points already scored with these settings bracket the goal from the start.
      let pass: Trial | undefined;
      let fail: Trial | undefined;
      for (const t of trials) {
        if (t.variant !== variant) continue;
        if (t.score >= goal) {
          if (!pass || t.q < pass.q) pass = t;
        } else if (!fail || t.q > fail.q) fail = t;
      }
      let q = Math.min(hi, Math.max(lo, Math.round(start)));
      for (let step = 0; step < MAX_STEPS; step++) {
        const t = await at(q, variant);
        if (t.score >= goal) {
          if (!pass || t.q < pass.q) pass = t;
        } else if (!fail || t.q > fail.q) fail = t;
        if (inBand(t)) break;
        if (pass && fail && pass.q - fail.q <= 1) break;
        let next: number;
        if (pass && fail) {
          const slope = (pass.score - fail.score) / (pass.q - fail.q);
          next = fail.q + Math.ceil((goal + 0.2 - fail.score) / Math.max(slope, 0.05));
          next = Math.min(pass.q - 1, Math.max(fail.q + 1, next));
          // One step under a pass is not worth an encode and a score where a step saves little.
          if (next === pass.q - 1 && stepSaving(pass, fail) < MIN_STEP_SAVING) break;
        } else {
          const [a, b] = trials.filter((x) => x.variant === variant).slice(-2);
          const measured = a && b && b.q !== a.q ? (b.score - a.score) / (b.q - a.q) : 0;
          const slope = measured > 0.1 ? measured : DEFAULT_SLOPE;
          if (pass) {
            if (pass.q <= lo) break;
            next = pass.q - Math.max(1, Math.floor((pass.score - goal - 0.2) / slope));
          } else {
            if (fail!.q >= hi) break;
            next = fail!.q + Math.max(1, Math.ceil((goal + 0.3 - fail!.score) / slope));
          }
          next = Math.min(hi, Math.max(lo, next));
        }
        if (cache.has(key(next, variant))) break;
        q = next;
      }
      return pass;
    };

    // Small WebP: lossy WebP is 4:2:0 only and no quality of it reached 70 on a 30–110 px photo.
    if (small && format === 'webp' && !animated) return done(await at(100, { nearLossless: true }));
    const lo = AUTO_MIN_Q;
    const cap = maxQ;

    // Screenshots and graphics in WebP: lossless is often smaller than any lossy output that keeps
    // the text clean, and it scores 100 by construction, so it costs an encode but no score. It is
    // tried after the lossy search, and only when its estimated size says it can win
    // (LOSSLESS_TRY_RATIO).
    const losslessCandidate = format === 'webp' && synthetic && !animated;
    let lossless: Trial | undefined;
    const tryLossless = async (against: Trial | undefined) => {
      if (!losslessCandidate || lossless) return;
      if (against) {
        const estimate = await estimateLosslessWebp(references[0]!.image);
        if (estimate > LOSSLESS_TRY_RATIO * against.encoded.data.length) return;
      }
      const encoded = await encodeAtQuality(100, { lossless: true });
      lossless = { q: 100, variant: { lossless: true }, encoded, score: 100 };
    };

    const predicted = predictQuality(lossy, features, primary, target, predict);
    const start = startAtMinimum ? lo : Math.min(cap, Math.max(lo, small ? SMALL_START_Q : predicted.q));
    if (predict && !small) {
      // One score for the prediction, accepted when it lands in the band around the target
      // (AUTO_BELOW under it to AUTO_TOLERANCE over); otherwise the secant search goes on from the
      // step the calibrated slope gives (the first point stays in its cache and brackets the goal
      // with the second).
      const first = await at(start, primary);
      const off = first.score - target;
      // Lossy WebP cannot get there (FAR_BELOW): lossless, tried next, is the answer.
      const lossyHopeless = losslessCandidate && off < -FAR_BELOW;
      if (!lossyHopeless && (off < -AUTO_BELOW || off > AUTO_TOLERANCE)) {
        const next =
          off < 0
            ? Math.min(cap, first.q + Math.max(1, Math.ceil((0.3 - off) / predicted.slope.up)))
            : off > FAR_ABOVE
              ? lo
              : Math.max(lo, first.q - Math.max(1, Math.floor((off - 0.2) / predicted.slope.down)));
        if (next !== first.q) await search(target, lo, cap, next, primary, AUTO_BELOW);
      }
    } else {
      await search(target, lo, cap, start, primary, AUTO_BELOW);
    }
    const withLossless = (t: Trial | undefined) =>
      lossless && (!t || lossless.encoded.data.length <= t.encoded.data.length) ? lossless : t;

    const lossyFound = smallest(target - AUTO_BELOW);
    await tryLossless(lossyFound ?? smallest(floorGoal));
    const found = withLossless(lossyFound);
    if (found) return done(found);
    // The cap did not reach the target: the best output at the cap's quality or under, if it clears the floor.
    const atFloor = withLossless(smallest(floorGoal));
    if (atFloor) return done(atFloor);
    // Under the floor even at the cap: above the cap first, then 4:4:4 chroma, then lossless.
    const highest = trials.reduce((a, b) => (b.q > a.q ? b : a));
    await search(floorGoal, cap, AUTO_MAX_Q, Math.min(AUTO_MAX_Q, highest.q + 6), primary);
    let floor = smallest(floorGoal);
    if (!floor && chroma === '4:2:0') {
      await search(floorGoal, lo, AUTO_MAX_Q, Math.min(AUTO_MAX_Q, highest.q), {
        chromaSubsampling: '4:4:4',
      });
      floor = smallest(floorGoal);
    }
    if (!floor && format === 'jpeg') {
      await at(100, { chromaSubsampling: '4:4:4' });
      floor = smallest(floorGoal);
    }
    if (!floor && !animated && format !== 'jpeg') floor = lossless ?? (await at(100, { lossless: true }));
    if (floor && floor.score >= floorGoal) return done(floor);
    const best = trials.reduce((a, b) => (b.score > a.score ? b : a));
    return done(best);
  };
}
