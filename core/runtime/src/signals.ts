import type { Logger } from './logger.ts';

/**
 * The first SIGINT/SIGTERM starts a graceful close, then exits 0 (1 when closing failed). A second
 * signal while it runs — Ctrl-C pressed again in a terminal — exits 1 at once, leaving in-flight work
 * unfinished (queued jobs go back to the queue through its own stall handling), and says so in the log.
 * Orchestrators send one SIGTERM and SIGKILL after their own grace period, so they get the graceful path.
 * Returns a function that removes the handlers again.
 */
export function exitOnSignals(logger: Logger, close: () => Promise<void>, what: string): () => void {
  let closing = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (closing) {
      logger.warn({ signal }, `${what}: second signal, exiting without finishing in-flight work`);
      process.exit(1);
    }
    closing = true;
    logger.info({ signal }, 'signal received');
    close().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, `${what} shutdown failed`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}
