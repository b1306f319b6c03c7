import { createRequire } from 'node:module';

/**
 * The Shopify libraries, loaded as one copy. @shopify/shopify-app-express has no `exports` map, so
 * Node loads its CommonJS build, which requires the CommonJS build of @shopify/shopify-api and
 * configures that copy's runtime adapter. An `import` of @shopify/shopify-api from this ES module
 * would load its ES build instead — a second, unconfigured copy ("Missing adapter implementation
 * for 'abstractRuntimeString'"), whose Session class is not the one the app's sessions are made
 * of. So everything of the library is taken from the same CommonJS copy, here.
 */
const require = createRequire(import.meta.url);

export const shopifyExpress =
  require('@shopify/shopify-app-express') as typeof import('@shopify/shopify-app-express');
export const shopifyApiLib = require('@shopify/shopify-api') as typeof import('@shopify/shopify-api');
export const shopifyRuntime =
  require('@shopify/shopify-api/runtime') as typeof import('@shopify/shopify-api/runtime');

export type { Session } from '@shopify/shopify-api';
