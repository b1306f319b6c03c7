import { resolve } from 'node:path';
import { type Config, ConfigError, type Database, loadConfig, openDatabase } from '@compresso/runtime';
import { isCompressoError } from '@compresso/schema';
import type { Command } from 'commander';
import { contextOf } from './context.ts';
import { EXIT_FAILURES, UsageError } from './usage-error.ts';

/** The --data-dir option every operator command shares; the environment's COMPRESSO_DATA_DIR otherwise. */
export function dataDirOption(command: Command): Command {
  return command.option(
    '--data-dir <dir>',
    'directory of the embedded database (default: $COMPRESSO_DATA_DIR or ./.compresso-data)',
  );
}

/** Configuration as the server would load it, with paths relative to the CLI's working directory. */
export function cliConfig(command: Command, overrides: Partial<Config> = {}): Config {
  const { cwd } = contextOf(command).io;
  const flagDir = (command.opts() as { dataDir?: string }).dataDir;
  const dir = flagDir ?? process.env.COMPRESSO_DATA_DIR ?? './.compresso-data';
  try {
    return loadConfig(process.env, { ...overrides, dataDir: resolve(cwd, dir) });
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }
}

/**
 * Open the same database the server uses, run `work`, close it. A CompressoError (unknown account,
 * used-up promo code, …) is reported as `compresso: error: … (CODE)` with exit status 1.
 */
export async function withDatabase(command: Command, work: (db: Database) => Promise<void>): Promise<void> {
  const context = contextOf(command);
  const db = await openDatabase(cliConfig(command));
  try {
    await work(db);
  } catch (error) {
    if (!isCompressoError(error)) throw error;
    context.io.stderr.write(`compresso: error: ${error.message} (${error.code})\n`);
    context.exitCode = Math.max(context.exitCode, EXIT_FAILURES);
  } finally {
    await db.close();
  }
}

export function writeJson(command: Command, value: unknown): void {
  contextOf(command).io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
