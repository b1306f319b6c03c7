import type { AccountStore, ApiKeyRecord, PlanId, PromoCode, RedeemOutcome } from '../database.ts';
import { DuplicateError } from '../database.ts';
import {
  isUniqueViolation,
  joinedAccount,
  type Row,
  type SqliteConnection,
  toAccount,
} from './connection.ts';

function toKey(row: Row): ApiKeyRecord {
  return {
    id: String(row.id),
    accountId: String(row.account_id),
    name: String(row.name),
    prefix: String(row.prefix),
    hash: String(row.hash),
    createdAt: String(row.created_at),
    lastUsedAt: row.last_used_at == null ? null : String(row.last_used_at),
    revokedAt: row.revoked_at == null ? null : String(row.revoked_at),
  };
}

function toPromo(row: Row): PromoCode {
  return {
    code: String(row.code),
    plan: String(row.plan) as PlanId,
    maxUses: Number(row.max_uses),
    uses: Number(row.uses),
    expiresAt: row.expires_at == null ? null : String(row.expires_at),
    createdAt: String(row.created_at),
  };
}

/** Accounts, promo codes and API keys on SQLite. */
export function sqliteAccountStore({ stmt, transaction }: SqliteConnection): AccountStore {
  return {
    async countAccounts() {
      return Number((stmt('SELECT count(*) AS n FROM accounts').get() as Row).n);
    },
    async insertAccount(account) {
      try {
        stmt('INSERT INTO accounts (id, email, plan, created_at) VALUES (?, ?, ?, ?)').run(
          account.id,
          account.email,
          account.plan,
          account.createdAt,
        );
      } catch (error) {
        if (isUniqueViolation(error))
          throw new DuplicateError(`an account with email ${account.email} exists`);
        throw error;
      }
    },
    async findAccountById(id) {
      const row = stmt('SELECT * FROM accounts WHERE id = ?').get(id) as Row | undefined;
      return row && toAccount(row);
    },
    async findAccountByEmail(email) {
      const row = stmt('SELECT * FROM accounts WHERE lower(email) = lower(?)').get(email) as Row | undefined;
      return row && toAccount(row);
    },
    async setAccountPlan(accountId, plan) {
      stmt('UPDATE accounts SET plan = ? WHERE id = ?').run(plan, accountId);
    },
    async insertPromo(promo) {
      try {
        stmt(
          'INSERT INTO promo_codes (code, plan, max_uses, uses, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)',
        ).run(promo.code, promo.plan, promo.maxUses, promo.uses, promo.expiresAt, promo.createdAt);
      } catch (error) {
        if (isUniqueViolation(error)) throw new DuplicateError(`promo code ${promo.code} exists`);
        throw error;
      }
    },
    async findPromo(code) {
      const row = stmt('SELECT * FROM promo_codes WHERE code = ?').get(code) as Row | undefined;
      return row && toPromo(row);
    },
    async redeemPromo(code, accountId, now): Promise<RedeemOutcome> {
      return transaction((): RedeemOutcome => {
        const promoRow = stmt('SELECT * FROM promo_codes WHERE code = ?').get(code) as Row | undefined;
        if (!promoRow) return { ok: false, reason: 'unknown_code' };
        const accountRow = stmt('SELECT * FROM accounts WHERE id = ?').get(accountId) as Row | undefined;
        if (!accountRow) return { ok: false, reason: 'unknown_account' };
        const promo = toPromo(promoRow);
        if (promo.expiresAt !== null && promo.expiresAt <= now) return { ok: false, reason: 'expired' };
        if (
          stmt('SELECT 1 AS x FROM promo_redemptions WHERE code = ? AND account_id = ?').get(code, accountId)
        ) {
          return { ok: false, reason: 'already_redeemed' };
        }
        const counted = stmt(
          'UPDATE promo_codes SET uses = uses + 1 WHERE code = ? AND uses < max_uses RETURNING uses',
        ).get(code) as Row | undefined;
        if (!counted) return { ok: false, reason: 'used_up' };
        stmt('INSERT INTO promo_redemptions (code, account_id, redeemed_at) VALUES (?, ?, ?)').run(
          code,
          accountId,
          now,
        );
        stmt('UPDATE accounts SET plan = ? WHERE id = ?').run(promo.plan, accountId);
        return {
          ok: true,
          account: { ...toAccount(accountRow), plan: promo.plan },
          promo: { ...promo, uses: Number(counted.uses) },
        };
      });
    },
    async insertApiKey(key) {
      stmt(
        'INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, last_used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      ).run(
        key.id,
        key.accountId,
        key.name,
        key.prefix,
        key.hash,
        key.createdAt,
        key.lastUsedAt,
        key.revokedAt,
      );
    },
    async findActiveKeyByHash(hash) {
      const row = stmt(
        `SELECT k.*, a.email AS a_email, a.plan AS a_plan, a.created_at AS a_created_at
         FROM api_keys k JOIN accounts a ON a.id = k.account_id
         WHERE k.hash = ? AND k.revoked_at IS NULL`,
      ).get(hash) as Row | undefined;
      if (!row) return undefined;
      return { key: toKey(row), account: joinedAccount(row) };
    },
    async listApiKeys(accountId) {
      const rows = stmt('SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at, id').all(
        accountId,
      ) as Row[];
      return rows.map(toKey);
    },
    async findApiKey(id) {
      const row = stmt('SELECT * FROM api_keys WHERE id = ?').get(id) as Row | undefined;
      return row && toKey(row);
    },
    async revokeApiKey(id, now, accountId) {
      const result =
        accountId === undefined
          ? stmt('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(now, id)
          : stmt(
              'UPDATE api_keys SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL',
            ).run(now, id, accountId);
      return Number(result.changes) === 1;
    },
    async touchApiKey(id, now, staleBefore) {
      stmt(
        'UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)',
      ).run(now, id, staleBefore);
    },
  };
}
