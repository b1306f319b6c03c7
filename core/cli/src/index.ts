export { contextOf, type RunContext } from './context.ts';
export { type CliIo, type CliOutput, processIo } from './io.ts';
export { COMMANDS, type CommandModule, createProgram, run, VERSION } from './program.ts';
export type { FileFailure, FileResult, RunReport, Totals } from './report.ts';
export { formatBytes } from './report.ts';
export { EXIT_FAILURES, EXIT_OK, EXIT_USAGE, UsageError } from './usage-error.ts';
