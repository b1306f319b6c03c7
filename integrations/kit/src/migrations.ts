import type { MigrationSet } from '@compresso/runtime';

/**
 * The kit's tables, in its own namespace (`kit_schema_migrations` records the versions): the asset
 * ledger, the bulk runs and the alt text batches. Register before `migrate()` — `openDatabase(config, { migrations:
 * [KIT_MIGRATIONS] })`, `startProcess({ database: { migrations: [KIT_MIGRATIONS] } })` or
 * `db.registerMigrations(KIT_MIGRATIONS)`. A shipped version is never edited; add the next, to both lists.
 *
 * Times are epoch milliseconds (integers), because lease checks compare them inside the statements.
 */
export const KIT_MIGRATIONS: MigrationSet = {
  namespace: 'kit',
  sqlite: [
    {
      version: 1,
      sql: `
        CREATE TABLE kit_assets (
          site TEXT NOT NULL,
          asset_id TEXT NOT NULL,
          state TEXT NOT NULL DEFAULT 'new',
          reason TEXT,
          content_type TEXT,
          filename TEXT,
          original_hash TEXT,
          original_size INTEGER,
          current_hash TEXT,
          current_size INTEGER,
          pending_hash TEXT,
          pending_size INTEGER,
          backup_key TEXT,
          attempts INTEGER NOT NULL DEFAULT 0,
          last_error TEXT,
          lease_owner TEXT,
          lease_until INTEGER NOT NULL DEFAULT 0,
          alt_changed INTEGER NOT NULL DEFAULT 0,
          alt_before TEXT,
          alt_written TEXT,
          created_at INTEGER NOT NULL,
          updated_at INTEGER NOT NULL,
          PRIMARY KEY (site, asset_id)
        );
        CREATE INDEX kit_assets_site_state ON kit_assets (site, state);
        CREATE TABLE kit_runs (
          id TEXT PRIMARY KEY,
          site TEXT NOT NULL,
          state TEXT NOT NULL,
          cursor TEXT,
          listed INTEGER NOT NULL DEFAULT 0,
          done INTEGER NOT NULL DEFAULT 0,
          optimized INTEGER NOT NULL DEFAULT 0,
          skipped INTEGER NOT NULL DEFAULT 0,
          failed INTEGER NOT NULL DEFAULT 0,
          bytes_before INTEGER NOT NULL DEFAULT 0,
          bytes_after INTEGER NOT NULL DEFAULT 0,
          waiting_until INTEGER,
          waiting_reason TEXT,
          last_error TEXT,
          lease_owner TEXT,
          lease_until INTEGER NOT NULL DEFAULT 0,
          created_at INTEGER NOT NULL,
          updated_at INTEGER NOT NULL,
          finished_at INTEGER
        );
        CREATE UNIQUE INDEX kit_runs_one_active ON kit_runs (site) WHERE state IN ('running', 'paused');
        CREATE INDEX kit_runs_state ON kit_runs (state);
      `,
    },
    // The catalog's size when the platform can say (progress as done / total, time left).
    { version: 2, sql: 'ALTER TABLE kit_runs ADD COLUMN total INTEGER' },
    // Alt text batches and every change they made, with the text it replaced: a batch is undone exactly.
    {
      version: 3,
      sql: `
        CREATE TABLE kit_alt_batches (
          id TEXT PRIMARY KEY,
          site TEXT NOT NULL,
          mode TEXT NOT NULL,
          scope TEXT NOT NULL,
          template TEXT,
          state TEXT NOT NULL,
          changed INTEGER NOT NULL DEFAULT 0,
          unchanged INTEGER NOT NULL DEFAULT 0,
          failed INTEGER NOT NULL DEFAULT 0,
          message TEXT,
          last_error TEXT,
          created_at INTEGER NOT NULL,
          updated_at INTEGER NOT NULL,
          finished_at INTEGER,
          undone_at INTEGER
        );
        CREATE INDEX kit_alt_batches_site ON kit_alt_batches (site, created_at);
        CREATE TABLE kit_alt_changes (
          batch_id TEXT NOT NULL,
          site TEXT NOT NULL,
          asset_id TEXT NOT NULL,
          alt_before TEXT,
          alt_after TEXT NOT NULL,
          source TEXT NOT NULL,
          state TEXT NOT NULL,
          created_at INTEGER NOT NULL,
          undone_at INTEGER,
          PRIMARY KEY (batch_id, asset_id)
        );
        CREATE INDEX kit_alt_changes_asset ON kit_alt_changes (site, asset_id);
      `,
    },
  ],
  postgres: [
    {
      version: 1,
      sql: `
        CREATE TABLE kit_assets (
          site text NOT NULL,
          asset_id text NOT NULL,
          state text NOT NULL DEFAULT 'new',
          reason text,
          content_type text,
          filename text,
          original_hash text,
          original_size bigint,
          current_hash text,
          current_size bigint,
          pending_hash text,
          pending_size bigint,
          backup_key text,
          attempts integer NOT NULL DEFAULT 0,
          last_error text,
          lease_owner text,
          lease_until bigint NOT NULL DEFAULT 0,
          alt_changed integer NOT NULL DEFAULT 0,
          alt_before text,
          alt_written text,
          created_at bigint NOT NULL,
          updated_at bigint NOT NULL,
          PRIMARY KEY (site, asset_id)
        );
        CREATE INDEX kit_assets_site_state ON kit_assets (site, state);
        CREATE TABLE kit_runs (
          id text PRIMARY KEY,
          site text NOT NULL,
          state text NOT NULL,
          cursor text,
          listed integer NOT NULL DEFAULT 0,
          done integer NOT NULL DEFAULT 0,
          optimized integer NOT NULL DEFAULT 0,
          skipped integer NOT NULL DEFAULT 0,
          failed integer NOT NULL DEFAULT 0,
          bytes_before bigint NOT NULL DEFAULT 0,
          bytes_after bigint NOT NULL DEFAULT 0,
          waiting_until bigint,
          waiting_reason text,
          last_error text,
          lease_owner text,
          lease_until bigint NOT NULL DEFAULT 0,
          created_at bigint NOT NULL,
          updated_at bigint NOT NULL,
          finished_at bigint
        );
        CREATE UNIQUE INDEX kit_runs_one_active ON kit_runs (site) WHERE state IN ('running', 'paused');
        CREATE INDEX kit_runs_state ON kit_runs (state);
      `,
    },
    { version: 2, sql: 'ALTER TABLE kit_runs ADD COLUMN total integer' },
    {
      version: 3,
      sql: `
        CREATE TABLE kit_alt_batches (
          id text PRIMARY KEY,
          site text NOT NULL,
          mode text NOT NULL,
          scope text NOT NULL,
          template text,
          state text NOT NULL,
          changed integer NOT NULL DEFAULT 0,
          unchanged integer NOT NULL DEFAULT 0,
          failed integer NOT NULL DEFAULT 0,
          message text,
          last_error text,
          created_at bigint NOT NULL,
          updated_at bigint NOT NULL,
          finished_at bigint,
          undone_at bigint
        );
        CREATE INDEX kit_alt_batches_site ON kit_alt_batches (site, created_at);
        CREATE TABLE kit_alt_changes (
          batch_id text NOT NULL,
          site text NOT NULL,
          asset_id text NOT NULL,
          alt_before text,
          alt_after text NOT NULL,
          source text NOT NULL,
          state text NOT NULL,
          created_at bigint NOT NULL,
          undone_at bigint,
          PRIMARY KEY (batch_id, asset_id)
        );
        CREATE INDEX kit_alt_changes_asset ON kit_alt_changes (site, asset_id);
      `,
    },
  ],
};
