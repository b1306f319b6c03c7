import type { Config } from './config.ts';
import type { Database } from './database.ts';
import { sqliteDatabase } from './sqlite.ts';

/**
 * The database the configuration asks for, migrated. With no DATABASE_URL: the embedded SQLite file
 * in the data directory.
 */
export async function openDatabase(config: Pick<Config, 'dataDir' | 'databaseUrl'>): Promise<Database> {
  if (config.databaseUrl) {
    // The port is ready for it; the adapter is not written yet. Fail at start with what to do.
    throw new Error(
      'DATABASE_URL is set, but the PostgreSQL backend is not available in this version; unset DATABASE_URL to use the embedded SQLite database in COMPRESSO_DATA_DIR.',
    );
  }
  const db = sqliteDatabase({ dataDir: config.dataDir });
  await db.migrate();
  return db;
}
