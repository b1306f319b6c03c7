import {
  type CompressOptions,
  defaultOutputFormat,
  type InfoResult,
  type OutputFormat,
} from '@compresso/schema';
import sharp, { type Sharp } from 'sharp';
import {
  AVIF_EFFORT,
  applyEncoder,
  type ChromaSubsampling,
  type EncodeSettings,
  PNG_PALETTE_EFFORT,
  WEBP_EFFORT,
} from './encode.ts';
import { stripMetadataLossless } from './exif.ts';
import { type EngineLimits, withTimeLimit } from './limits.ts';
import { backgroundsFor, decodeReferences, scoreEncoded } from './metric/compare.ts';
import type { RgbImage } from './metric/index.ts';
import { scoreForQuality } from './quality.ts';
import { pipelineFailure } from './sharp-errors.ts';
import { openSource, type Source } from './source.ts';
import { type WebpAlpha, webpAlpha, withWebpAlpha } from './webp-alpha.ts';

/**
 * Smart PNG→JPEG converts an opaque PNG only when the JPEG is at least this much smaller than the
 * best PNG: below that, the lossless PNG (or a faithful palette) is worth its few extra bytes.
 */
export const PNG_TO_JPEG_MIN_SAVING = 0.2;

export interface OptimizeOutput {
  data: Buffer;
  info: InfoResult;
}

interface Encoded {
  data: Buffer;
  width: number;
  height: number;
  format: OutputFormat;
  quality: number;
  /** SSIMULACRA2 against the source, when one was computed on the way (palette PNG check). */
  score?: number;
  /** JPEG, AVIF: the chroma subsampling written. */
  chromaSubsampling?: ChromaSubsampling;
  /** WebP, AVIF, PNG: true for a lossless output (for PNG: truecolour, not a palette). */
  lossless?: boolean;
  /** WebP: near-lossless. */
  nearLossless?: boolean;
}

/** Encoder settings besides the quality number that quality "auto" may choose. */
export type EncodeVariant = Pick<EncodeSettings, 'chromaSubsampling' | 'lossless' | 'nearLossless'>;

/** Formats that can carry every frame of an animation; the others get the first frame. */
const ANIMATED_FORMATS = new Set<OutputFormat>(['gif', 'webp']);

/** Orientation, resize and metadata: everything before the encoder, shared by every encode. */
export function prepare(source: Source, options: CompressOptions, format: OutputFormat): Sharp {
  const firstFrameOnly = source.frames > 1 && !ANIMATED_FORMATS.has(format);
  let p = source.pipeline({ firstFrameOnly }).autoOrient();
  if (options.max_dimension !== undefined) {
    p = p.resize({
      width: options.max_dimension,
      height: options.max_dimension,
      fit: 'inside',
      withoutEnlargement: true,
    });
  }
  // Without keepMetadata sharp writes no EXIF/XMP/IPTC and converts the pixels to sRGB through the
  // embedded ICC profile, so colours stay right with the profile gone.
  if (!options.strip_exif) p = p.keepMetadata();
  return p;
}

/**
 * JPEG has no alpha: left to libvips, transparent pixels keep whatever colour they store, which is
 * black in most files (and sometimes garbage). White is what a page shows behind a transparent image
 * in almost every site and viewer, so that is what the JPEG shows where the image was transparent.
 */
export const JPEG_BACKGROUND = '#ffffff';

function flattenForJpeg(pipeline: Sharp, source: Source, format: OutputFormat): Sharp {
  return format === 'jpeg' && source.hasAlpha ? pipeline.flatten({ background: JPEG_BACKGROUND }) : pipeline;
}

/**
 * Pixels quality "auto" decoded once, handed to the encodes of its candidates: see
 * `shareDecodedPixels`. Keyed by the source; the options object must be the one encode is called with.
 */
const sharedPixels = new WeakMap<
  Source,
  {
    options: CompressOptions;
    format: OutputFormat;
    width: number;
    height: number;
    data: Uint8Array;
    channels: 3 | 4;
  }
>();

/**
 * Quality "auto" decodes and resizes the source once for the metric's reference; each candidate it
 * encodes would decode and resize it again (a third of a JPEG encode from a JPEG source at 2048 px;
 * on a transparent 3-megapixel PNG, 30–70 ms of a 230–290-ms JPEG candidate, 2026-11-27). Where the
 * pixels are exactly what the encoder would be given — metadata stripped (so the encoder writes none,
 * and sharp has already converted to sRGB through any ICC profile), one frame, sRGB colour channels
 * (8 or 16 bits) — the candidates are encoded from them instead:
 * - into JPEG: the reference's RGB, which auto decodes through the encoder's own pipeline (a
 *   transparent source flattened on JPEG_BACKGROUND there);
 * - an opaque source into WebP or AVIF: the reference's RGB;
 * - a transparent one into WebP or AVIF: the reference's RGBA (where the alpha is 255 everywhere
 *   the metric keeps RGB only, and the alpha goes back in).
 * The output is the same to the byte (auto.test.ts: JPEG and PNG sources with and without ICC
 * profiles, 16-bit, transparent, in JPEG, WebP and AVIF). Any other source is left alone.
 */
export function shareDecodedPixels(
  source: Source,
  options: CompressOptions,
  format: OutputFormat,
  reference: RgbImage,
): void {
  const m = source.metadata;
  if (!options.strip_exif || source.frames !== 1 || source.heic || !m) return;
  if (m.space !== 'srgb' && m.space !== 'rgb16') return;
  const { width, height } = reference;
  const share = (data: Uint8Array, channels: 3 | 4) =>
    sharedPixels.set(source, { options, format, width, height, data, channels });
  if (format === 'jpeg') {
    // Auto's JPEG reference is the encoder's own input (auto.ts: `encoderInput`, which flattens a
    // transparent source on JPEG_BACKGROUND), 8-bit RGB: shared as it is.
    if (!reference.rgba && reference.data.length === width * height * 3) share(reference.data, 3);
    return;
  }
  if (!source.hasAlpha) {
    if (m.channels === 3 && !reference.rgba && reference.data.length === width * height * 3)
      share(reference.data, 3);
    return;
  }
  if (m.channels !== 4) return;
  if (reference.rgba && reference.rgba.length === width * height * 4) {
    share(reference.rgba, 4);
  } else if (!reference.rgba && reference.data.length === width * height * 3) {
    // An alpha channel opaque everywhere: the metric kept RGB only (decodeToRgbs), which is the
    // decoded RGBA without its alpha; the alpha of 255 goes back in for the encoder.
    const rgba = new Uint8Array(width * height * 4);
    for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) {
      rgba[i] = reference.data[j]!;
      rgba[i + 1] = reference.data[j + 1]!;
      rgba[i + 2] = reference.data[j + 2]!;
      rgba[i + 3] = 255;
    }
    share(rgba, 4);
  }
}

function pipelineFor(source: Source, options: CompressOptions, format: OutputFormat): Sharp {
  const shared = sharedPixels.get(source);
  if (shared && shared.options === options && shared.format === format) {
    const { width, height, data, channels } = shared;
    return sharp(data, { raw: { width, height, channels } });
  }
  return encoderInput(source, options, format);
}

/** What an encoder reads, decoded from the source: `prepare`, and flattened on white for JPEG. */
export function encoderInput(source: Source, options: CompressOptions, format: OutputFormat): Sharp {
  return flattenForJpeg(prepare(source, options, format), source, format);
}

/**
 * The alpha chunk of the first lossy WebP encoded from a source with these options (auto encodes
 * the same pixels at several qualities): the later ones write their alpha cheaply and take this one
 * instead, which gives the same bytes (webp-alpha.ts). Keyed by the source; the options object must
 * be the one encode is called with.
 */
const knownWebpAlpha = new WeakMap<Source, { options: CompressOptions; alpha: WebpAlpha }>();

/** Lossy and one frame: the WebP encodes whose alpha chunk does not depend on the quality. */
function reusesWebpAlpha(source: Source, settings: EncodeSettings): boolean {
  return settings.format === 'webp' && !settings.lossless && !settings.nearLossless && source.frames === 1;
}

async function encode(source: Source, options: CompressOptions, settings: EncodeSettings): Promise<Encoded> {
  try {
    const reuse = reusesWebpAlpha(source, settings);
    const known = reuse ? knownWebpAlpha.get(source) : undefined;
    const alpha = known?.options === options ? known.alpha : undefined;
    const encodeWith = (s: EncodeSettings) =>
      withTimeLimit(
        applyEncoder(pipelineFor(source, options, s.format), s).toBuffer({ resolveWithObject: true }),
        source.limits.timeoutSeconds,
      );
    let { data, info } = await encodeWith(alpha ? { ...settings, draftAlpha: true } : settings);
    if (alpha) {
      const spliced = withWebpAlpha(data, alpha);
      // Never seen: a file whose chunks are not as expected is encoded again in full.
      if (spliced) data = spliced;
      else ({ data, info } = await encodeWith(settings));
    } else if (reuse) {
      const found = webpAlpha(data);
      if (found) knownWebpAlpha.set(source, { options, alpha: found });
    }
    const frames = settings.format === 'gif' || settings.format === 'webp' ? Math.max(1, info.pages ?? 1) : 1;
    return {
      data,
      width: info.width,
      height: frames > 1 ? (info.pageHeight ?? Math.round(info.height / frames)) : info.height,
      format: settings.format,
      quality: settings.quality,
      ...(settings.format === 'jpeg' || (settings.format === 'avif' && !settings.lossless)
        ? { chromaSubsampling: settings.chromaSubsampling ?? '4:2:0' }
        : {}),
      ...(settings.format === 'webp' || settings.format === 'avif' || settings.format === 'png'
        ? { lossless: settings.lossless ?? false }
        : {}),
      ...(settings.format === 'webp' && settings.nearLossless && !settings.lossless
        ? { nearLossless: true }
        : {}),
    };
  } catch (error) {
    throw await pipelineFailure(error, source);
  }
}

/**
 * PNG: a palette when it keeps the requested quality, otherwise lossless. The palette is kept only
 * when it is smaller than the lossless PNG and its SSIMULACRA2 against the source reaches
 * `scoreForQuality(quality)` — what mozjpeg reaches at that quality on photos (77 at the default 80,
 * 95 at 100), so a palette never looks worse than the JPEG of the same quality would. The check runs
 * only when the palette is the smaller one (the metric costs about a second per 2048-px image).
 */
async function encodePng(source: Source, options: CompressOptions, quality: number): Promise<Encoded> {
  const [palette, lossless] = await Promise.all([
    encode(source, options, { format: 'png', quality }),
    encode(source, options, { format: 'png', quality, lossless: true }),
  ]);
  if (palette.data.length >= lossless.data.length) return lossless;
  const references = await decodeReferences(
    () => prepare(source, { ...options, strip_exif: true }, 'jpeg'),
    backgroundsFor(source.hasAlpha, 'png'),
  );
  const score = await scoreEncoded(references, palette.data);
  return score >= scoreForQuality(quality) ? { ...palette, score } : { ...lossless, score: 100 };
}

async function encodeAt(
  source: Source,
  options: CompressOptions,
  format: OutputFormat,
  quality: number,
  variant: EncodeVariant = {},
) {
  return format === 'png'
    ? encodePng(source, options, quality)
    : encode(source, options, { format, quality, ...variant });
}

export type AutoEncoder = (
  source: Source,
  options: CompressOptions,
  format: OutputFormat,
  encodeAtQuality: (quality: number, variant?: EncodeVariant) => Promise<Encoded>,
) => Promise<{ encoded: Encoded; score?: number; steps?: number }>;

/** The encoder effort behind an output, as reported in the info. */
function effortOf(encoded: Encoded): number | undefined {
  switch (encoded.format) {
    case 'webp':
      return WEBP_EFFORT;
    case 'avif':
      return AVIF_EFFORT;
    case 'png':
      return encoded.lossless ? undefined : PNG_PALETTE_EFFORT;
    default:
      return undefined;
  }
}

export interface OptimizeContext {
  limits: EngineLimits;
  auto?: AutoEncoder;
}

function round1(n: number): number {
  return Math.round(n * 10) / 10;
}

/**
 * Optimize one image: open (with every limit checked first), orient, resize, encode at the mapped
 * quality (or search for it), and never hand back something larger than what came in when nothing
 * but a re-encode was asked for.
 */
export async function optimizeImage(
  bytes: Uint8Array,
  options: CompressOptions,
  context: OptimizeContext,
): Promise<OptimizeOutput> {
  const source = await openSource(bytes, context.limits);
  const inputFormat = source.format;
  let format: OutputFormat = options.output_format ?? defaultOutputFormat(inputFormat);

  let score: number | undefined;
  let steps: number | undefined;
  let encoded: Encoded;
  const encodeAtQuality = (q: number, variant?: EncodeVariant) =>
    encodeAt(source, options, format, q, variant);
  const run = async (): Promise<Encoded> => {
    if (options.quality === 'auto') {
      if (!context.auto) throw new Error('auto quality needs an AutoEncoder in the engine context');
      // The search also decodes the source itself (the metric's reference), outside encode's catch.
      const found = await context
        .auto(source, options, format, encodeAtQuality)
        .catch(async (error: unknown) => {
          throw await pipelineFailure(error, source);
        });
      score = found.score;
      steps = found.steps;
      return found.encoded;
    }
    const fixed = await encodeAtQuality(options.quality);
    // A palette PNG is scored on the way: report it (100 when lossless won on score).
    score = fixed.score;
    return fixed;
  };
  encoded = await run();

  if (options.png_to_jpeg && !options.output_format && inputFormat === 'png' && format === 'png') {
    const opaque = !source.hasAlpha || (await hasOnlyOpaquePixels(source));
    if (opaque) {
      const pngResult = { encoded, score };
      format = 'jpeg';
      const jpeg = await run();
      if (jpeg.data.length <= encoded.data.length * (1 - PNG_TO_JPEG_MIN_SAVING)) encoded = jpeg;
      else {
        format = 'png';
        encoded = pngResult.encoded;
        score = pngResult.score;
      }
    }
  }

  const autoQuality = options.quality === 'auto';
  const reencodeOnly =
    encoded.format === inputFormat && encoded.width === source.width && encoded.height === source.height;
  const original = reencodeOnly ? originalWithoutReencode(bytes, source, options) : undefined;
  if (original && original.data.length <= encoded.data.length) {
    const unchanged = !original.stripped;
    return {
      data: Buffer.from(original.data.buffer, original.data.byteOffset, original.data.byteLength),
      info: {
        input_size: bytes.length,
        output_size: original.data.length,
        savings_percent: unchanged ? 0 : round1((1 - original.data.length / bytes.length) * 100),
        input_format: inputFormat,
        output_format: encoded.format,
        input_width: source.width,
        input_height: source.height,
        width: source.width,
        height: source.height,
        quality: encoded.quality,
        auto_quality: autoQuality,
        optimized: !unchanged,
        metadata_stripped: original.stripped,
        frames: source.frames,
      },
    };
  }

  const info: InfoResult = {
    input_size: bytes.length,
    output_size: encoded.data.length,
    savings_percent: round1((1 - encoded.data.length / bytes.length) * 100),
    input_format: inputFormat,
    output_format: encoded.format,
    input_width: source.width,
    input_height: source.height,
    width: encoded.width,
    height: encoded.height,
    quality: encoded.quality,
    auto_quality: autoQuality,
    optimized: true,
    // HEIC pixels come out of the decoder without their EXIF/XMP, whatever strip_exif asked.
    metadata_stripped: options.strip_exif || Boolean(source.heic?.exif || source.heic?.xmp),
    frames: ANIMATED_FORMATS.has(encoded.format) ? source.frames : 1,
  };
  if (score !== undefined) info.score = round1(score);
  if (encoded.chromaSubsampling) info.chroma_subsampling = encoded.chromaSubsampling;
  if (encoded.lossless !== undefined) info.lossless = encoded.lossless;
  if (encoded.nearLossless) info.near_lossless = true;
  const effort = effortOf(encoded);
  if (effort !== undefined) info.effort = effort;
  if (autoQuality && steps !== undefined) info.auto_steps = steps;
  return { data: encoded.data, info };
}

/**
 * Never larger: when only a re-encode was asked for, the input's own pixels are a candidate too — but
 * only if handing them back keeps the promises of strip_exif. With stripping on, an input whose
 * orientation is not 1 must be re-encoded (its EXIF is what rotates it), a JPEG or PNG is offered
 * with its EXIF/XMP/IPTC cut out losslessly, and any other format that carries metadata is not
 * offered at all (the re-encode wins even when a little larger: GPS must not leak).
 */
function originalWithoutReencode(
  bytes: Uint8Array,
  source: Source,
  options: CompressOptions,
): { data: Uint8Array; stripped: boolean } | undefined {
  if (!options.strip_exif) return { data: bytes, stripped: false };
  if (source.orientation !== 1) return undefined;
  const stripped = stripMetadataLossless(bytes, source.format);
  if (stripped) return { data: stripped, stripped: stripped.length < bytes.length };
  const m = source.metadata;
  if (m?.exif || m?.xmp || m?.iptc) return undefined;
  return { data: bytes, stripped: false };
}

/** An alpha channel that is 255 everywhere is no transparency at all (common in exported PNGs). */
async function hasOnlyOpaquePixels(source: Source): Promise<boolean> {
  try {
    const stats = await source.pipeline({ firstFrameOnly: true }).stats();
    return stats.isOpaque;
  } catch (error) {
    throw await pipelineFailure(error, source);
  }
}
