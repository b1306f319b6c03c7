import type { Database } from '@compresso/runtime';
import { isCompressoError } from '@compresso/schema';

/** A fresh, migrated, empty database of the backend under test. */
export type OpenDatabase = () => Promise<Database>;

/** Run a test on its own fresh database, closed afterwards whatever happens. */
export const withDatabase = (open: OpenDatabase) => (test: (db: Database) => Promise<void>) => async () => {
  const db = await open();
  try {
    await test(db);
  } finally {
    await db.close();
  }
};

/** The CompressoError code a call fails with, or `no error`. */
export async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    if (isCompressoError(error)) return error.code;
    throw error;
  }
  return 'no error';
}
