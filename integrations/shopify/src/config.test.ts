import { ConfigError } from '@compresso/runtime';
import { describe, expect, it } from 'vitest';
import { DEFAULT_API_VERSION, loadShopifyConfig } from './config.ts';

const GOOD = {
  SHOPIFY_API_KEY: 'client-id',
  SHOPIFY_API_SECRET: 'shpss_0123456789abcdef',
  SHOPIFY_APP_URL: 'https://app.example.com/',
  SHOPIFY_ENCRYPTION_KEY: 'k'.repeat(44),
  COMPRESSO_BASE_URL: 'https://api.example.com',
};

describe('the Shopify app’s settings', () => {
  it('reads the SHOPIFY_* keys beside the base ones, with defaults', () => {
    const config = loadShopifyConfig({ ...GOOD, PORT: '8081', SCOPES: 'write_products, write_files' });
    expect(config.port).toBe(8081);
    expect(config.shopifyAppUrl).toBe('https://app.example.com');
    expect(config.shopifyScopes).toEqual(['write_products', 'write_files']);
    expect(config.shopifyApiVersion).toBe(DEFAULT_API_VERSION);
    expect(config.adminToken).toBeUndefined();
  });

  it('names every problem at once, the base ones included, and never prints a secret', () => {
    let caught: unknown;
    try {
      loadShopifyConfig({
        SHOPIFY_API_SECRET: 'short-secret',
        SHOPIFY_APP_URL: 'ftp://app.example.com',
        SHOPIFY_API_VERSION: '2025-05',
        SHOPIFY_ENCRYPTION_KEY: 'too-short-key',
        SCOPES: 'write products',
        PORT: 'eighty',
        COMPRESSO_ADMIN_TOKEN: 'short-admin',
      });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const problems = (caught as ConfigError).problems.join('\n');
    for (const name of [
      'SHOPIFY_API_KEY',
      'SHOPIFY_API_SECRET',
      'SHOPIFY_APP_URL',
      'SHOPIFY_API_VERSION',
      'SHOPIFY_ENCRYPTION_KEY',
      'SCOPES',
      'COMPRESSO_BASE_URL',
      'COMPRESSO_ADMIN_TOKEN',
      'PORT',
    ]) {
      expect(problems).toContain(name);
    }
    // What is missing says so plainly (not zod's "expected string, received undefined").
    expect(problems).toContain('SHOPIFY_API_KEY: required, not set');
    expect(problems).toContain('COMPRESSO_BASE_URL: required, not set');
    expect(problems).not.toContain('received undefined');
    expect(problems).not.toContain('short-secret');
    expect(problems).not.toContain('too-short-key');
    expect(problems).not.toContain('short-admin');
  });
});
