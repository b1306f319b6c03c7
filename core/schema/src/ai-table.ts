// Imports nothing: built into the Node client (see error-codes.ts).

/**
 * Our four generation models. Each provider adapter maps them to one of its own models (the server
 * README lists the defaults; COMPRESSO_AI_MODEL_<NAME> overrides one), so a caller picks a kind of
 * picture, not a vendor's model id.
 */
export const AI_MODELS = ['fast', 'photo', 'design', 'icon'] as const;
export type AiModel = (typeof AI_MODELS)[number];
export const DEFAULT_AI_MODEL: AiModel = 'fast';

/** What a caller may ask for; the provider's nearest supported ratio is used (X-Aspect-Ratio). */
export const DEFAULT_ASPECT_RATIO = '1:1';
/** Widest and tallest ratio accepted: beyond it no provider has anything near. */
export const ASPECT_RATIO_MAX = 4;

/** Longest prompt accepted, in characters (OpenAI's gpt-image models take 32 000; we keep it small). */
export const PROMPT_MAX = 4000;
/** Longest edit instruction, in characters. */
export const INSTRUCTION_MAX = 500;
/** Longest context field of /alt-text (product title, vendor, page title), in characters. */
export const ALT_CONTEXT_MAX = 300;
/** Longest alt text written: Shopify's limit for media alt text is 512; screen readers want far less. */
export const ALT_TEXT_MAX = 250;

/** Who wrote an alt text: a vision provider that saw the image, or the server from context and facts. */
export const ALT_TEXT_SOURCES = ['provider', 'offline'] as const;
export type AltTextSource = (typeof ALT_TEXT_SOURCES)[number];

/** The provider adapters the server has. */
export const AI_PROVIDERS = ['openai', 'replicate'] as const;
export type AiProviderName = (typeof AI_PROVIDERS)[number];

/** The kinds of operation an edit instruction is parsed into (EditOperationSchema has each one's fields). */
export const EDIT_OPERATION_KINDS = [
  'resize',
  'crop',
  'rotate',
  'flip',
  'grayscale',
  'blur',
  'sharpen',
  'brightness',
  'contrast',
  'saturation',
  'format',
  'quality',
] as const;
export type EditOperationKind = (typeof EDIT_OPERATION_KINDS)[number];

/** `"16:9"` → `{width: 16, height: 9}`; undefined unless two whole numbers from 1 to 100. */
export function parseAspectRatio(text: string): { width: number; height: number } | undefined {
  const match = /^\s*(\d{1,3})\s*[:x/]\s*(\d{1,3})\s*$/.exec(text);
  if (!match) return undefined;
  const width = Number(match[1]);
  const height = Number(match[2]);
  if (width < 1 || height < 1 || width > 100 || height > 100) return undefined;
  return { width, height };
}

/**
 * A JSON value as a header value: header values are ASCII, so every other character is written as
 * a `\uXXXX` escape, which JSON.parse reads back. Used for the edit headers (lists of operations and
 * words).
 */
export function encodeJsonHeader(value: unknown): string {
  return JSON.stringify(value).replace(
    /[^\x20-\x7e]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** The value of a JSON header, or undefined when absent or not JSON. */
export function decodeJsonHeader(text: string | null | undefined): unknown {
  if (text === undefined || text === null) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
