import { z } from 'zod';

/** Formats Compresso writes. */
export const OUTPUT_FORMATS = ['jpeg', 'png', 'webp', 'avif', 'gif'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** Formats Compresso reads. HEIC/HEIF and TIFF are read but written as JPEG by default. */
export const INPUT_FORMATS = ['jpeg', 'png', 'webp', 'avif', 'gif', 'tiff', 'heif'] as const;
export type InputFormat = (typeof INPUT_FORMATS)[number];

export const OutputFormatSchema = z.enum(OUTPUT_FORMATS);
export const InputFormatSchema = z.enum(INPUT_FORMATS);

const ALIASES: Record<string, OutputFormat> = { jpg: 'jpeg', jpe: 'jpeg', jfif: 'jpeg' };

/** `WEBP`, `jpg`, ` Avif ` → canonical format, or undefined when it is not one we write. */
export function normalizeOutputFormat(value: string): OutputFormat | undefined {
  const lower = value.trim().toLowerCase();
  const canonical = ALIASES[lower] ?? lower;
  return (OUTPUT_FORMATS as readonly string[]).includes(canonical) ? (canonical as OutputFormat) : undefined;
}

export const MIME_TYPES: Record<OutputFormat, string> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  avif: 'image/avif',
  gif: 'image/gif',
};

export const FILE_EXTENSIONS: Record<OutputFormat, string> = {
  jpeg: 'jpg',
  png: 'png',
  webp: 'webp',
  avif: 'avif',
  gif: 'gif',
};

/** The format an input becomes when no output format was asked for. */
export function defaultOutputFormat(input: InputFormat): OutputFormat {
  return input === 'heif' || input === 'tiff' ? 'jpeg' : input;
}
