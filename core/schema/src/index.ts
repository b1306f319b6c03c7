export {
  type ApiKey,
  type ApiKeyList,
  ApiKeyListSchema,
  ApiKeySchema,
  BATCH_ITEM_STATUSES,
  BATCH_STATUSES,
  BATCH_URL_MAX,
  type BatchItem,
  BatchItemSchema,
  type BatchJob,
  BatchJobSchema,
  type CreatedApiKey,
  CreatedApiKeySchema,
  type CreateKeyRequest,
  CreateKeyRequestSchema,
  HealthSchema,
  KEY_NAME_MAX,
  ReadySchema,
  type RevokedApiKey,
  RevokedApiKeySchema,
  type UrlBatchRequest,
  UrlBatchRequestSchema,
  type Usage,
  UsageSchema,
} from './bodies.ts';
export {
  CONTRACT_FORMAT,
  CONTRACT_SCHEMAS,
  type ContractSchemaName,
  contractDocument,
  contractJsonSchema,
  ROUTE_BODIES,
  type RouteBodies,
  schemaNameOf,
} from './contract.ts';
export {
  CompressoError,
  type CompressoErrorInit,
  type ErrorBody,
  ErrorBodySchema,
  ErrorCodeSchema,
  type ErrorDetails,
  ErrorDetailsSchema,
  type FieldProblem,
  FieldProblemSchema,
  fieldProblems,
  isCompressoError,
} from './errors.ts';
export { InputFormatSchema, OutputFormatSchema } from './format-schemas.ts';
export { jsonSchemaOf, openApiComponents, PUBLIC_SCHEMAS, type PublicSchemaName } from './json-schema.ts';
export {
  COMPRESS_OPTION_FIELDS,
  type CompressOptions,
  type CompressOptionsInput,
  CompressOptionsSchema,
  isParsedCompressOptions,
  parseCompressOptions,
} from './options.ts';
export { type ImageInspection, ImageInspectionSchema, type InfoResult, InfoResultSchema } from './results.ts';
export * from './wire.ts';
