import { checkAltTemplate, DEFAULT_ALT_TEMPLATE } from '@compresso/integration-kit';
import type { Database } from '@compresso/runtime';
import { z } from 'zod';
import type { Sealer } from './sealed.ts';
import { appSql, isoOf } from './sql.ts';

/** A shop's compression settings, as the admin page edits them. */
export const ShopSettingsSchema = z.object({
  /** Compress new and changed product images automatically. */
  enabled: z.boolean().default(true),
  /** 1–100, or `auto` (the API picks the lowest quality that still looks the same). */
  quality: z.union([z.literal('auto'), z.number().int().min(1).max(100)]).default('auto'),
  /** Longest side in pixels; larger images are scaled down. null: keep the size. */
  maxDimension: z.number().int().min(16).max(16_384).nullable().default(2048),
  /** Keep EXIF (camera, location) in the replaced file. */
  keepExif: z.boolean().default(false),
  /**
   * Days an original is kept after the app changed the image; null: as long as the app is installed.
   * Past it, the original is deleted (retention.ts) and the image can no longer be restored.
   */
  backupRetentionDays: z.number().int().min(1).max(3650).nullable().default(null),
  /**
   * Alt text for new product images that have none, on arrival: `off`, from `alt_text_template`, or
   * written by AI through the Compresso API (the template when the server has no AI).
   */
  alt_text_mode: z.enum(['off', 'template', 'ai']).default('off'),
  /** Placeholders: {product_title}, {vendor}, {product_type}, {variant}, {shop_name}, {n}. */
  alt_text_template: z
    .string()
    .superRefine((template, ctx) => {
      for (const problem of checkAltTemplate(template)) ctx.addIssue({ code: 'custom', message: problem });
    })
    .default(DEFAULT_ALT_TEMPLATE),
});

export type ShopSettings = z.infer<typeof ShopSettingsSchema>;

export const DEFAULT_SETTINGS: ShopSettings = ShopSettingsSchema.parse({});

export type KeySource = 'provisioned' | 'merchant';

export interface ShopRecord {
  shop: string;
  installedAt: string;
  /** Set when the app was uninstalled; the shop's work stops. */
  uninstalledAt?: string;
  accountId?: string;
  keySource?: KeySource;
  hasKey: boolean;
  settings: ShopSettings;
}

export interface QuotaWaits {
  count: number;
  /** The earliest reset (ms since the epoch), or null when nothing waits. */
  until: number | null;
  images: { assetId: string; productId: string; until: number; jobId: string }[];
}

export type WebhookOutcome = 'queued' | 'ignored' | 'done';

export interface ShopStore {
  /** Record an install (again): clears an earlier uninstall, keeps the account, key and settings. */
  install(shop: string, now?: Date): Promise<ShopRecord>;
  find(shop: string): Promise<ShopRecord | undefined>;
  /** Installed and not uninstalled since. */
  isActive(shop: string): Promise<boolean>;
  markUninstalled(shop: string, now?: Date): Promise<void>;
  /** Store the Compresso key (sealed) and the account it belongs to. */
  setKey(shop: string, key: { secret: string; accountId?: string; source: KeySource }): Promise<void>;
  /** The Compresso key in the clear, for the worker's client; undefined without one. */
  key(shop: string): Promise<string | undefined>;
  updateSettings(shop: string, patch: Partial<ShopSettings>): Promise<ShopSettings>;
  /** Images that wait for the shop's Compresso quota to reset, in the delayed job `jobId`. */
  addQuotaWaits(
    shop: string,
    wait: { productId: string; assetIds: readonly string[]; until: number; jobId: string },
  ): Promise<void>;
  /** The image's turn came (the follow-up ran it, or another job did): it no longer waits. */
  endQuotaWait(shop: string, assetId: string): Promise<void>;
  /** How many images wait, the earliest reset, and the first `limit` of them (soonest first). */
  quotaWaits(shop: string, limit?: number): Promise<QuotaWaits>;
  /** Whether a delivery with this webhook id was handled before. */
  seenWebhook(id: string): Promise<boolean>;
  /**
   * Remember a webhook id; false when it was seen before (a redelivery). One INSERT … ON CONFLICT DO
   * NOTHING, so two deliveries racing each other cannot both win.
   */
  claimWebhook(webhook: {
    id: string;
    shop: string;
    topic: string;
    outcome: WebhookOutcome;
  }): Promise<boolean>;
  /** Everything the app keeps about a shop, gone (shop/redact). */
  erase(shop: string): Promise<void>;
}

const keyContext = (shop: string) => `compresso-key:${shop}`;

function recordOf(row: Record<string, unknown>): ShopRecord {
  const uninstalledAt = isoOf(row.uninstalled_at);
  return {
    shop: String(row.shop),
    installedAt: isoOf(row.installed_at) ?? '',
    ...(uninstalledAt ? { uninstalledAt } : {}),
    ...(row.account_id ? { accountId: String(row.account_id) } : {}),
    ...(row.key_source ? { keySource: row.key_source as KeySource } : {}),
    hasKey: Boolean(row.key_sealed),
    settings: ShopSettingsSchema.parse(JSON.parse(String(row.settings))),
  };
}

export function shopStore(db: Database, sealer: Sealer): ShopStore {
  const sql = appSql(db.backend);
  const store: ShopStore = {
    async install(shop, now = new Date()) {
      const at = now.toISOString();
      await sql.run(
        `INSERT INTO shopify_shops (shop, installed_at, settings, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (shop) DO UPDATE SET installed_at = excluded.installed_at, uninstalled_at = NULL,
           updated_at = excluded.updated_at`,
        shop,
        at,
        JSON.stringify(DEFAULT_SETTINGS),
        at,
      );
      const record = await store.find(shop);
      if (!record) throw new Error(`shop ${shop} vanished while being installed`);
      return record;
    },
    async find(shop) {
      const row = await sql.get('SELECT * FROM shopify_shops WHERE shop = ?', shop);
      return row && recordOf(row);
    },
    async isActive(shop) {
      const row = await sql.get('SELECT uninstalled_at FROM shopify_shops WHERE shop = ?', shop);
      return row !== undefined && (row.uninstalled_at === null || row.uninstalled_at === undefined);
    },
    async markUninstalled(shop, now = new Date()) {
      await sql.run(
        'UPDATE shopify_shops SET uninstalled_at = ?, updated_at = ? WHERE shop = ?',
        now.toISOString(),
        now.toISOString(),
        shop,
      );
    },
    async setKey(shop, key) {
      const changed = await sql.run(
        'UPDATE shopify_shops SET key_sealed = ?, account_id = ?, key_source = ?, updated_at = ? WHERE shop = ?',
        sealer.seal(key.secret, keyContext(shop)),
        key.accountId ?? null,
        key.source,
        new Date().toISOString(),
        shop,
      );
      if (changed !== 1) throw new Error(`setKey: no shop ${shop}`);
    },
    async key(shop) {
      const row = await sql.get('SELECT key_sealed FROM shopify_shops WHERE shop = ?', shop);
      return row?.key_sealed ? sealer.open(String(row.key_sealed), keyContext(shop)) : undefined;
    },
    async updateSettings(shop, patch) {
      const current = await store.find(shop);
      if (!current) throw new Error(`updateSettings: no shop ${shop}`);
      const settings = ShopSettingsSchema.parse({ ...current.settings, ...patch });
      await sql.run(
        'UPDATE shopify_shops SET settings = ?, updated_at = ? WHERE shop = ?',
        JSON.stringify(settings),
        new Date().toISOString(),
        shop,
      );
      return settings;
    },
    async addQuotaWaits(shop, wait) {
      const now = new Date().toISOString();
      for (const assetId of wait.assetIds) {
        await sql.run(
          `INSERT INTO shopify_quota_waits (shop, asset_id, product_id, until_ms, job_id, created_at)
           VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (shop, asset_id) DO UPDATE SET product_id = excluded.product_id,
             until_ms = excluded.until_ms, job_id = excluded.job_id`,
          shop,
          assetId,
          wait.productId,
          wait.until,
          wait.jobId,
          now,
        );
      }
    },
    async endQuotaWait(shop, assetId) {
      await sql.run('DELETE FROM shopify_quota_waits WHERE shop = ? AND asset_id = ?', shop, assetId);
    },
    async quotaWaits(shop, limit = 50) {
      const counted = await sql.get(
        'SELECT COUNT(*) AS n, MIN(until_ms) AS until FROM shopify_quota_waits WHERE shop = ?',
        shop,
      );
      const rows = await sql.all(
        `SELECT asset_id, product_id, until_ms, job_id FROM shopify_quota_waits WHERE shop = ?
         ORDER BY until_ms, asset_id LIMIT ?`,
        shop,
        limit,
      );
      return {
        count: Number(counted?.n ?? 0),
        until: counted?.until === null || counted?.until === undefined ? null : Number(counted.until),
        images: rows.map((r) => ({
          assetId: String(r.asset_id),
          productId: String(r.product_id),
          until: Number(r.until_ms),
          jobId: String(r.job_id),
        })),
      };
    },
    async seenWebhook(id) {
      return (await sql.get('SELECT 1 AS seen FROM shopify_webhooks WHERE webhook_id = ?', id)) !== undefined;
    },
    async claimWebhook(webhook) {
      const inserted = await sql.run(
        `INSERT INTO shopify_webhooks (webhook_id, shop, topic, received_at, outcome) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (webhook_id) DO NOTHING`,
        webhook.id,
        webhook.shop,
        webhook.topic,
        new Date().toISOString(),
        webhook.outcome,
      );
      return inserted === 1;
    },
    async erase(shop) {
      await sql.run('DELETE FROM shopify_sessions WHERE shop = ?', shop);
      await sql.run('DELETE FROM shopify_webhooks WHERE shop = ?', shop);
      await sql.run('DELETE FROM shopify_quota_waits WHERE shop = ?', shop);
      await sql.run('DELETE FROM shopify_shops WHERE shop = ?', shop);
    },
  };
  return store;
}
