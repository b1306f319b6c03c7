import { pino } from 'pino';
import type { Config } from './config.ts';

export type Logger = pino.Logger;

/**
 * Paths never written to the log. Request logging in the server copies no headers, bodies or keys
 * at all; this list is the second line of defence for a caller that logs an object carelessly.
 */
export const REDACT_PATHS = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  '*.headers.authorization',
  'key',
  '*.key',
  'secret',
  '*.secret',
  'apiKey',
  '*.apiKey',
];

export function createLogger(config: Pick<Config, 'logLevel'>, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level: config.logLevel,
    base: { service: 'compresso' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}
