import type { Database, MigrationSet, PostgresSql, SqliteSql } from '@compresso/runtime';

/**
 * An integration's own store, written the way the runtime README tells integrations to: its tables
 * as a MigrationSet under its own namespace for both backends, and its queries on the Database's
 * connection (`db.backend`). The conformance tests run it on SQLite and PostgreSQL, so the recipe
 * the Shopify app and the WordPress bridge will follow is proven to work on both.
 */
export const SHOP_MIGRATIONS: MigrationSet = {
  namespace: 'example_shop',
  sqlite: [
    {
      version: 1,
      sql: `CREATE TABLE example_shops (
        domain TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id),
        installed_at TEXT NOT NULL
      )`,
    },
    // A later release adds a column: the next version, never an edit of the first.
    { version: 2, sql: `ALTER TABLE example_shops ADD COLUMN images_done INTEGER NOT NULL DEFAULT 0` },
  ],
  postgres: [
    {
      version: 1,
      sql: `CREATE TABLE example_shops (
        domain text PRIMARY KEY,
        account_id text NOT NULL REFERENCES accounts (id),
        installed_at timestamptz NOT NULL
      )`,
    },
    { version: 2, sql: `ALTER TABLE example_shops ADD COLUMN images_done integer NOT NULL DEFAULT 0` },
  ],
};

export interface Shop {
  domain: string;
  accountId: string;
  installedAt: string;
  imagesDone: number;
}

export interface ShopStore {
  /** Record an install; false when the shop was installed already. */
  install(shop: Omit<Shop, 'imagesDone'>): Promise<boolean>;
  find(domain: string): Promise<Shop | undefined>;
  /** Count `n` images done, in one statement (no read-then-write). The new total. */
  countImages(domain: string, n: number): Promise<number>;
  /** Move every count of `from` onto `to` and forget `from`, all or nothing. */
  merge(from: string, to: string): Promise<void>;
}

const toShop = (row: Record<string, unknown>): Shop => ({
  domain: String(row.domain),
  accountId: String(row.account_id),
  installedAt: row.installed_at instanceof Date ? row.installed_at.toISOString() : String(row.installed_at),
  imagesDone: Number(row.images_done),
});

function sqliteShopStore(sql: SqliteSql): ShopStore {
  return {
    async install(shop) {
      return (
        sql.run(
          'INSERT INTO example_shops (domain, account_id, installed_at) VALUES (?, ?, ?) ON CONFLICT (domain) DO NOTHING',
          shop.domain,
          shop.accountId,
          shop.installedAt,
        ).changes === 1
      );
    },
    async find(domain) {
      const row = sql.get('SELECT * FROM example_shops WHERE domain = ?', domain);
      return row && toShop(row);
    },
    async countImages(domain, n) {
      const row = sql.get(
        'UPDATE example_shops SET images_done = images_done + ? WHERE domain = ? RETURNING images_done',
        n,
        domain,
      );
      return Number(row?.images_done ?? 0);
    },
    async merge(from, to) {
      sql.transaction(() => {
        const row = sql.get('DELETE FROM example_shops WHERE domain = ? RETURNING images_done', from);
        if (!row) throw new Error(`no shop ${from}`);
        const moved = sql.run(
          'UPDATE example_shops SET images_done = images_done + ? WHERE domain = ?',
          Number(row.images_done),
          to,
        );
        if (moved.changes !== 1) throw new Error(`no shop ${to}`);
      });
    },
  };
}

function postgresShopStore(sql: PostgresSql): ShopStore {
  return {
    async install(shop) {
      const { rowCount } = await sql.query(
        'INSERT INTO example_shops (domain, account_id, installed_at) VALUES ($1, $2, $3) ON CONFLICT (domain) DO NOTHING',
        [shop.domain, shop.accountId, shop.installedAt],
      );
      return rowCount === 1;
    },
    async find(domain) {
      const { rows } = await sql.query('SELECT * FROM example_shops WHERE domain = $1', [domain]);
      return rows[0] && toShop(rows[0]);
    },
    async countImages(domain, n) {
      const { rows } = await sql.query(
        'UPDATE example_shops SET images_done = images_done + $1 WHERE domain = $2 RETURNING images_done',
        [n, domain],
      );
      return Number(rows[0]?.images_done ?? 0);
    },
    async merge(from, to) {
      await sql.transaction(async (tx) => {
        const { rows } = await tx.query('DELETE FROM example_shops WHERE domain = $1 RETURNING images_done', [
          from,
        ]);
        if (!rows[0]) throw new Error(`no shop ${from}`);
        const moved = await tx.query(
          'UPDATE example_shops SET images_done = images_done + $1 WHERE domain = $2',
          [Number(rows[0].images_done), to],
        );
        if (moved.rowCount !== 1) throw new Error(`no shop ${to}`);
      });
    },
  };
}

/** The store on whichever backend `db` is. Register SHOP_MIGRATIONS before db.migrate(). */
export function shopStore(db: Database): ShopStore {
  return db.backend.kind === 'sqlite' ? sqliteShopStore(db.backend.sql) : postgresShopStore(db.backend.sql);
}
