/**
 * The app process for the bulk acceptance test (bulk-catalog.test.ts): `npm run shopify` as it
 * starts on the embedded default (HTTP and the worker in one process, SQLite file, blob directory,
 * in-process queue), its @shopify/shopify-api sent to the fake Shopify at `FAKE_SHOPIFY_URL`. It
 * prints one JSON line per bulk event (with the process's peak RSS), so the test can SIGKILL it at
 * a moment it chooses. `TEST_SETUP_SHOP` stores the shop's offline session (a token the fake
 * issued), its record and its Compresso key, as an install would. `TEST_CLOCK_OFFSET_MS` moves the
 * worker's clock forward: the process that takes over after a kill sees the dead one's leases as
 * run out without waiting for them.
 */
import { systemClock } from '@compresso/integration-kit';
import { shopifyApiLib, shopifyRuntime } from './shopify-lib.ts';
import { startShopifyApp } from './start.ts';

const fakeUrl = process.env.FAKE_SHOPIFY_URL ?? '';
const rewrite = (url: string) => {
  const parsed = new URL(url);
  return parsed.protocol === 'https:' && parsed.hostname.endsWith('.myshopify.com')
    ? `${fakeUrl}/shops/${parsed.hostname}${parsed.pathname}${parsed.search}`
    : url;
};
shopifyRuntime.setAbstractFetchFunc(((input: string | URL | Request, init?: RequestInit) =>
  input instanceof Request
    ? fetch(new Request(rewrite(input.url), input), init)
    : fetch(rewrite(String(input)), init)) as typeof fetch);

const offset = Number(process.env.TEST_CLOCK_OFFSET_MS ?? 0);
// The peak RSS goes with every line but the per-image ones (reading it costs a system call).
let maxRssKb = 0;
const print = (line: Record<string, unknown>) => {
  if (line.type !== 'asset') maxRssKb = process.resourceUsage().maxRSS;
  process.stdout.write(`${JSON.stringify({ ...line, maxRssKb })}\n`);
};

const running = await startShopifyApp({
  handleSignals: false,
  clock: { now: () => Date.now() + offset, sleep: systemClock.sleep },
  bulk: {
    concurrency: Number(process.env.TEST_BULK_CONCURRENCY ?? 4),
    onProgress(event) {
      if (event.type === 'asset') print({ type: 'asset', kind: event.outcome.kind });
      else print({ type: event.type, run: event.run });
    },
  },
});
const { app } = running;

const setup = process.env.TEST_SETUP_SHOP;
if (setup) {
  const [shop, token, key] = setup.split(' ') as [string, string, string];
  await app.sessions.storeSession(
    new shopifyApiLib.Session({
      id: app.shopify.api.session.getOfflineId(shop),
      shop,
      state: 'test',
      isOnline: false,
      accessToken: token,
      scope: 'write_products,write_files',
    }),
  );
  await app.shops.install(shop);
  await app.shops.setKey(shop, { secret: key, source: 'merchant' });
  await app.shops.updateSettings(shop, { quality: 75 });
}
print({ type: 'ready', url: app.url });

process.on('SIGTERM', () => {
  void running.close().then(() => process.exit(0));
});
