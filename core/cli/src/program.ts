import { readFileSync } from 'node:fs';
import { isCompressoError } from '@compresso/schema';
import { Command, CommanderError } from 'commander';
import { attachContext, contextOf } from './context.ts';
import { type CliIo, processIo } from './io.ts';
import * as commands from './registry.ts';
import { EXIT_FAILURES, EXIT_OK, EXIT_USAGE, UsageError } from './usage-error.ts';

/** A command of `compresso`: one file in src/commands/ that adds itself to the program. */
export interface CommandModule {
  register(program: Command): void;
}

/** Every command's register function, in name order (see registry.ts). */
export const COMMANDS: readonly CommandModule['register'][] = Object.values(commands);

const packageJson = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};
export const VERSION = packageJson.version;

const PROGRAM_HELP_AFTER = `
Run "compresso <command> --help" for a command's options, defaults and examples.

Exit status: 0 success; 1 some file failed (each failure named on stderr with its error code);
2 usage error (a bad option value, an unknown option, or no input matched).
`;

/**
 * The whole `compresso` program, writing through `io` and never exiting the process: commander's
 * exits become exceptions (exitOverride) that run() turns into a status.
 */
export function createProgram(io: CliIo = processIo()): Command {
  const program = new Command('compresso')
    .description(
      'Compresso: open image optimization. Compress images locally with the same engine as the API.',
    )
    .version(VERSION, '-V, --version', 'print the version and exit')
    .helpOption('-h, --help', 'show help (also: compresso help <command>)')
    .showHelpAfterError('(add --help for usage)')
    .configureOutput({
      writeOut: (text) => void io.stdout.write(text),
      writeErr: (text) => void io.stderr.write(text),
      getOutHelpWidth: () => io.stdout.columns ?? 100,
      getErrHelpWidth: () => io.stderr.columns ?? 100,
    })
    .addHelpText('after', PROGRAM_HELP_AFTER)
    .exitOverride();
  attachContext(program, { io, exitCode: EXIT_OK });
  // Subcommands made with program.command() inherit the output and exit settings above.
  for (const register of COMMANDS) register(program);
  return program;
}

/**
 * Run `compresso` with `argv` (the arguments after the program name) and resolve to the exit status:
 * 0 success, 1 some file failed, 2 usage error. Usable in-process by tests and by bin.ts alike.
 */
export async function run(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  const program = createProgram(io);
  const context = contextOf(program);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return context.exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version end with 0; everything else commander rejects is a usage error, already
      // reported by commander in its own words.
      return error.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    }
    if (error instanceof UsageError) {
      io.stderr.write(`compresso: error: ${error.message}\n`);
      return EXIT_USAGE;
    }
    if (isCompressoError(error)) {
      // A refusal with our own code and words (a port in use, a database that does not answer): the
      // message says what to do, so no stack trace and no "please report it".
      io.stderr.write(`compresso: error: ${error.code}: ${error.message}\n`);
      return EXIT_FAILURES;
    }
    const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
    io.stderr.write(`compresso: unexpected error (a bug; please report it):\n${detail}\n`);
    return EXIT_FAILURES;
  }
}
