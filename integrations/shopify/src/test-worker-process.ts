/**
 * `npm run shopify:worker` as a child process of a fault test (faults-kill.test.ts), which SIGKILLs it
 * at a moment it picks. Its Shopify requests go to the test's fake (FAKE_SHOPIFY_URL), as the
 * harness's do; it prints each of its queue events as one JSON line, and `{"type":"ready"}` once it
 * takes jobs.
 */
import { shopifyRuntime } from './shopify-lib.ts';
import { startShopifyWorkerProcess } from './start.ts';

const base = process.env.FAKE_SHOPIFY_URL;
if (!base) throw new Error('FAKE_SHOPIFY_URL is required');
const SHOP_DOMAIN = /^[a-z0-9][a-z0-9-]*\.myshopify\.com$/;
const rewrite = (url: string) => {
  const parsed = new URL(url);
  return parsed.protocol === 'https:' && SHOP_DOMAIN.test(parsed.hostname)
    ? `${base}/shops/${parsed.hostname}${parsed.pathname}${parsed.search}`
    : url;
};
const fakeFetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> =>
  input instanceof Request
    ? fetch(new Request(rewrite(input.url), input), init)
    : fetch(rewrite(String(input)), init);
shopifyRuntime.setAbstractFetchFunc(fakeFetch as typeof fetch);

const running = await startShopifyWorkerProcess({ env: process.env });
running.queue.on((event) => console.log(JSON.stringify(event)));
console.log(JSON.stringify({ type: 'ready', pid: process.pid }));
