export { expandInputs, type InputFile } from './compress/inputs.ts';
export { outputPathFor } from './compress/outputs.ts';
export { type CompressReport, compressFiles, type FileError, type FileResult } from './compress/run.ts';
export {
  type CliContext,
  type CliIO,
  cliContext,
  EXIT_FAILED,
  EXIT_OK,
  EXIT_USAGE,
  type OutputStream,
  UsageError,
} from './context.ts';
export { createProgram, processIO, run, VERSION } from './program.ts';
