import type { Config } from '@compresso/runtime';
import { type Command, InvalidArgumentError } from 'commander';
import { contextOf } from '../context.ts';
import { cliConfig, dataDirOption } from '../data.ts';
import { UsageError } from '../usage-error.ts';

function parsePort(value: string): number {
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || n > 65_535)
    throw new InvalidArgumentError('Expected a port from 0 to 65535.');
  return n;
}

function parseWorkers(value: string): number {
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || n > 256)
    throw new InvalidArgumentError('Expected a whole number from 0 to 256.');
  return n;
}

/** `compresso serve`: the /api/v1 server on the embedded database, until SIGINT/SIGTERM. */
export function register(program: Command): void {
  dataDirOption(
    program
      .command('serve')
      .description(
        'run the /api/v1 server (PORT, HOST, COMPRESSO_DATA_DIR and LOG_LEVEL are read from the environment)',
      )
      .option('-p, --port <port>', 'port to listen on (default: $PORT or 3000)', parsePort)
      .option('--host <host>', 'interface to listen on (default: $HOST or 0.0.0.0)')
      .option(
        '--workers <n>',
        'batch items this process works on at once (default: $COMPRESSO_WORKERS, else 1 with the in-process queue, 0 with REDIS_URL)',
        parseWorkers,
      ),
  ).action(async (flags: { port?: number; host?: string; workers?: number }, command: Command) => {
    const overrides: Partial<Config> = {};
    if (flags.workers !== undefined) overrides.workers = flags.workers;
    if (flags.port !== undefined) overrides.port = flags.port;
    if (flags.host !== undefined) overrides.host = flags.host;
    const config = cliConfig(command, overrides);
    if (config.workers === 0 && !config.redisUrl) {
      throw new UsageError(
        '--workers 0 (COMPRESSO_WORKERS=0) needs REDIS_URL and `compresso worker` processes: with the in-process queue, batch jobs would never run.',
      );
    }
    // The server shuts down gracefully on SIGINT/SIGTERM (finishing in-flight requests); the CLI's own
    // SIGINT handler exists to clean up half-written files of `compress` and would exit at once.
    for (const listener of process.listeners('SIGINT')) process.off('SIGINT', listener);
    // Loaded here, not at the top: express and the server are not needed by `compresso compress`.
    const { startServer } = await import('@compresso/server');
    const running = await startServer({ overrides: config });
    contextOf(command).io.stderr.write(
      `compresso: serving ${running.url}/api/v1 (docs: ${running.url}/api/v1/docs)\n`,
    );
  });
}
