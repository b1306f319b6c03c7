import type { Config } from './config.ts';
import type { Database, MigrationSet } from './database.ts';
import { sqliteDatabase } from './sqlite.ts';

export interface OpenDatabaseOptions {
  /** PostgreSQL schema for Compresso's tables (default `public`); ignored for SQLite. */
  schema?: string;
  /** An integration's own tables: migrated with the core's, on whichever backend this is. */
  migrations?: readonly MigrationSet[];
}

/**
 * The database the configuration asks for, migrated. With DATABASE_URL: PostgreSQL, so several
 * server processes can share one database. Without it: the embedded SQLite file in the data
 * directory.
 */
export async function openDatabase(
  config: Pick<Config, 'dataDir' | 'databaseUrl'>,
  options: OpenDatabaseOptions = {},
): Promise<Database> {
  let db: Database;
  if (config.databaseUrl) {
    // Loaded only here: a SQLite-only process never loads the PostgreSQL driver.
    const { postgresDatabase } = await import('./postgres.ts');
    db = postgresDatabase({
      url: config.databaseUrl,
      ...(options.schema ? { schema: options.schema } : {}),
      ...(options.migrations ? { migrations: options.migrations } : {}),
    });
  } else {
    db = sqliteDatabase({
      dataDir: config.dataDir,
      ...(options.migrations ? { migrations: options.migrations } : {}),
    });
  }
  try {
    await db.migrate();
  } catch (error) {
    await db.close().catch(() => {});
    throw error;
  }
  return db;
}
