// Imports nothing: built into the Node client (see error-codes.ts).

export type HeaderValueType = 'integer' | 'number' | 'boolean' | 'string';

export interface ResultHeaderSpec {
  /** How the value is written as text and read back. */
  type: HeaderValueType;
  /** Sent on every compress answer; an optional fact is sent only when the engine reports it. */
  required: boolean;
  /** The Node client's name for the fact, when it is not the camelCase of the wire name. */
  client?: string;
  /** For a closed set of words: the words; anything else reads as absent. */
  values?: readonly string[];
}

/**
 * The facts of an InfoResult that `/api/v1/compress` (and `/info`) also send as `X-*` response
 * headers, so a client that streams the bytes to disk still gets them. Keyed by the InfoResult
 * member; the header name is derived (`input_size` → `X-Input-Size`). `frames` is the one member not
 * sent: schema's test checks that every other member of InfoResultSchema is here with its type and
 * optionality, so a new result field cannot be left out of the headers.
 */
export const RESULT_HEADERS = {
  input_size: { type: 'integer', required: true },
  output_size: { type: 'integer', required: true },
  savings_percent: { type: 'number', required: true },
  width: { type: 'integer', required: true },
  height: { type: 'integer', required: true },
  input_width: { type: 'integer', required: true },
  input_height: { type: 'integer', required: true },
  input_format: { type: 'string', required: true },
  output_format: { type: 'string', required: true, client: 'format' },
  quality: { type: 'integer', required: true },
  auto_quality: { type: 'boolean', required: true },
  optimized: { type: 'boolean', required: true },
  metadata_stripped: { type: 'boolean', required: true },
  score: { type: 'number', required: false },
  chroma_subsampling: { type: 'string', required: false, values: ['4:2:0', '4:4:4'] },
  lossless: { type: 'boolean', required: false },
  near_lossless: { type: 'boolean', required: false },
  effort: { type: 'integer', required: false },
  auto_steps: { type: 'integer', required: false },
} as const satisfies Record<string, ResultHeaderSpec>;

export type ResultHeaderField = keyof typeof RESULT_HEADERS;

export const RESULT_HEADER_FIELDS = Object.keys(RESULT_HEADERS) as ResultHeaderField[];

/** InfoResult members that are not sent as headers, and why (checked by schema's test). */
export const RESULT_FIELDS_NOT_IN_HEADERS = {
  frames: 'the compressed answer is the image itself; its frame count is not a size fact a caller needs',
} as const;

/** `input_size` → `X-Input-Size`. */
export function resultHeaderName(field: string): string {
  return `X-${field
    .split('_')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('-')}`;
}

/** `input_size` → `inputSize`; `output_format` → `format` (the client's own name). */
export function resultClientName(field: ResultHeaderField): string {
  const spec: ResultHeaderSpec = RESULT_HEADERS[field];
  return spec.client ?? field.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
}

/** The headers of one result, in table order; optional facts the result lacks are left out. */
export function encodeResultHeaders(result: Readonly<Record<string, unknown>>): [string, string][] {
  const headers: [string, string][] = [];
  for (const field of RESULT_HEADER_FIELDS) {
    const value = result[field];
    if (value === undefined || value === null) continue;
    headers.push([resultHeaderName(field), String(value)]);
  }
  return headers;
}

/**
 * One header's text back to its value; undefined when the header is absent or does not hold a value
 * of its type (a number that is not finite, a boolean that is neither `true` nor `false`).
 */
export function decodeResultHeader(field: ResultHeaderField, text: string | undefined): unknown {
  if (text === undefined) return undefined;
  const spec: ResultHeaderSpec = RESULT_HEADERS[field];
  switch (spec.type) {
    case 'integer':
    case 'number': {
      const value = Number(text);
      return text.trim() !== '' && Number.isFinite(value) ? value : undefined;
    }
    case 'boolean':
      return text === 'true' ? true : text === 'false' ? false : undefined;
    default:
      return spec.values && !spec.values.includes(text) ? undefined : text;
  }
}

/**
 * Every fact the headers carry, keyed by the InfoResult member, read from lower-case header names
 * (as Node and fetch give them). `missing` lists required facts that were absent or malformed.
 */
export function decodeResultHeaders(headers: Readonly<Record<string, string | undefined>>): {
  values: Partial<Record<ResultHeaderField, unknown>>;
  missing: ResultHeaderField[];
} {
  const values: Partial<Record<ResultHeaderField, unknown>> = {};
  const missing: ResultHeaderField[] = [];
  for (const field of RESULT_HEADER_FIELDS) {
    const value = decodeResultHeader(field, headers[resultHeaderName(field).toLowerCase()]);
    if (value !== undefined) values[field] = value;
    else if (RESULT_HEADERS[field].required) missing.push(field);
  }
  return { values, missing };
}
