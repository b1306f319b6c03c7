import type { MigrationSet } from '@compresso/runtime';

/**
 * The app's own tables, beside the core's in the runtime database (namespace `shopify`, versions in
 * `shopify_schema_migrations`). Never edit a shipped migration: add the next version.
 *
 * - shopify_sessions: the library's sessions. Only what lookups need is in the clear (id, shop,
 *   online or offline, expiry); the rest — the access token above all — is one sealed JSON value.
 * - shopify_shops: one row per shop that installed: when, whether it still is, the Compresso account
 *   and key it uses (the key sealed), its settings.
 * - shopify_webhooks: webhook ids seen (Shopify redelivers, and the same id means the same event),
 *   with what was done, so a redelivery is answered without doing it twice.
 * - shopify_quota_waits (v2): images waiting for the shop's Compresso quota to reset — until when,
 *   and the delayed job that will take them — so the admin shows them; a row goes when its image's
 *   turn comes.
 */
export const SHOPIFY_MIGRATIONS: MigrationSet = {
  namespace: 'shopify',
  sqlite: [
    {
      version: 1,
      sql: `
CREATE TABLE shopify_sessions (
  id TEXT PRIMARY KEY,
  shop TEXT NOT NULL,
  is_online INTEGER NOT NULL,
  expires_at TEXT,
  sealed TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX shopify_sessions_shop ON shopify_sessions (shop);
CREATE TABLE shopify_shops (
  shop TEXT PRIMARY KEY,
  installed_at TEXT NOT NULL,
  uninstalled_at TEXT,
  account_id TEXT,
  key_sealed TEXT,
  key_source TEXT,
  settings TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE shopify_webhooks (
  webhook_id TEXT PRIMARY KEY,
  shop TEXT NOT NULL,
  topic TEXT NOT NULL,
  received_at TEXT NOT NULL,
  outcome TEXT NOT NULL
);
CREATE INDEX shopify_webhooks_shop ON shopify_webhooks (shop);
`,
    },
    {
      version: 2,
      sql: `
CREATE TABLE shopify_quota_waits (
  shop TEXT NOT NULL,
  asset_id TEXT NOT NULL,
  product_id TEXT NOT NULL,
  until_ms INTEGER NOT NULL,
  job_id TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (shop, asset_id)
);
`,
    },
  ],
  postgres: [
    {
      version: 1,
      sql: `
CREATE TABLE shopify_sessions (
  id TEXT PRIMARY KEY,
  shop TEXT NOT NULL,
  is_online INTEGER NOT NULL,
  expires_at TIMESTAMPTZ,
  sealed TEXT NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX shopify_sessions_shop ON shopify_sessions (shop);
CREATE TABLE shopify_shops (
  shop TEXT PRIMARY KEY,
  installed_at TIMESTAMPTZ NOT NULL,
  uninstalled_at TIMESTAMPTZ,
  account_id TEXT,
  key_sealed TEXT,
  key_source TEXT,
  settings TEXT NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE shopify_webhooks (
  webhook_id TEXT PRIMARY KEY,
  shop TEXT NOT NULL,
  topic TEXT NOT NULL,
  received_at TIMESTAMPTZ NOT NULL,
  outcome TEXT NOT NULL
);
CREATE INDEX shopify_webhooks_shop ON shopify_webhooks (shop);
`,
    },
    {
      version: 2,
      sql: `
CREATE TABLE shopify_quota_waits (
  shop TEXT NOT NULL,
  asset_id TEXT NOT NULL,
  product_id TEXT NOT NULL,
  until_ms BIGINT NOT NULL,
  job_id TEXT NOT NULL,
  created_at TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (shop, asset_id)
);
`,
    },
  ],
};
