import type { WebSessionStore } from '../database.ts';
import { iso, type PostgresConnection, toAccount } from './connection.ts';

/** Passwords, browser sessions, reset tokens and server secrets on PostgreSQL. */
export function postgresWebSessionStore({ query, one }: PostgresConnection): WebSessionStore {
  return {
    async setPasswordHash(accountId, hash, now) {
      await query(
        `INSERT INTO account_passwords (account_id, hash, updated_at) VALUES ($1, $2, $3)
         ON CONFLICT (account_id) DO UPDATE SET hash = excluded.hash, updated_at = excluded.updated_at`,
        [accountId, hash, now],
      );
    },
    async findPasswordHash(accountId) {
      const row = await one('SELECT hash FROM account_passwords WHERE account_id = $1', [accountId]);
      return row ? String(row.hash) : undefined;
    },
    async insertWebSession(session) {
      await query(
        'INSERT INTO web_sessions (id_hash, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4)',
        [session.idHash, session.accountId, session.createdAt, session.expiresAt],
      );
    },
    async findWebSession(idHash, now) {
      const row = await one(
        `SELECT s.*, a.id AS a_id, a.email AS a_email, a.plan AS a_plan, a.created_at AS a_created_at
         FROM web_sessions s JOIN accounts a ON a.id = s.account_id
         WHERE s.id_hash = $1 AND s.expires_at > $2`,
        [idHash, now],
      );
      if (!row) return undefined;
      return {
        session: {
          idHash: String(row.id_hash),
          accountId: String(row.account_id),
          createdAt: iso(row.created_at),
          expiresAt: iso(row.expires_at),
        },
        account: toAccount(row, 'a_'),
      };
    },
    async deleteWebSession(idHash) {
      await query('DELETE FROM web_sessions WHERE id_hash = $1', [idHash]);
    },
    async deleteAccountWebSessions(accountId) {
      await query('DELETE FROM web_sessions WHERE account_id = $1', [accountId]);
    },
    async pruneWebSessions(now) {
      await query('DELETE FROM web_sessions WHERE expires_at <= $1', [now]);
      await query('DELETE FROM password_reset_tokens WHERE expires_at <= $1', [now]);
    },
    async insertResetToken(hash, accountId, now, expiresAt) {
      await query(
        'INSERT INTO password_reset_tokens (hash, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4)',
        [hash, accountId, now, expiresAt],
      );
    },
    async consumeResetToken(hash, now) {
      const row = await one(
        `UPDATE password_reset_tokens SET used_at = $1
         WHERE hash = $2 AND used_at IS NULL AND expires_at > $1 RETURNING account_id`,
        [now, hash],
      );
      return row ? String(row.account_id) : undefined;
    },
    async resetTokenUsable(hash, now) {
      const row = await one(
        `SELECT 1 FROM password_reset_tokens WHERE hash = $1 AND used_at IS NULL AND expires_at > $2`,
        [hash, now],
      );
      return row !== undefined;
    },
    async webSecret(name, candidate) {
      await query('INSERT INTO web_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
        name,
        candidate,
      ]);
      return String((await one('SELECT value FROM web_secrets WHERE name = $1', [name]))?.value);
    },
  };
}
