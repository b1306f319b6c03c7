import type { Command } from 'commander';

/** The part of a stream the CLI writes to; process.stdout/stderr and test buffers both fit. */
export interface OutputStream {
  write(chunk: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/**
 * Everything a command touches outside itself. Commands never reach for `process` directly, so the
 * whole CLI runs in-process from tests with captured output, a chosen working directory and no exit.
 */
export interface CliIO {
  stdout: OutputStream;
  stderr: OutputStream;
  /** Directory relative inputs and outputs are resolved against. */
  cwd: string;
  env: Record<string, string | undefined>;
}

export interface CliContext {
  io: CliIO;
  /** The process exit code the run ends with; commands raise it, never lower it. */
  exitCode: number;
}

const contexts = new WeakMap<Command, CliContext>();

export function attachContext(program: Command, context: CliContext): void {
  contexts.set(program, context);
}

/** The context of the program a (sub)command belongs to. */
export function cliContext(command: Command): CliContext {
  let root: Command = command;
  while (root.parent) root = root.parent;
  const context = contexts.get(root);
  if (!context) throw new Error('this command was not created by createProgram()');
  return context;
}

/** Exit codes, as documented in the README. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/**
 * A mistake in how the command was called (a bad flag value, an input that matches nothing). It ends
 * the run before any work with exit code 2 and its message on stderr.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
