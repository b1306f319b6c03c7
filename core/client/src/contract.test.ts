import { readdirSync, readFileSync } from 'node:fs';
import {
  type BODY_MEMBERS,
  CLIENT_ERROR_CODES,
  type COMPRESS_OPTIONS,
  ERROR_CODES,
  ERROR_STATUS,
  ErrorBodySchema,
  INPUT_FORMATS,
  OUTPUT_FORMATS,
  RESULT_HEADERS,
  resultClientName,
  type AltTextResult as SchemaAltTextResult,
  type ApiKey as SchemaApiKey,
  type BatchItem as SchemaBatchItem,
  type BatchJob as SchemaBatchJob,
  type CreatedApiKey as SchemaCreatedApiKey,
  type EditOperation as SchemaEditOperation,
  type ImageFacts as SchemaImageFacts,
  type InfoResult as SchemaInfoResult,
  type InputFormat as SchemaInputFormat,
  type OutputFormat as SchemaOutputFormat,
  type RevokedApiKey as SchemaRevokedApiKey,
  type Usage as SchemaUsage,
} from '@compresso/schema';
import { describe, expect, it } from 'vitest';
import { BY_CLIENT_CODE, BY_CODE, CompressoError, errorFromResponse } from './errors.ts';
import {
  AuthenticationError,
  BadRequestError,
  NotFoundError,
  PermissionError,
  RateLimitError,
  ServerError,
  TimeoutError,
  TooLargeError,
  UnsupportedImageError,
  VERSION,
} from './index.ts';
import { EXTENSIONS } from './output.ts';
import type {
  AltTextResult,
  ApiKey,
  CompressResult,
  CreatedApiKey,
  EditOperation,
  ImageFacts,
  ImageOptions,
  InfoResult,
  InputFormat,
  Job,
  JobItem,
  JobProgress,
  OutputFormat,
  RevokedApiKey,
  Usage,
} from './types.ts';

/**
 * The client spells the contract out itself (its declarations must stand alone), so these checks
 * fail the build when @compresso/schema changes and the client does not follow.
 */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const infoResultMatches: Equal<InfoResult, SchemaInfoResult> = true;
const outputFormatsMatch: Equal<OutputFormat, SchemaOutputFormat> = true;
const inputFormatsMatch: Equal<InputFormat, SchemaInputFormat> = true;

/**
 * The option table's client names are exactly ImageOptions' (filename aside), and every fact of the
 * result-header table is a member of CompressResult under its client name: an option or a header
 * added to the table without the client's types following does not type-check.
 */
type Camel<S extends string> = S extends `${infer A}_${infer B}` ? `${A}${Capitalize<Camel<B>>}` : S;
type ClientNameOf<F extends keyof typeof RESULT_HEADERS> = F extends unknown
  ? (typeof RESULT_HEADERS)[F] extends { client: infer C extends string }
    ? C
    : Camel<F>
  : never;
type OptionClientNames = (typeof COMPRESS_OPTIONS)[keyof typeof COMPRESS_OPTIONS]['client'];
const optionsMatch: Equal<Exclude<keyof ImageOptions, 'filename'>, OptionClientNames> = true;
const resultCarriesEveryHeader: Equal<
  Exclude<ClientNameOf<keyof typeof RESULT_HEADERS>, keyof CompressResult>,
  never
> = true;

/**
 * The keys, usage and job bodies: the client's camelCase types are the schema's bodies with their
 * member names camelCased (values too, where the client keeps the schema's types), so a member added to
 * or renamed in a body of the table does not type-check until the client follows. JobItem says
 * `format` for the body's `output_format`, as CompressResult does.
 */
type CamelObject<T> = { [K in keyof T as Camel<K & string>]: T[K] };
const usageMatches: Equal<Usage, CamelObject<SchemaUsage>> = true;
const apiKeyMatches: Equal<ApiKey, CamelObject<SchemaApiKey>> = true;
const createdKeyMatches: Equal<CreatedApiKey, CamelObject<SchemaCreatedApiKey>> = true;
const revokedKeyMatches: Equal<RevokedApiKey, CamelObject<SchemaRevokedApiKey>> = true;
const jobMembersMatch: Equal<keyof Job, Camel<keyof SchemaBatchJob & string>> = true;
const editOperationMatches: Equal<EditOperation, SchemaEditOperation> = true;
const imageFactsMatch: Equal<ImageFacts, CamelObject<SchemaImageFacts>> = true;
const altTextMembersMatch: Equal<keyof AltTextResult, keyof SchemaAltTextResult> = true;
const jobProgressMatches: Equal<JobProgress, CamelObject<SchemaBatchJob['progress']>> = true;
const jobItemMembersMatch: Equal<
  keyof JobItem,
  Exclude<Camel<keyof SchemaBatchItem & string>, 'outputFormat'> | 'format'
> = true;

/**
 * bodyFromWire maps answers through the contract's body lists (BODY_MEMBERS): the lists camelCased
 * are exactly the members of the client's types, so every member the client declares is filled in.
 */
type Members<N extends keyof typeof BODY_MEMBERS> = Camel<(typeof BODY_MEMBERS)[N][number]>;
const bodyListsMatch: [
  Equal<Members<'Usage'>, keyof Usage>,
  Equal<Members<'ApiKey'>, keyof ApiKey>,
  Equal<Members<'CreatedApiKey'>, keyof CreatedApiKey>,
  Equal<Members<'RevokedApiKey'>, keyof RevokedApiKey>,
  Equal<Members<'BatchJob'>, keyof Job>,
  Equal<Members<'BatchJobProgress'>, keyof JobProgress>,
  Equal<Exclude<Members<'BatchItem'>, 'outputFormat'> | 'format', keyof JobItem>,
] = [true, true, true, true, true, true, true];

const CLASS_BY_STATUS: Record<number, unknown> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionError,
  404: NotFoundError,
  405: BadRequestError,
  408: TimeoutError,
  409: BadRequestError,
  413: TooLargeError,
  415: UnsupportedImageError,
  422: UnsupportedImageError,
  429: RateLimitError,
};
/** Codes whose class is not their status family's, each for a reason given in errors.ts. */
const CLASS_BY_CODE: Record<string, unknown> = {
  URL_FETCH_FAILED: BadRequestError,
  IDEMPOTENCY_KEY_REUSED: BadRequestError,
  CONTENT_POLICY_VIOLATION: BadRequestError,
  INSTRUCTION_NOT_UNDERSTOOD: BadRequestError,
};

describe('the client follows @compresso/schema', () => {
  it('types: InfoResult and the formats are the same as the schema’s', () => {
    expect([infoResultMatches, outputFormatsMatch, inputFormatsMatch]).toEqual([true, true, true]);
    expect(Object.keys(EXTENSIONS).sort()).toEqual([...OUTPUT_FORMATS].sort());
    expect(INPUT_FORMATS.length).toBeGreaterThan(OUTPUT_FORMATS.length);
  });

  it('options and result facts follow the tables (types above; names at run time)', () => {
    expect([optionsMatch, resultCarriesEveryHeader]).toEqual([true, true]);
    const names = (Object.keys(RESULT_HEADERS) as (keyof typeof RESULT_HEADERS)[]).map(resultClientName);
    expect(names).toContain('format');
    expect(names).toContain('inputSize');
  });

  it('keys, usage and job bodies are the schema’s, camelCased (types above)', () => {
    expect([
      usageMatches,
      apiKeyMatches,
      createdKeyMatches,
      revokedKeyMatches,
      jobMembersMatch,
      jobProgressMatches,
      jobItemMembersMatch,
    ]).toEqual([true, true, true, true, true, true, true]);
    expect(bodyListsMatch.every(Boolean)).toBe(true);
  });

  it('the AI bodies are the schema’s: edit operations exactly, alt text camelCased (types above)', () => {
    expect([editOperationMatches, imageFactsMatch, altTextMembersMatch]).toEqual([true, true, true]);
  });

  it('every client-side code of the table has its class, and the client throws no code outside the tables', () => {
    expect(Object.keys(BY_CLIENT_CODE).sort()).toEqual(Object.keys(CLIENT_ERROR_CODES).sort());
    for (const Class of Object.values(BY_CLIENT_CODE)) {
      expect(new Class('X', 'm')).toBeInstanceOf(CompressoError);
    }
    const thrown = new Set<string>();
    for (const file of readdirSync(new URL('.', import.meta.url))) {
      if (!file.endsWith('.ts') || file.endsWith('.test.ts') || file.startsWith('test-')) continue;
      const text = readFileSync(new URL(file, import.meta.url), 'utf8');
      for (const m of text.matchAll(/new (\w*Error)\(\s*'([A-Z][A-Z_]+)'/g)) thrown.add(m[2]!);
    }
    expect(thrown.size).toBeGreaterThan(5);
    for (const code of thrown) {
      expect(Object.hasOwn(ERROR_STATUS, code) || Object.hasOwn(CLIENT_ERROR_CODES, code), code).toBe(true);
    }
  });

  it('every error code of the schema has its class, matching its status', () => {
    for (const code of ERROR_CODES) {
      const status = ERROR_STATUS[code];
      expect(BY_CODE[code], code).toBeDefined();
      const expected = CLASS_BY_CODE[code] ?? (status >= 500 ? ServerError : CLASS_BY_STATUS[status]);
      expect(BY_CODE[code], `${code} (${status})`).toBe(expected);
      const body = new TextEncoder().encode(
        JSON.stringify({ error: { code, message: `m ${code}`, request_id: 'r1' } }),
      );
      const error = errorFromResponse(status, {}, body);
      expect(error).toBeInstanceOf(expected as typeof ServerError);
      expect([error.code, error.status, error.requestId, error.message]).toEqual([
        code,
        status,
        'r1',
        `m ${code}`,
      ]);
      // The error can be passed on in the server's own wire shape.
      expect(ErrorBodySchema.parse(error.toJSON()).error.code).toBe(code);
    }
  });

  it('a code the client does not know falls back to its status', () => {
    const error = errorFromResponse(
      418,
      {},
      new TextEncoder().encode(JSON.stringify({ error: { code: 'TEAPOT', message: 'short and stout' } })),
    );
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.code).toBe('TEAPOT');
    expect(errorFromResponse(504, {}, new Uint8Array())).toBeInstanceOf(ServerError);
  });

  it("VERSION is package.json's version", () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(VERSION).toBe(pkg.version);
  });
});
