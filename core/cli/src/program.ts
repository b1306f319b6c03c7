import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import {
  attachContext,
  type CliIO,
  cliContext,
  EXIT_FAILED,
  EXIT_OK,
  EXIT_USAGE,
  UsageError,
} from './context.ts';
import * as commands from './registry.ts';

const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

export const VERSION = manifest.version;

export function processIO(): CliIO {
  return { stdout: process.stdout, stderr: process.stderr, cwd: process.cwd(), env: process.env };
}

/** The `compresso` program with every command of the registry, writing only to `io`. */
export function createProgram(io: CliIO = processIO()): Command {
  const program = new Command('compresso')
    .description('Compresso: open image optimization. Compress images locally, serve the API, manage keys.')
    .version(VERSION, '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help (also: compresso help <command>)')
    .showHelpAfterError('(add --help for usage)')
    // Commander would call process.exit; throwing instead lets run() return the code to its caller.
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      getOutHelpWidth: () => io.stdout.columns ?? 100,
      getErrHelpWidth: () => io.stderr.columns ?? 100,
    });
  attachContext(program, { io, exitCode: EXIT_OK });
  for (const register of Object.values(commands)) register(program);
  return program;
}

/**
 * Run `compresso` with `argv` (the arguments after the program name) and return the exit code:
 * 0 success, 1 some work failed, 2 usage error. Never exits the process.
 */
export async function run(argv: readonly string[], io: CliIO = processIO()): Promise<number> {
  const program = createProgram(io);
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander has already printed help, the version or its error message.
      return error.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    }
    if (error instanceof UsageError) {
      io.stderr.write(`error: ${error.message}\n`);
      return EXIT_USAGE;
    }
    const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
    io.stderr.write(`error: unexpected failure (please report it): ${detail}\n`);
    return EXIT_FAILED;
  }
  return cliContext(program).exitCode;
}
