import { z } from 'zod';
import { CompressoError, type FieldProblem } from './errors.ts';
import { normalizeOutputFormat, OUTPUT_FORMATS, type OutputFormat } from './formats.ts';
import {
  COMPRESS_OPTION_NAMES,
  COMPRESS_OPTIONS,
  type CompressOptionName,
  DEFAULT_QUALITY,
  MAX_DIMENSION_LIMIT,
  QUALITY_MAX,
  QUALITY_MIN,
} from './option-table.ts';

const TRUE_WORDS = new Set(['true', '1', 'yes', 'on']);
const FALSE_WORDS = new Set(['false', '0', 'no', 'off']);

/**
 * Multipart forms carry every value as text, JSON carries numbers and booleans: each field accepts
 * both, so the same schema validates an HTTP form, a JSON body and a client's options object.
 */
const booleanField = z
  .union([
    z.boolean(),
    z
      .string()
      .refine((s) => TRUE_WORDS.has(s.trim().toLowerCase()) || FALSE_WORDS.has(s.trim().toLowerCase())),
  ])
  .transform((v) => (typeof v === 'boolean' ? v : TRUE_WORDS.has(v.trim().toLowerCase())));

const qualityField = z
  .union([z.int().min(1).max(100), z.string().regex(/^\s*(auto|\d{1,3})\s*$/i)])
  .transform((v): number | 'auto' => (typeof v === 'number' ? v : /auto/i.test(v) ? 'auto' : Number(v)))
  .pipe(z.union([z.literal('auto'), z.int().min(QUALITY_MIN).max(QUALITY_MAX)]));

const formatField = z
  .string()
  .refine((s) => normalizeOutputFormat(s) !== undefined)
  .transform((s) => normalizeOutputFormat(s) as OutputFormat);

const dimensionField = z
  .union([
    z.int().min(COMPRESS_OPTIONS.max_dimension.min).max(MAX_DIMENSION_LIMIT),
    z.string().regex(/^\s*\d{1,5}\s*$/),
  ])
  .transform((v) => Number(v))
  .pipe(z.int().min(COMPRESS_OPTIONS.max_dimension.min).max(MAX_DIMENSION_LIMIT));

/**
 * One zod field per entry of COMPRESS_OPTIONS, no more, no fewer: an option added to the table
 * without its validation here does not type-check.
 */
const optionFields = {
  quality: qualityField
    .default(DEFAULT_QUALITY)
    .describe(
      `Visual quality on one scale for every format: an integer from 1 to 100, or "auto" for the smallest file that stays at the perceptual target. Default ${DEFAULT_QUALITY}.`,
    ),
  output_format: formatField
    .optional()
    .describe(
      `Output format: ${OUTPUT_FORMATS.join(', ')} (any case; "jpg" means jpeg). Default: the input's format; HEIC/HEIF and TIFF inputs become jpeg.`,
    ),
  max_dimension: dimensionField
    .optional()
    .describe(
      `Fit the image inside a square of this many pixels (1–${MAX_DIMENSION_LIMIT}), keeping its aspect ratio; never enlarges. Default: keep the size.`,
    ),
  strip_exif: booleanField
    .default(true)
    .describe(
      'Remove EXIF, XMP and IPTC metadata (GPS included) after applying the orientation; colours stay right. Default true.',
    ),
  png_to_jpeg: booleanField
    .default(false)
    .describe(
      'Write an opaque PNG as JPEG when that saves at least 20% more than the best PNG; images with real transparency stay PNG. Only applies when no output_format is given. Default false.',
    ),
} satisfies Record<CompressOptionName, z.ZodType>;

export const CompressOptionsSchema = z.object(optionFields).strict();

/** What a caller may send (every field optional, text accepted). */
export type CompressOptionsInput = z.input<typeof CompressOptionsSchema>;
/** The options after validation: defaults applied, formats canonical. */
export type CompressOptions = z.output<typeof CompressOptionsSchema>;

export const COMPRESS_OPTION_FIELDS = COMPRESS_OPTION_NAMES as (keyof CompressOptions)[];

const EXPECTED: Record<CompressOptionName, string> = {
  quality: `an integer from ${QUALITY_MIN} to ${QUALITY_MAX}, or "auto"`,
  output_format: `one of ${OUTPUT_FORMATS.join(', ')} (any case; "jpg" means jpeg)`,
  max_dimension: `an integer from ${COMPRESS_OPTIONS.max_dimension.min} to ${MAX_DIMENSION_LIMIT}`,
  strip_exif: 'true or false',
  png_to_jpeg: 'true or false',
};

/** Results of parseCompressOptions: frozen, so membership here means the values are still valid. */
const PARSED = new WeakSet<object>();

/** True for an object parseCompressOptions returned (a copy or spread of one is parsed again). */
export function isParsedCompressOptions(value: unknown): value is CompressOptions {
  return typeof value === 'object' && value !== null && PARSED.has(value);
}

function shown(value: unknown): string {
  let text: string;
  if (value === undefined) text = 'nothing';
  else if (typeof value === 'string') text = JSON.stringify(value);
  else {
    try {
      text = JSON.stringify(value) ?? String(value);
    } catch {
      text = String(value);
    }
  }
  return text.length > 100 ? `${text.slice(0, 97)}...` : text;
}

/**
 * Validate compress options once, at the boundary. Throws INVALID_OPTION naming every bad field,
 * what it accepts and what was received, in the style of sharp's own argument errors.
 */
export function parseCompressOptions(raw: unknown): CompressOptions {
  // Already validated by this function (and frozen, so still valid): the hot path parses once — the
  // server at its boundary — and the engine's own call returns here at no cost.
  if (isParsedCompressOptions(raw)) return raw;
  const result = CompressOptionsSchema.safeParse(raw ?? {});
  if (result.success) {
    const options = Object.freeze(result.data) as CompressOptions;
    PARSED.add(options);
    return options;
  }
  const input = (raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const problems: FieldProblem[] = [];
  const seen = new Set<string>();
  for (const issue of result.error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        if (seen.has(key)) continue;
        seen.add(key);
        problems.push({
          field: key,
          expected: `a known field (${COMPRESS_OPTION_FIELDS.join(', ')})`,
          received: shown(input[key]),
        });
      }
      continue;
    }
    const field = String(issue.path[0] ?? '(options)');
    if (seen.has(field)) continue;
    seen.add(field);
    problems.push({
      field,
      expected: EXPECTED[field as CompressOptionName] ?? 'an object of compress options',
      received: shown(issue.path.length ? input[field] : raw),
    });
  }
  const message = problems
    .map((p) => `${p.field}: expected ${p.expected}, received ${p.received}`)
    .join('; ');
  throw new CompressoError('INVALID_OPTION', `Invalid option — ${message}`, { details: problems });
}
