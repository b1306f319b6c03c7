export {
  appHost,
  DEFAULT_API_VERSION,
  DEFAULT_SCOPES,
  loadShopifyConfig,
  type ShopifyConfig,
} from './config.ts';
export { SHOPIFY_MIGRATIONS } from './migrations.ts';
export { createSealer, type Sealer } from './sealed.ts';
export { databaseSessionStorage } from './session-storage.ts';
export {
  DEFAULT_SETTINGS,
  type KeySource,
  type ShopRecord,
  type ShopSettings,
  ShopSettingsSchema,
  type ShopStore,
  shopStore,
} from './shop-store.ts';
