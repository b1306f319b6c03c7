#!/usr/bin/env node
import { ConfigError } from '@compresso/runtime';
import { startShopifyApp } from './start.ts';

/** `npm run shopify`: the app's HTTP process. */
const command = process.argv[2] ?? 'serve';
try {
  if (command === 'serve') await startShopifyApp();
  else {
    process.stderr.write(`usage: bin.ts [serve] (received ${JSON.stringify(command)})\n`);
    process.exitCode = 2;
  }
} catch (error) {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
    process.exitCode = 1;
  } else {
    throw error;
  }
}
