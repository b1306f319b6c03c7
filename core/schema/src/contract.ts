import { z } from 'zod';
import {
  AltTextFormSchema,
  AltTextResultSchema,
  EditFormSchema,
  EditOperationSchema,
  GenerateRequestSchema,
  ImageFactsSchema,
} from './ai-bodies.ts';
import {
  AI_MODELS,
  AI_PROVIDERS,
  ALT_TEXT_MAX,
  ALT_TEXT_SOURCES,
  DEFAULT_AI_MODEL,
  DEFAULT_ASPECT_RATIO,
  EDIT_OPERATION_KINDS,
  INSTRUCTION_MAX,
  PROMPT_MAX,
} from './ai-table.ts';
import {
  ApiKeyListSchema,
  ApiKeySchema,
  BatchJobSchema,
  CreatedApiKeySchema,
  CreateKeyRequestSchema,
  HealthSchema,
  OperatorAccountRequestSchema,
  ProvisionedAccountSchema,
  ReadySchema,
  RevokedApiKeySchema,
  UrlBatchRequestSchema,
  UsageSchema,
} from './bodies.ts';
import { CLIENT_ERROR_CODES, ERROR_STATUS } from './error-codes.ts';
import { ErrorBodySchema, FieldProblemSchema } from './errors.ts';
import { FILE_EXTENSIONS, INPUT_EXTENSIONS, INPUT_FORMATS, MIME_TYPES, OUTPUT_FORMATS } from './formats.ts';
import { COMPRESS_OPTIONS, DEFAULT_QUALITY, MAX_DIMENSION_LIMIT } from './option-table.ts';
import { CompressOptionsSchema } from './options.ts';
import {
  RESULT_FIELDS_NOT_IN_HEADERS,
  RESULT_HEADERS,
  type ResultHeaderField,
  resultClientName,
  resultHeaderName,
} from './result-headers.ts';
import { ImageInspectionSchema, InfoResultSchema } from './results.ts';
import { API_HEADERS, API_ROUTES, type RouteId } from './routes.ts';

export interface RouteBodies {
  /** The JSON body a request sends, when it sends one. */
  json?: z.ZodType;
  /** The JSON body of a success, when it is JSON. */
  response?: z.ZodType;
  /**
   * The text fields of a multipart (`image-form`) request beside its `file` part, when they are not
   * the CompressOptions.
   */
  form?: z.ZodObject;
}

/**
 * The bodies of every route of API_ROUTES: one entry per route, so a route added to the table
 * without its bodies does not type-check. Multipart requests (`image-form`, `batch`) carry the
 * CompressOptions fields beside their `file` parts.
 */
export const ROUTE_BODIES = {
  compress: {},
  info: { response: InfoResultSchema },
  createKey: { json: CreateKeyRequestSchema, response: CreatedApiKeySchema },
  listKeys: { response: ApiKeyListSchema },
  revokeKey: { response: RevokedApiKeySchema },
  usage: { response: UsageSchema },
  createJob: { json: UrlBatchRequestSchema, response: BatchJobSchema },
  getJob: { response: BatchJobSchema },
  getJobItem: {},
  createOperatorAccount: { json: OperatorAccountRequestSchema, response: ProvisionedAccountSchema },
  generate: { json: GenerateRequestSchema },
  edit: { form: EditFormSchema },
  altText: { form: AltTextFormSchema, response: AltTextResultSchema },
  openapi: { response: z.record(z.string(), z.unknown()).describe('OpenAPI 3.1.') },
  docs: {},
  healthz: { response: HealthSchema },
  readyz: { response: ReadySchema },
} as const satisfies Record<RouteId, RouteBodies>;

/** The named schemas of the contract, as the OpenAPI components and the JSON export name them. */
export const CONTRACT_SCHEMAS = {
  CompressOptions: CompressOptionsSchema,
  InfoResult: InfoResultSchema,
  ImageInspection: ImageInspectionSchema,
  ErrorBody: ErrorBodySchema,
  FieldProblem: FieldProblemSchema,
  CreateKeyRequest: CreateKeyRequestSchema,
  ApiKey: ApiKeySchema,
  CreatedApiKey: CreatedApiKeySchema,
  ApiKeyList: ApiKeyListSchema,
  RevokedApiKey: RevokedApiKeySchema,
  OperatorAccountRequest: OperatorAccountRequestSchema,
  ProvisionedAccount: ProvisionedAccountSchema,
  Usage: UsageSchema,
  UrlBatchRequest: UrlBatchRequestSchema,
  BatchJob: BatchJobSchema,
  Health: HealthSchema,
  Ready: ReadySchema,
  GenerateRequest: GenerateRequestSchema,
  EditForm: EditFormSchema,
  EditOperation: EditOperationSchema,
  AltTextForm: AltTextFormSchema,
  AltTextResult: AltTextResultSchema,
  ImageFacts: ImageFactsSchema,
} as const;

export type ContractSchemaName = keyof typeof CONTRACT_SCHEMAS;

/** The component name of a route body, when it is one of CONTRACT_SCHEMAS. */
export function schemaNameOf(schema: z.ZodType | undefined): ContractSchemaName | undefined {
  if (!schema) return undefined;
  for (const [name, candidate] of Object.entries(CONTRACT_SCHEMAS)) {
    if (candidate === schema) return name as ContractSchemaName;
  }
  return undefined;
}

/** Options are exported as input (what a client sends), everything else as output. */
const INPUT_SCHEMAS = new Set<ContractSchemaName>([
  'CompressOptions',
  'CreateKeyRequest',
  'OperatorAccountRequest',
  'UrlBatchRequest',
  'GenerateRequest',
  'EditForm',
  'AltTextForm',
]);

export function contractJsonSchema(name: ContractSchemaName): Record<string, unknown> {
  const { $schema: _ignored, ...schema } = z.toJSONSchema(CONTRACT_SCHEMAS[name], {
    io: INPUT_SCHEMAS.has(name) ? 'input' : 'output',
    target: 'draft-2020-12',
  }) as Record<string, unknown>;
  return schema;
}

/** Version of the export's layout; bumped when a member changes meaning. */
export const CONTRACT_FORMAT = 1;

/**
 * The whole contract as plain JSON, for consumers that are not TypeScript (the Python tests, the PHP
 * client, the WordPress admin): the JSON Schemas, every route with its bodies (as component names),
 * the result headers with their codec, the API headers, the server's and the clients' error codes,
 * the options with their bounds, and the formats and input extensions. `npm run build -w
 * @compresso/schema` writes it to `core/schema/dist/contract.json`.
 */
export function contractDocument(): Record<string, unknown> {
  const schemas: Record<string, Record<string, unknown>> = {};
  for (const name of Object.keys(CONTRACT_SCHEMAS) as ContractSchemaName[]) {
    schemas[name] = contractJsonSchema(name);
  }
  const routes = Object.fromEntries(
    (Object.keys(API_ROUTES) as RouteId[]).map((id) => {
      const bodies: RouteBodies = ROUTE_BODIES[id];
      return [
        id,
        {
          ...API_ROUTES[id],
          json_request: schemaNameOf(bodies.json) ?? null,
          json_response: schemaNameOf(bodies.response) ?? null,
          form_fields:
            schemaNameOf(bodies.form) ?? (API_ROUTES[id].request === 'image-form' ? 'CompressOptions' : null),
        },
      ];
    }),
  );
  const resultHeaders = Object.fromEntries(
    (Object.keys(RESULT_HEADERS) as ResultHeaderField[]).map((field) => [
      field,
      {
        header: resultHeaderName(field),
        client: resultClientName(field),
        ...RESULT_HEADERS[field],
      },
    ]),
  );
  return {
    format: CONTRACT_FORMAT,
    schemas,
    routes,
    result_headers: resultHeaders,
    result_fields_not_in_headers: Object.keys(RESULT_FIELDS_NOT_IN_HEADERS),
    api_headers: API_HEADERS,
    options: COMPRESS_OPTIONS,
    error_status: ERROR_STATUS,
    client_error_codes: CLIENT_ERROR_CODES,
    output_formats: OUTPUT_FORMATS,
    input_formats: INPUT_FORMATS,
    input_extensions: INPUT_EXTENSIONS,
    file_extensions: FILE_EXTENSIONS,
    mime_types: MIME_TYPES,
    ai: {
      models: AI_MODELS,
      providers: AI_PROVIDERS,
      default_model: DEFAULT_AI_MODEL,
      default_aspect_ratio: DEFAULT_ASPECT_RATIO,
      prompt_max: PROMPT_MAX,
      instruction_max: INSTRUCTION_MAX,
      alt_text_max: ALT_TEXT_MAX,
      alt_text_sources: ALT_TEXT_SOURCES,
      edit_operations: EDIT_OPERATION_KINDS,
    },
    default_quality: DEFAULT_QUALITY,
    max_dimension_limit: MAX_DIMENSION_LIMIT,
  };
}
