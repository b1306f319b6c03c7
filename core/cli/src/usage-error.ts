/**
 * A mistake in how the command was called (bad flag value, nothing to do). It ends the run before any
 * file is touched and exits with status 2, distinct from status 1 for files that failed.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export const EXIT_OK = 0;
export const EXIT_FAILURES = 1;
export const EXIT_USAGE = 2;
