/**
 * The part of the contract that is plain data and small functions, with no import of zod or of
 * anything else: the Node client builds these files into its own output, so the published client
 * follows the table with no runtime dependency. Everything here is also exported by the package's
 * main entry.
 */

export {
  AI_MODELS,
  AI_PROVIDERS,
  type AiModel,
  type AiProviderName,
  ALT_CONTEXT_MAX,
  ALT_TEXT_MAX,
  ALT_TEXT_SOURCES,
  type AltTextSource,
  ASPECT_RATIO_MAX,
  DEFAULT_AI_MODEL,
  DEFAULT_ASPECT_RATIO,
  decodeJsonHeader,
  EDIT_OPERATION_KINDS,
  type EditOperationKind,
  encodeJsonHeader,
  INSTRUCTION_MAX,
  PROMPT_MAX,
  parseAspectRatio,
} from './ai-table.ts';
export { BODY_MEMBERS, type BodyName } from './body-members.ts';
export {
  CLIENT_ERROR_CODES,
  type ClientErrorCode,
  ERROR_CODES,
  ERROR_STATUS,
  type ErrorCode,
  isErrorCode,
  statusOf,
} from './error-codes.ts';
export {
  defaultOutputFormat,
  FILE_EXTENSIONS,
  INPUT_EXTENSIONS,
  INPUT_FORMATS,
  INPUT_MIME_TYPES,
  type InputExtension,
  type InputFormat,
  MIME_TYPES,
  normalizeOutputFormat,
  OUTPUT_FORMATS,
  type OutputFormat,
} from './formats.ts';
export {
  COMPRESS_OPTION_NAMES,
  COMPRESS_OPTIONS,
  type CompressOptionName,
  DEFAULT_QUALITY,
  MAX_DIMENSION_LIMIT,
  type OptionKind,
  type OptionSpec,
  QUALITY_MAX,
  QUALITY_MIN,
} from './option-table.ts';
export {
  decodeResultHeader,
  decodeResultHeaders,
  encodeResultHeaders,
  type HeaderValueType,
  RESULT_FIELDS_NOT_IN_HEADERS,
  RESULT_HEADER_FIELDS,
  RESULT_HEADERS,
  type ResultHeaderField,
  type ResultHeaderSpec,
  resultClientName,
  resultHeaderName,
} from './result-headers.ts';
export {
  API_HEADERS,
  API_ROUTES,
  type ApiHeaderName,
  expressPath,
  type HttpMethod,
  type RequestKind,
  type ResponseKind,
  ROUTE_IDS,
  type RouteAuth,
  type RouteId,
  type RouteSpec,
  routePath,
} from './routes.ts';

/** One problem with one field of a request: the shape of every `details` entry naming a field. */
export interface FieldProblem {
  field: string;
  expected: string;
  received: string;
}
