import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, API_SECRET, APP_URL, BROWSER_UA, type Harness, startHarness } from './test-harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

describe('install (OAuth through @shopify/shopify-app-express against the fake)', () => {
  it('stores an offline session sealed at rest, registers the webhooks and links a Compresso account', async () => {
    const shop = h.fake.addShop('install-demo');
    const result = await h.install(shop);
    // The browser ends in the Shopify admin, on the embedded app.
    expect(result.location).toBe(`https://admin.shopify.com/store/install-demo/apps/${API_KEY}`);
    expect(result.steps[1]).toContain(`https://${shop}/admin/oauth/authorize?client_id=${API_KEY}`);

    const sessions = await h.app.app.sessions.findSessionsByShop(shop);
    expect(sessions).toHaveLength(1);
    const session = sessions[0]!;
    expect(session.isOnline).toBe(false);
    expect(session.id).toBe(`offline_${shop}`);
    expect(h.fake.tokensOf(shop)).toEqual([session.accessToken]);
    expect(session.scope).toBe('write_products,write_files');
    expect(session.isActive(h.app.config.shopifyScopes)).toBe(true);

    // At rest: no token, scope or state in the clear.
    const backend = h.app.db.backend;
    if (backend.kind !== 'sqlite') throw new Error('expected the embedded database');
    const row = backend.sql.get('SELECT * FROM shopify_sessions WHERE shop = ?', shop)!;
    expect(JSON.stringify(row)).not.toContain(session.accessToken!);
    expect(JSON.stringify(row)).not.toContain('write_products');
    expect(String(row.sealed)).toMatch(/^v1\./);

    expect(h.fake.subscriptionsOf(shop).sort((a, b) => a.topic.localeCompare(b.topic))).toEqual([
      { topic: 'APP_UNINSTALLED', callbackUrl: `${APP_URL}/webhooks` },
      { topic: 'PRODUCTS_CREATE', callbackUrl: `${APP_URL}/webhooks` },
      { topic: 'PRODUCTS_UPDATE', callbackUrl: `${APP_URL}/webhooks` },
    ]);

    const record = await h.app.app.shops.find(shop);
    expect(record).toMatchObject({ shop, hasKey: true, keySource: 'provisioned' });
    expect(record?.uninstalledAt).toBeUndefined();
    const keyRow = backend.sql.get('SELECT key_sealed FROM shopify_shops WHERE shop = ?', shop)!;
    const key = (await h.app.app.shops.key(shop))!;
    expect(String(keyRow.key_sealed)).not.toContain(key);
    // The key is a Pro key of an account of the shop's own: the API answers it.
    const usage = await fetch(`${h.compresso.url}/api/v1/usage`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(usage.status).toBe(200);
    expect(((await usage.json()) as { plan: string }).plan).toBe('pro');
    const account = await h.compresso.db.findAccountById(record!.accountId!);
    expect(account?.email).toBe(`${shop}@shopify.invalid`);
  });

  it('installing again keeps the shop’s account and key, and does not duplicate subscriptions', async () => {
    const shop = h.fake.addShop('install-twice');
    await h.install(shop);
    const first = await h.app.app.shops.find(shop);
    const firstKey = await h.app.app.shops.key(shop);
    const again = await h.install(shop);
    expect(again.location).toContain('admin.shopify.com');
    expect((await h.app.app.shops.find(shop))?.accountId).toBe(first?.accountId);
    expect(await h.app.app.shops.key(shop)).toBe(firstKey);
    expect(h.fake.subscriptionsOf(shop)).toHaveLength(3);
    expect(await h.compresso.db.countAccounts()).toBeGreaterThanOrEqual(1);
  });

  it('refuses a callback whose HMAC is not Shopify’s (400) and a bot at the door (410)', async () => {
    const shop = h.fake.addShop('install-forged');
    const params = new URLSearchParams({
      code: 'forged',
      shop,
      state: 'x',
      timestamp: String(Math.floor(Date.now() / 1000)),
    });
    params.set('hmac', createHmac('sha256', 'not-the-secret').update(params.toString()).digest('hex'));
    // Begin first, so the state cookie exists and only the HMAC is wrong.
    const begin = await fetch(`${h.appUrl}/auth?shop=${shop}`, {
      redirect: 'manual',
      headers: { 'user-agent': BROWSER_UA },
    });
    const cookie = begin.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const state = new URL(begin.headers.get('location')!).searchParams.get('state')!;
    params.set('state', state);
    const forged = await fetch(`${h.appUrl}/auth/callback?${params}`, {
      redirect: 'manual',
      headers: { 'user-agent': BROWSER_UA, cookie },
    });
    expect(forged.status).toBe(400);
    expect(await h.app.app.sessions.findSessionsByShop(shop)).toEqual([]);
    expect(h.fake.tokensOf(shop)).toEqual([]);

    const bot = await fetch(`${h.appUrl}/auth?shop=${shop}`, { redirect: 'manual' });
    expect(bot.status).toBe(410);
    expect(API_SECRET).not.toBe('not-the-secret');
  });
});
