import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Database, sqliteDatabase } from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOPIFY_MIGRATIONS } from './migrations.ts';
import { createSealer } from './sealed.ts';
import { databaseSessionStorage } from './session-storage.ts';
import { DEFAULT_SETTINGS, shopStore } from './shop-store.ts';
import { shopifyApiLib } from './shopify-lib.ts';

const TEST_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = randomBytes(4).toString('hex');
const dir = mkdtempSync(join(tmpdir(), 'compresso-shopify-stores-'));
const schemas: string[] = [];
const admin = new pg.Pool({ connectionString: TEST_URL, max: 1, connectionTimeoutMillis: 5000 });
const sealer = createSealer('stores-test-key-0123456789abcdef-0123456789');
const { Session } = shopifyApiLib;

beforeAll(async () => {
  try {
    await admin.query('SELECT 1');
  } catch (error) {
    throw new Error(
      `These tests need PostgreSQL at ${TEST_URL} (COMPRESSO_TEST_DATABASE_URL): ${(error as Error).message}`,
    );
  }
});
afterAll(async () => {
  for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
});

type Open = () => Promise<Database>;

const backends: [string, Open][] = [
  [
    'sqlite',
    async () => {
      const db = sqliteDatabase({
        path: join(dir, `${randomBytes(4).toString('hex')}.sqlite`),
        migrations: [SHOPIFY_MIGRATIONS],
      });
      await db.migrate();
      return db;
    },
  ],
  [
    'postgres',
    async () => {
      const schema = `cmp_shopify_${run}_${schemas.length + 1}`;
      schemas.push(schema);
      const db = postgresDatabase({ url: TEST_URL, schema, migrations: [SHOPIFY_MIGRATIONS] });
      await db.migrate();
      return db;
    },
  ],
];

const offline = (shop: string, token = `shpat_${shop}`) =>
  new Session({
    id: `offline_${shop}`,
    shop,
    state: 'state-1',
    isOnline: false,
    scope: 'write_products',
    accessToken: token,
  });

describe.each(backends)('session storage on %s (the battery of Shopify’s own adapters)', (_name, open) => {
  let db: Database;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => {
    await db?.close();
  });

  it('stores, loads (equal, the same Session class) and deletes an offline session', async () => {
    const storage = databaseSessionStorage(db, sealer);
    const session = offline('a.myshopify.com');
    expect(await storage.storeSession(session)).toBe(true);
    const loaded = await storage.loadSession(session.id);
    expect(loaded).toBeInstanceOf(Session);
    expect(loaded?.equals(session)).toBe(true);
    expect(loaded?.accessToken).toBe('shpat_a.myshopify.com');
    expect(await storage.deleteSession(session.id)).toBe(true);
    expect(await storage.loadSession(session.id)).toBeUndefined();
    // Deleting what is not there is not an error.
    expect(await storage.deleteSession(session.id)).toBe(true);
  });

  it('keeps an online session with its expiry and user, and overwrites on a second store', async () => {
    const storage = databaseSessionStorage(db, sealer);
    const expires = new Date(Date.now() + 3_600_000);
    const session = new Session({
      id: 'b.myshopify.com_42',
      shop: 'b.myshopify.com',
      state: 'state-2',
      isOnline: true,
      scope: 'write_products',
      expires,
      accessToken: 'online-token',
      onlineAccessInfo: {
        expires_in: 3600,
        associated_user_scope: 'write_products',
        associated_user: {
          id: 42,
          first_name: 'Ada',
          last_name: 'L',
          email: 'ada@example.com',
          email_verified: true,
          account_owner: true,
          locale: 'en',
          collaborator: false,
        },
      },
    });
    await storage.storeSession(session);
    const loaded = await storage.loadSession(session.id);
    expect(loaded?.isOnline).toBe(true);
    expect(loaded?.expires?.getTime()).toBe(expires.getTime());
    expect(loaded?.onlineAccessInfo?.associated_user.email).toBe('ada@example.com');
    const renewed = new Session({ ...session.toObject(), accessToken: 'renewed-token' });
    await storage.storeSession(renewed);
    expect((await storage.loadSession(session.id))?.accessToken).toBe('renewed-token');
    expect(await storage.findSessionsByShop('b.myshopify.com')).toHaveLength(1);
  });

  it('finds the sessions of a shop and deletes several at once', async () => {
    const storage = databaseSessionStorage(db, sealer);
    const shop = 'c.myshopify.com';
    const sessions = [
      offline(shop),
      new Session({ id: `${shop}_1`, shop, state: 's', isOnline: true, accessToken: 't1' }),
    ];
    for (const s of sessions) await storage.storeSession(s);
    await storage.storeSession(offline('other.myshopify.com'));
    const found = await storage.findSessionsByShop(shop);
    expect(found.map((s) => s.id).sort()).toEqual(sessions.map((s) => s.id).sort());
    expect(await storage.findSessionsByShop('nobody.myshopify.com')).toEqual([]);
    expect(await storage.deleteSessions(sessions.map((s) => s.id))).toBe(true);
    expect(await storage.findSessionsByShop(shop)).toEqual([]);
    expect(await storage.findSessionsByShop('other.myshopify.com')).toHaveLength(1);
  });

  it('keeps the token sealed: not in the row, unreadable with another key or on another row', async () => {
    const storage = databaseSessionStorage(db, sealer);
    await storage.storeSession(offline('d.myshopify.com', 'shpat_secret_token_d'));
    await storage.storeSession(offline('e.myshopify.com', 'shpat_secret_token_e'));
    const rows =
      db.backend.kind === 'sqlite'
        ? db.backend.sql.all('SELECT * FROM shopify_sessions')
        : (await db.backend.sql.query('SELECT * FROM shopify_sessions')).rows;
    expect(JSON.stringify(rows)).not.toContain('shpat_secret_token');
    const other = databaseSessionStorage(db, createSealer('another-key-0123456789abcdef-0123456789ab'));
    await expect(other.loadSession('offline_d.myshopify.com')).rejects.toThrow();
    // A sealed value moved onto another session's row does not open there.
    const moved = rows.find((r) => r.id === 'offline_d.myshopify.com')?.sealed as string;
    if (db.backend.kind === 'sqlite') {
      db.backend.sql.run(
        'UPDATE shopify_sessions SET sealed = ? WHERE id = ?',
        moved,
        'offline_e.myshopify.com',
      );
    } else {
      await db.backend.sql.query('UPDATE shopify_sessions SET sealed = $1 WHERE id = $2', [
        moved,
        'offline_e.myshopify.com',
      ]);
    }
    await expect(storage.loadSession('offline_e.myshopify.com')).rejects.toThrow();
  });
});

describe.each(backends)('shop store on %s', (_name, open) => {
  let db: Database;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => {
    await db?.close();
  });

  it('installs, keeps the key sealed, settings, uninstall and reinstall, webhook ids once, erase', async () => {
    const shops = shopStore(db, sealer);
    const shop = 'f.myshopify.com';
    expect(await shops.isActive(shop)).toBe(false);
    const record = await shops.install(shop);
    expect(record).toMatchObject({ shop, hasKey: false, settings: DEFAULT_SETTINGS });
    await shops.setKey(shop, { secret: 'cmp_live_secret', accountId: 'acc_1', source: 'provisioned' });
    expect(await shops.key(shop)).toBe('cmp_live_secret');
    expect(await shops.updateSettings(shop, { quality: 70, keepExif: true })).toMatchObject({
      quality: 70,
      keepExif: true,
      enabled: true,
    });
    await shops.markUninstalled(shop);
    expect(await shops.isActive(shop)).toBe(false);
    const again = await shops.install(shop);
    expect(again).toMatchObject({ hasKey: true, accountId: 'acc_1', settings: { quality: 70 } });
    expect(again.uninstalledAt).toBeUndefined();

    expect(await shops.seenWebhook('wh-1')).toBe(false);
    const claims = await Promise.all(
      [1, 2, 3].map(() =>
        shops.claimWebhook({ id: 'wh-1', shop, topic: 'PRODUCTS_UPDATE', outcome: 'queued' }),
      ),
    );
    expect(claims.filter(Boolean)).toHaveLength(1);
    expect(await shops.seenWebhook('wh-1')).toBe(true);

    await databaseSessionStorage(db, sealer).storeSession(offline(shop));
    await shops.erase(shop);
    expect(await shops.find(shop)).toBeUndefined();
    expect(await shops.seenWebhook('wh-1')).toBe(false);
    expect(await databaseSessionStorage(db, sealer).findSessionsByShop(shop)).toEqual([]);
  });

  it('keeps the images waiting for the quota reset: added (again), ended one by one, erased with the shop', async () => {
    const shops = shopStore(db, sealer);
    const shop = 'g.myshopify.com';
    await shops.install(shop);
    expect(await shops.quotaWaits(shop)).toEqual({ count: 0, until: null, images: [] });
    const midnight = Date.parse('2026-11-28T00:00:00.000Z');
    const ids = ['gid://shopify/MediaImage/2', 'gid://shopify/MediaImage/1'];
    const wait = { productId: 'gid://shopify/Product/9', until: midnight, jobId: 'job-q1' };
    await shops.addQuotaWaits(shop, { ...wait, assetIds: ids });
    // The follow-up met the quota again: the same images wait for the next reset, not twice.
    await shops.addQuotaWaits(shop, {
      ...wait,
      assetIds: ids,
      until: midnight + 86_400_000,
      jobId: 'job-q2',
    });
    await shops.addQuotaWaits('other.myshopify.com', { ...wait, assetIds: ['gid://shopify/MediaImage/3'] });
    const waits = await shops.quotaWaits(shop, 1);
    expect(waits).toMatchObject({ count: 2, until: midnight + 86_400_000 });
    expect(waits.images).toEqual([
      { assetId: ids[1], productId: wait.productId, until: midnight + 86_400_000, jobId: 'job-q2' },
    ]);
    await shops.endQuotaWait(shop, ids[0]!);
    expect(await shops.quotaWaits(shop)).toMatchObject({ count: 1 });
    await shops.erase(shop);
    expect((await shops.quotaWaits(shop)).count).toBe(0);
    expect((await shops.quotaWaits('other.myshopify.com')).count).toBe(1);
  });
});
