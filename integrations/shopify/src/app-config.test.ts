import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PATHS, SUBSCRIBED_TOPICS } from './app.ts';
import { DEFAULT_API_VERSION, DEFAULT_SCOPES } from './config.ts';
import { webhookHandlers } from './webhooks.ts';

const toml = readFileSync(new URL('../shopify.app.toml', import.meta.url), 'utf8');
const listOf = (key: string) =>
  [...(toml.match(new RegExp(`^\\s*${key} = \\[([^\\]]*)\\]`, 'm'))?.[1] ?? '').matchAll(/"([^"]+)"/g)].map(
    (m) => m[1],
  );

describe('shopify.app.toml says what the app does', () => {
  it('scopes, API version, callback path and webhook path are the app’s', () => {
    expect(toml).toContain(`scopes = "${DEFAULT_SCOPES}"`);
    expect(toml).toContain(`api_version = "${DEFAULT_API_VERSION}"`);
    expect(listOf('redirect_urls')[0]).toMatch(new RegExp(`${PATHS.authCallback}$`));
    expect([...toml.matchAll(/^\s*uri = "([^"]+)"/gm)].map((m) => m[1])).toEqual([
      PATHS.webhooks,
      PATHS.webhooks,
    ]);
  });

  it('subscribes to the topics the app registers and handles, and the three compliance topics', () => {
    const topics = listOf('topics');
    expect(topics.map((t) => t?.toUpperCase().replace('/', '_'))).toEqual([...SUBSCRIBED_TOPICS]);
    const compliance = listOf('compliance_topics');
    expect(compliance).toEqual(['customers/data_request', 'customers/redact', 'shop/redact']);
    const handled = Object.keys(
      webhookHandlers({ shops: {} as never, queue: {} as never, logger: {} as never, path: '/' }),
    );
    for (const topic of [...topics, ...compliance]) {
      expect(handled).toContain(topic?.toUpperCase().replace('/', '_'));
    }
  });
});
