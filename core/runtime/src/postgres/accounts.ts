import type { AccountStore, ApiKeyRecord, PlanId, PromoCode, RedeemOutcome } from '../database.ts';
import { DuplicateError } from '../database.ts';
import {
  iso,
  isoOrNull,
  isUniqueViolation,
  type PostgresConnection,
  type Row,
  toAccount,
} from './connection.ts';

function toKey(row: Row): ApiKeyRecord {
  return {
    id: String(row.id),
    accountId: String(row.account_id),
    name: String(row.name),
    prefix: String(row.prefix),
    hash: String(row.hash),
    createdAt: iso(row.created_at),
    lastUsedAt: isoOrNull(row.last_used_at),
    revokedAt: isoOrNull(row.revoked_at),
  };
}

function toPromo(row: Row): PromoCode {
  return {
    code: String(row.code),
    plan: String(row.plan) as PlanId,
    maxUses: Number(row.max_uses),
    uses: Number(row.uses),
    expiresAt: isoOrNull(row.expires_at),
    createdAt: iso(row.created_at),
  };
}

/** Accounts, promo codes and API keys on PostgreSQL. */
export function postgresAccountStore({ query, one, transaction }: PostgresConnection): AccountStore {
  return {
    async countAccounts() {
      return Number((await one('SELECT count(*)::int AS n FROM accounts'))?.n ?? 0);
    },
    async insertAccount(account) {
      try {
        await query('INSERT INTO accounts (id, email, plan, created_at) VALUES ($1, $2, $3, $4)', [
          account.id,
          account.email,
          account.plan,
          account.createdAt,
        ]);
      } catch (error) {
        if (isUniqueViolation(error))
          throw new DuplicateError(`an account with email ${account.email} exists`);
        throw error;
      }
    },
    async findAccountById(id) {
      const row = await one('SELECT * FROM accounts WHERE id = $1', [id]);
      return row && toAccount(row);
    },
    async findAccountByEmail(email) {
      const row = await one('SELECT * FROM accounts WHERE lower(email) = lower($1)', [email]);
      return row && toAccount(row);
    },
    async setAccountPlan(accountId, plan) {
      await query('UPDATE accounts SET plan = $1 WHERE id = $2', [plan, accountId]);
    },
    async insertPromo(promo) {
      try {
        await query(
          'INSERT INTO promo_codes (code, plan, max_uses, uses, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
          [promo.code, promo.plan, promo.maxUses, promo.uses, promo.expiresAt, promo.createdAt],
        );
      } catch (error) {
        if (isUniqueViolation(error)) throw new DuplicateError(`promo code ${promo.code} exists`);
        throw error;
      }
    },
    async findPromo(code) {
      const row = await one('SELECT * FROM promo_codes WHERE code = $1', [code]);
      return row && toPromo(row);
    },
    async redeemPromo(code, accountId, now): Promise<RedeemOutcome> {
      return transaction(async (client): Promise<RedeemOutcome> => {
        // FOR UPDATE serialises redeemers of one code: the second waits for the first to commit and
        // then sees its use and its redemption row, so uses never exceed max_uses.
        const promoRow = (
          await client.query<Row>('SELECT * FROM promo_codes WHERE code = $1 FOR UPDATE', [code])
        ).rows[0];
        if (!promoRow) return { ok: false, reason: 'unknown_code' };
        const accountRow = (await client.query<Row>('SELECT * FROM accounts WHERE id = $1', [accountId]))
          .rows[0];
        if (!accountRow) return { ok: false, reason: 'unknown_account' };
        const promo = toPromo(promoRow);
        if (promo.expiresAt !== null && Date.parse(promo.expiresAt) <= Date.parse(now)) {
          return { ok: false, reason: 'expired' };
        }
        const redeemed = await client.query(
          'SELECT 1 FROM promo_redemptions WHERE code = $1 AND account_id = $2',
          [code, accountId],
        );
        if (redeemed.rowCount) return { ok: false, reason: 'already_redeemed' };
        const counted = (
          await client.query<Row>(
            'UPDATE promo_codes SET uses = uses + 1 WHERE code = $1 AND uses < max_uses RETURNING uses',
            [code],
          )
        ).rows[0];
        if (!counted) return { ok: false, reason: 'used_up' };
        await client.query(
          'INSERT INTO promo_redemptions (code, account_id, redeemed_at) VALUES ($1, $2, $3)',
          [code, accountId, now],
        );
        await client.query('UPDATE accounts SET plan = $1 WHERE id = $2', [promo.plan, accountId]);
        return {
          ok: true,
          account: { ...toAccount(accountRow), plan: promo.plan },
          promo: { ...promo, uses: Number(counted.uses) },
        };
      });
    },
    async insertApiKey(key) {
      await query(
        'INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, last_used_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
        [key.id, key.accountId, key.name, key.prefix, key.hash, key.createdAt, key.lastUsedAt, key.revokedAt],
      );
    },
    async findActiveKeyByHash(hash) {
      const row = await one(
        `SELECT k.*, a.id AS a_id, a.email AS a_email, a.plan AS a_plan, a.created_at AS a_created_at
         FROM api_keys k JOIN accounts a ON a.id = k.account_id
         WHERE k.hash = $1 AND k.revoked_at IS NULL`,
        [hash],
      );
      if (!row) return undefined;
      return { key: toKey(row), account: toAccount(row, 'a_') };
    },
    async listApiKeys(accountId) {
      const { rows } = await query('SELECT * FROM api_keys WHERE account_id = $1 ORDER BY created_at, id', [
        accountId,
      ]);
      return rows.map(toKey);
    },
    async findApiKey(id) {
      const row = await one('SELECT * FROM api_keys WHERE id = $1', [id]);
      return row && toKey(row);
    },
    async revokeApiKey(id, now, accountId) {
      const result =
        accountId === undefined
          ? await query('UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [now, id])
          : await query(
              'UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND account_id = $3 AND revoked_at IS NULL',
              [now, id, accountId],
            );
      return result.rowCount === 1;
    },
    async touchApiKey(id, now, staleBefore) {
      await query(
        'UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)',
        [now, id, staleBefore],
      );
    },
  };
}
