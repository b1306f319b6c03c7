export {
  BASE_URL_ENV,
  describeError,
  errorBody,
  errorResult,
  KEY_ENV,
  setupSteps,
  type ToolErrorBody,
} from './errors.ts';
export { checkInputFile, checkOutputDir, checkOutputPath, sniffImage } from './paths.ts';
export {
  compressBatchInput,
  compressBatchOutput,
  compressImageInput,
  compressImageOutput,
  IMAGE_CONTENT_LIMIT,
  imageInfoInput,
  imageInfoOutput,
  MAX_BATCH_FILES,
  usageOutput,
} from './schemas.ts';
export { type CompressoMcpOptions, createCompressoMcpServer, JOB_THRESHOLD } from './server.ts';
export { ToolError } from './tool-error.ts';
export { VERSION } from './version.ts';
