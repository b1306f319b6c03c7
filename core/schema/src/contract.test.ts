import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  API_ROUTES,
  ApiKeySchema,
  BatchItemSchema,
  BatchJobSchema,
  BODY_MEMBERS,
  COMPRESS_OPTIONS,
  CompressOptionsSchema,
  CreatedApiKeySchema,
  contractDocument,
  decodeResultHeaders,
  encodeResultHeaders,
  fieldProblems,
  InfoResultSchema,
  jsonSchemaOf,
  RESULT_FIELDS_NOT_IN_HEADERS,
  RESULT_HEADERS,
  RevokedApiKeySchema,
  ROUTE_BODIES,
  resultClientName,
  resultHeaderName,
  UrlBatchRequestSchema,
  UsageSchema,
} from './index.ts';

type JsonProp = { type?: string; enum?: unknown[]; anyOf?: JsonProp[]; minimum?: number; maximum?: number };

describe('the result-header codec follows InfoResultSchema', () => {
  const info = jsonSchemaOf('InfoResult') as { properties: Record<string, JsonProp>; required: string[] };

  it('every InfoResult member is a header (or listed as not one), with its type and optionality', () => {
    const members = Object.keys(info.properties);
    expect([...Object.keys(RESULT_HEADERS), ...Object.keys(RESULT_FIELDS_NOT_IN_HEADERS)].sort()).toEqual(
      [...members].sort(),
    );
    for (const [field, spec] of Object.entries(RESULT_HEADERS)) {
      const prop = info.properties[field]!;
      const type = prop.enum ? 'string' : prop.type;
      expect(spec.type, field).toBe(type);
      expect(spec.required, field).toBe(info.required.includes(field));
      if ('values' in spec) expect(spec.values, field).toEqual(prop.enum);
    }
  });

  it('names are derived, unique, and round-trip', () => {
    expect(resultHeaderName('input_size')).toBe('X-Input-Size');
    expect(resultHeaderName('chroma_subsampling')).toBe('X-Chroma-Subsampling');
    expect(resultClientName('output_format')).toBe('format');
    expect(resultClientName('metadata_stripped')).toBe('metadataStripped');
    const names = Object.keys(RESULT_HEADERS).map(resultHeaderName);
    expect(new Set(names.map((n) => n.toLowerCase())).size).toBe(names.length);
    const result = InfoResultSchema.parse({
      input_size: 1000,
      output_size: 400,
      savings_percent: 60,
      input_format: 'png',
      output_format: 'webp',
      input_width: 10,
      input_height: 20,
      width: 10,
      height: 20,
      quality: 80,
      auto_quality: false,
      optimized: true,
      metadata_stripped: true,
      frames: 1,
      lossless: false,
      effort: 4,
    });
    const encoded = encodeResultHeaders(result);
    const lower = Object.fromEntries(encoded.map(([name, value]) => [name.toLowerCase(), value]));
    const { values, missing } = decodeResultHeaders(lower);
    expect(missing).toEqual([]);
    const { frames: _frames, ...sent } = result;
    expect(values).toEqual(sent);
    expect(decodeResultHeaders({}).missing).toEqual(
      Object.entries(RESULT_HEADERS)
        .filter(([, spec]) => spec.required)
        .map(([field]) => field),
    );
  });
});

describe('the option table is what CompressOptionsSchema validates', () => {
  it('same fields in the same order, same bounds and defaults', () => {
    expect(Object.keys(CompressOptionsSchema.shape)).toEqual(Object.keys(COMPRESS_OPTIONS));
    const json = jsonSchemaOf('CompressOptions', 'input') as { properties: Record<string, JsonProp> };
    const defaults: Record<string, unknown> = CompressOptionsSchema.parse({});
    for (const [name, spec] of Object.entries(COMPRESS_OPTIONS)) {
      const prop = json.properties[name]!;
      expect(defaults[name], name).toEqual('default' in spec ? spec.default : undefined);
      if ('max' in spec) {
        const integer = prop.anyOf?.find((p) => p.type === 'integer');
        expect([integer?.minimum, integer?.maximum], name).toEqual([spec.min, spec.max]);
      }
    }
  });
});

describe('routes', () => {
  it('every route has its bodies, a unique method and path, and an auth', () => {
    expect(Object.keys(ROUTE_BODIES).sort()).toEqual(Object.keys(API_ROUTES).sort());
    const seen = new Set(Object.values(API_ROUTES).map((r) => `${r.method} ${r.path}`));
    expect(seen.size).toBe(Object.keys(API_ROUTES).length);
    for (const route of Object.values(API_ROUTES)) {
      expect(['key', 'none', 'optional', 'operator']).toContain(route.auth);
      expect(route.path).toMatch(/^\/[a-z0-9/{}._-]*$/);
    }
  });

  it('zod issues become FieldProblems naming the path as sent', () => {
    const body = { urls: ['https://a.example/x.png', 5] };
    const parsed = UrlBatchRequestSchema.safeParse(body);
    expect(parsed.success).toBe(false);
    const problems = fieldProblems(parsed.error?.issues ?? [], body);
    expect(problems).toEqual([{ field: 'urls[1]', expected: expect.any(String), received: '5' }]);
  });
});

describe('the body member lists the clients map answers through', () => {
  const BODIES: Record<keyof typeof BODY_MEMBERS, { shape: Record<string, unknown> }> = {
    Usage: UsageSchema,
    ApiKey: ApiKeySchema,
    CreatedApiKey: CreatedApiKeySchema,
    RevokedApiKey: RevokedApiKeySchema,
    BatchJob: BatchJobSchema,
    BatchJobProgress: BatchJobSchema.shape.progress,
    BatchItem: BatchItemSchema,
  };
  it.each(Object.keys(BODY_MEMBERS) as (keyof typeof BODY_MEMBERS)[])(
    "%s: exactly its schema's members",
    (name) => {
      expect([...BODY_MEMBERS[name]].sort()).toEqual(Object.keys(BODIES[name].shape).sort());
    },
  );
});

describe('the parts the Node client builds in import nothing', () => {
  // The client compiles these files into its own dist (scripts/build.mjs there): an import of zod
  // or of a file outside this list would become a runtime dependency of the published client.
  const WIRE_FILES = [
    'wire.ts',
    'ai-table.ts',
    'body-members.ts',
    'error-codes.ts',
    'formats.ts',
    'option-table.ts',
    'result-headers.ts',
    'routes.ts',
  ];
  it.each(WIRE_FILES)('%s', (file) => {
    const text = readFileSync(new URL(`./${file}`, import.meta.url), 'utf8');
    const specifiers = [...text.matchAll(/from\s+'([^']+)'/g)].map((m) => m[1]!);
    for (const specifier of specifiers)
      expect(WIRE_FILES, `${file} imports ${specifier}`).toContain(specifier.slice(2));
  });
});

describe('the JSON export', () => {
  it('is plain JSON holding every route, header, code, option and schema', () => {
    const doc = JSON.parse(JSON.stringify(contractDocument())) as Record<string, Record<string, unknown>>;
    expect(Object.keys(doc.routes!)).toEqual(Object.keys(API_ROUTES));
    expect(Object.keys(doc.result_headers!)).toEqual(Object.keys(RESULT_HEADERS));
    expect(doc.result_headers!.input_size).toMatchObject({ header: 'X-Input-Size', client: 'inputSize' });
    expect(doc.routes!.createKey).toMatchObject({
      json_request: 'CreateKeyRequest',
      json_response: 'CreatedApiKey',
    });
    expect(Object.keys(doc.options!)).toEqual(Object.keys(COMPRESS_OPTIONS));
    expect(doc.client_error_codes).toHaveProperty('CONNECTION_ERROR');
    expect(doc.schemas).toHaveProperty('BatchJob');
  });
});
