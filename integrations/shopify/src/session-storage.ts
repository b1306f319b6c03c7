import type { Database } from '@compresso/runtime';
import type { SessionStorage } from '@shopify/shopify-app-session-storage';
import type { Sealer } from './sealed.ts';
import { type Session, shopifyApiLib } from './shopify-lib.ts';
import { appSql } from './sql.ts';

/**
 * The library's sessions on the runtime database (SQLite or PostgreSQL, the app's own migrations):
 * the SessionStorage interface @shopify/shopify-app-express calls. A session is stored as the
 * library's own property list (what Shopify's official adapters store), sealed as one value bound
 * to the session id; id, shop, online/offline and expiry stay in the clear for lookups. The official
 * SQLite/PostgreSQL adapters open connections of their own, beside the runtime's pool and outside its
 * migrations and close order, hence this one.
 */
export function databaseSessionStorage(db: Database, sealer: Sealer): SessionStorage {
  const sql = appSql(db.backend);
  const context = (id: string) => `shopify-session:${id}`;
  const revive = (row: Record<string, unknown>): Session => {
    const entries = JSON.parse(sealer.open(String(row.sealed), context(String(row.id)))) as [
      string,
      string | number | boolean,
    ][];
    return shopifyApiLib.Session.fromPropertyArray(entries, true);
  };
  return {
    async storeSession(session) {
      const now = new Date().toISOString();
      const sealed = sealer.seal(JSON.stringify(session.toPropertyArray(true)), context(session.id));
      await sql.run(
        `INSERT INTO shopify_sessions (id, shop, is_online, expires_at, sealed, updated_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET shop = excluded.shop, is_online = excluded.is_online,
           expires_at = excluded.expires_at, sealed = excluded.sealed, updated_at = excluded.updated_at`,
        session.id,
        session.shop,
        session.isOnline ? 1 : 0,
        session.expires ? session.expires.toISOString() : null,
        sealed,
        now,
      );
      return true;
    },
    async loadSession(id) {
      const row = await sql.get('SELECT id, sealed FROM shopify_sessions WHERE id = ?', id);
      return row ? revive(row) : undefined;
    },
    async deleteSession(id) {
      await sql.run('DELETE FROM shopify_sessions WHERE id = ?', id);
      return true;
    },
    async deleteSessions(ids) {
      for (const id of ids) await sql.run('DELETE FROM shopify_sessions WHERE id = ?', id);
      return true;
    },
    async findSessionsByShop(shop) {
      const rows = await sql.all('SELECT id, sealed FROM shopify_sessions WHERE shop = ? ORDER BY id', shop);
      return rows.map(revive);
    },
  };
}
