import { type Command, InvalidArgumentError } from 'commander';
import { contextOf } from '../context.ts';
import { cliConfig, dataDirOption } from '../data.ts';
import { UsageError } from '../usage-error.ts';

function parseConcurrency(value: string): number {
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || n < 1 || n > 256)
    throw new InvalidArgumentError('Expected a whole number from 1 to 256.');
  return n;
}

/**
 * `compresso worker`: batch items from the shared job queue (REDIS_URL), on the same database and
 * blob store as the API processes, until SIGINT/SIGTERM (items in flight finish, or go back to the
 * queue after COMPRESSO_SHUTDOWN_TIMEOUT_MS).
 */
export function register(program: Command): void {
  dataDirOption(
    program
      .command('worker')
      .description(
        'run job workers for batch jobs (needs REDIS_URL; DATABASE_URL and the blob store as for serve)',
      )
      .option(
        '-c, --concurrency <n>',
        'items worked on at once (default: $COMPRESSO_WORKER_CONCURRENCY or 2)',
        parseConcurrency,
      ),
  ).action(async (flags: { concurrency?: number }, command: Command) => {
    const config = cliConfig(command);
    if (!config.redisUrl) {
      throw new UsageError(
        'compresso worker needs REDIS_URL (the shared job queue). Without it, `compresso serve` runs batch items itself (--workers).',
      );
    }
    // Graceful shutdown is the worker's (finish or give back items in flight); the CLI's own SIGINT
    // handler exists for `compress` and would exit at once.
    for (const listener of process.listeners('SIGINT')) process.off('SIGINT', listener);
    const { startWorker } = await import('@compresso/server');
    const running = await startWorker({
      overrides: config,
      ...(flags.concurrency ? { concurrency: flags.concurrency } : {}),
    });
    contextOf(command).io.stderr.write(
      `compresso: worker taking jobs from queue "${running.queue.name}" (${running.queue.kind})\n`,
    );
  });
}
