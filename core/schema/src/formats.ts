// Imports nothing: built into the Node client (see error-codes.ts).

/** Formats Compresso writes. */
export const OUTPUT_FORMATS = ['jpeg', 'png', 'webp', 'avif', 'gif'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** Formats Compresso reads. HEIC/HEIF and TIFF are read but written as JPEG by default. */
export const INPUT_FORMATS = ['jpeg', 'png', 'webp', 'avif', 'gif', 'tiff', 'heif'] as const;
export type InputFormat = (typeof INPUT_FORMATS)[number];

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

/**
 * File extensions the clients, the CLI, MCP and the web page accept as images, and the format each
 * suggests. Only a hint: the server reads the bytes, so a mislabelled file still gets a clear code.
 */
export const INPUT_EXTENSIONS = {
  '.jpg': 'jpeg',
  '.jpeg': 'jpeg',
  '.jpe': 'jpeg',
  '.jfif': 'jpeg',
  '.png': 'png',
  '.webp': 'webp',
  '.avif': 'avif',
  '.gif': 'gif',
  '.tif': 'tiff',
  '.tiff': 'tiff',
  '.heic': 'heif',
  '.heif': 'heif',
} as const satisfies Record<string, InputFormat>;

export type InputExtension = keyof typeof INPUT_EXTENSIONS;

/** The MIME type a client sends with an upload of each input format (a hint; the server sniffs). */
export const INPUT_MIME_TYPES: Record<InputFormat, string> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  avif: 'image/avif',
  gif: 'image/gif',
  tiff: 'image/tiff',
  heif: 'image/heif',
};
