export {
  CompressoError,
  type CompressoErrorInit,
  ERROR_CODES,
  ERROR_STATUS,
  type ErrorBody,
  ErrorBodySchema,
  type ErrorCode,
  ErrorCodeSchema,
  type FieldProblem,
  FieldProblemSchema,
  isCompressoError,
  isErrorCode,
  statusOf,
} from './errors.ts';
export {
  defaultOutputFormat,
  FILE_EXTENSIONS,
  INPUT_FORMATS,
  type InputFormat,
  InputFormatSchema,
  MIME_TYPES,
  normalizeOutputFormat,
  OUTPUT_FORMATS,
  type OutputFormat,
  OutputFormatSchema,
} from './formats.ts';
export { jsonSchemaOf, openApiComponents, PUBLIC_SCHEMAS, type PublicSchemaName } from './json-schema.ts';
export {
  COMPRESS_OPTION_FIELDS,
  type CompressOptions,
  type CompressOptionsInput,
  CompressOptionsSchema,
  DEFAULT_QUALITY,
  MAX_DIMENSION_LIMIT,
  parseCompressOptions,
} from './options.ts';
export { type ImageInspection, ImageInspectionSchema, type InfoResult, InfoResultSchema } from './results.ts';
