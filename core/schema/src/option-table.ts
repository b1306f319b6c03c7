import { OUTPUT_FORMATS } from './formats.ts';

// Imports nothing but formats: built into the Node client (see error-codes.ts).

/** The default on Compresso's one quality scale (1–100, the same visual quality in every format). */
export const DEFAULT_QUALITY = 80;
export const QUALITY_MIN = 1;
export const QUALITY_MAX = 100;
export const MAX_DIMENSION_LIMIT = 65_535;

export type OptionKind = 'quality' | 'format' | 'integer' | 'boolean';

export interface OptionSpec {
  /** What the value is; each consumer (zod, a form, a Python signature) renders the kind its way. */
  kind: OptionKind;
  /** The Node client's camelCase name for it (Python keeps the wire name, `format` aside). */
  client: string;
  min?: number;
  max?: number;
  values?: readonly string[];
  /** The server's default when the field is not sent; absent: the option has no default. */
  default?: number | boolean | string;
}

/**
 * The compress options, in the order every consumer lists them: the wire name (snake_case, a
 * multipart field or JSON member), what it holds and its bounds. `CompressOptionsSchema` validates
 * exactly these fields, the Node client sends them under these names, the web page reads its
 * bounds here, and the JSON export carries them to Python, PHP and WordPress.
 */
export const COMPRESS_OPTIONS = {
  quality: {
    kind: 'quality',
    client: 'quality',
    min: QUALITY_MIN,
    max: QUALITY_MAX,
    default: DEFAULT_QUALITY,
  },
  output_format: { kind: 'format', client: 'format', values: OUTPUT_FORMATS },
  max_dimension: { kind: 'integer', client: 'maxDimension', min: 1, max: MAX_DIMENSION_LIMIT },
  strip_exif: { kind: 'boolean', client: 'stripExif', default: true },
  png_to_jpeg: { kind: 'boolean', client: 'pngToJpeg', default: false },
} as const satisfies Record<string, OptionSpec>;

export type CompressOptionName = keyof typeof COMPRESS_OPTIONS;

export const COMPRESS_OPTION_NAMES = Object.keys(COMPRESS_OPTIONS) as CompressOptionName[];
