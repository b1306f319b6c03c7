#!/usr/bin/env node
import { ConfigError } from '@compresso/runtime';
import { startShopifyApp, startShopifyWorkerProcess } from './start.ts';

/**
 * `npm run shopify` (serve: the HTTP app, and on the embedded default its queue worker in the same
 * process) and `npm run shopify:worker` (a worker alone, for REDIS_URL deployments).
 */
const command = process.argv[2] ?? 'serve';
try {
  if (command === 'serve') await startShopifyApp();
  else if (command === 'worker') await startShopifyWorkerProcess();
  else {
    process.stderr.write(`usage: bin.ts [serve|worker] (received ${JSON.stringify(command)})\n`);
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
