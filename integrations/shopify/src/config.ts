import { type Config, type ConfigValues, defineConfig } from '@compresso/runtime';
import { z } from 'zod';

/**
 * Scopes the app asks for: product media are read through `products`, and replaced through `files`
 * (fileUpdate needs write_files). A write scope implies its read scope: the library asks for the
 * reduced list, and checks a granted list against it the same way.
 */
export const DEFAULT_SCOPES = 'write_products,write_files';

/** The Admin API version the app speaks; one the pinned @shopify/shopify-api knows. */
export const DEFAULT_API_VERSION = '2025-10';

const httpUrl = (what: string) =>
  z
    .string()
    .url(`expected an http(s) URL (${what})`)
    .refine((value) => /^https?:\/\//.test(value), `expected an http(s) URL (${what})`)
    .transform((value) => value.replace(/\/+$/, ''));

const SCOPE = /^[a-z_]+$/;

const fields = {
  /** The app's client id from the Partner dashboard (SHOPIFY_API_KEY). */
  shopifyApiKey: { env: 'SHOPIFY_API_KEY', schema: z.string().min(1, 'required') },
  /** The app's client secret (SHOPIFY_API_SECRET): signs OAuth callbacks, webhooks and session tokens. */
  shopifyApiSecret: {
    env: 'SHOPIFY_API_SECRET',
    schema: z.string().min(16, 'expected the app secret from the Partner dashboard (16 characters or more)'),
    secret: true,
  },
  /** Where Shopify and merchants reach this app (SHOPIFY_APP_URL), e.g. https://shopify.example.com. */
  shopifyAppUrl: { env: 'SHOPIFY_APP_URL', schema: httpUrl('the app’s public address') },
  /** Access scopes, comma-separated (SCOPES, as the Shopify CLI names it). */
  shopifyScopes: {
    env: 'SCOPES',
    schema: z
      .string()
      .default(DEFAULT_SCOPES)
      .transform((value) =>
        value
          .split(',')
          .map((scope) => scope.trim())
          .filter(Boolean),
      )
      .refine(
        (scopes) => scopes.length > 0 && scopes.every((scope) => SCOPE.test(scope)),
        'expected comma-separated scopes such as write_products,write_files',
      ),
  },
  /** Admin API version (SHOPIFY_API_VERSION), YYYY-MM. */
  shopifyApiVersion: {
    env: 'SHOPIFY_API_VERSION',
    schema: z
      .string()
      .regex(/^\d{4}-(01|04|07|10)$/, 'expected a quarterly version such as 2025-10')
      .default(DEFAULT_API_VERSION),
  },
  /**
   * Key that encrypts the shops' Shopify access tokens and Compresso keys at rest
   * (SHOPIFY_ENCRYPTION_KEY): 32 bytes or more of randomness, e.g. `openssl rand -base64 32`.
   * Its own setting, not the app secret: rotating the app secret must not make every stored token
   * unreadable.
   */
  shopifyEncryptionKey: {
    env: 'SHOPIFY_ENCRYPTION_KEY',
    schema: z.string().min(32, 'expected 32 characters or more (openssl rand -base64 32)'),
    secret: true,
  },
  /** The Compresso API the app compresses through (COMPRESSO_BASE_URL). */
  compressoBaseUrl: { env: 'COMPRESSO_BASE_URL', schema: httpUrl('the Compresso API') },
} as const;

/**
 * The Shopify app's settings: the runtime's base ones (PORT, DATABASE_URL, REDIS_URL, …) and these.
 * COMPRESSO_ADMIN_TOKEN is a base setting (`adminToken`), read by the server and the app alike: with
 * it the app gives each installed shop a Compresso account and key; without it merchants connect a key.
 */
export type ShopifyConfig = Config & ConfigValues<typeof fields>;

/** Reads the environment (and overrides); throws one ConfigError naming every problem. */
export const loadShopifyConfig = defineConfig({ fields });

/** The host name (and port) of SHOPIFY_APP_URL, as the Shopify library takes it. */
export function appHost(config: Pick<ShopifyConfig, 'shopifyAppUrl'>): {
  scheme: 'http' | 'https';
  host: string;
} {
  const url = new URL(config.shopifyAppUrl);
  return { scheme: url.protocol === 'http:' ? 'http' : 'https', host: url.host };
}
