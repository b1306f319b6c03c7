import type { Logger } from '@compresso/runtime';

/**
 * SIGINT/SIGTERM start a graceful close once (a second signal does not cut it short: orchestrators
 * send SIGKILL after their own grace period), then exit 0, or 1 when closing failed.
 */
export function exitOnSignals(logger: Logger, close: () => Promise<void>, what: string): void {
  const onSignal = (signal: NodeJS.Signals) => {
    logger.info({ signal }, 'signal received');
    close().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, `${what} shutdown failed`);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
}
