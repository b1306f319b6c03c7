import type { WebSessionStore } from '../database.ts';
import { joinedAccount, type Row, type SqliteConnection } from './connection.ts';

/** Passwords, browser sessions, reset tokens and server secrets on SQLite. */
export function sqliteWebSessionStore({ stmt }: SqliteConnection): WebSessionStore {
  return {
    async setPasswordHash(accountId, hash, now) {
      stmt(
        `INSERT INTO account_passwords (account_id, hash, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (account_id) DO UPDATE SET hash = excluded.hash, updated_at = excluded.updated_at`,
      ).run(accountId, hash, now);
    },
    async findPasswordHash(accountId) {
      const row = stmt('SELECT hash FROM account_passwords WHERE account_id = ?').get(accountId) as
        | Row
        | undefined;
      return row ? String(row.hash) : undefined;
    },
    async insertWebSession(session) {
      stmt('INSERT INTO web_sessions (id_hash, account_id, created_at, expires_at) VALUES (?, ?, ?, ?)').run(
        session.idHash,
        session.accountId,
        session.createdAt,
        session.expiresAt,
      );
    },
    async findWebSession(idHash, now) {
      const row = stmt(
        `SELECT s.*, a.email AS a_email, a.plan AS a_plan, a.created_at AS a_created_at
         FROM web_sessions s JOIN accounts a ON a.id = s.account_id
         WHERE s.id_hash = ? AND s.expires_at > ?`,
      ).get(idHash, now) as Row | undefined;
      if (!row) return undefined;
      return {
        session: {
          idHash: String(row.id_hash),
          accountId: String(row.account_id),
          createdAt: String(row.created_at),
          expiresAt: String(row.expires_at),
        },
        account: joinedAccount(row),
      };
    },
    async deleteWebSession(idHash) {
      stmt('DELETE FROM web_sessions WHERE id_hash = ?').run(idHash);
    },
    async deleteAccountWebSessions(accountId) {
      stmt('DELETE FROM web_sessions WHERE account_id = ?').run(accountId);
    },
    async pruneWebSessions(now) {
      stmt('DELETE FROM web_sessions WHERE expires_at <= ?').run(now);
      stmt('DELETE FROM password_reset_tokens WHERE expires_at <= ?').run(now);
    },
    async insertResetToken(hash, accountId, now, expiresAt) {
      stmt(
        'INSERT INTO password_reset_tokens (hash, account_id, created_at, expires_at) VALUES (?, ?, ?, ?)',
      ).run(hash, accountId, now, expiresAt);
    },
    async consumeResetToken(hash, now) {
      const row = stmt(
        `UPDATE password_reset_tokens SET used_at = ?
         WHERE hash = ? AND used_at IS NULL AND expires_at > ? RETURNING account_id`,
      ).get(now, hash, now) as Row | undefined;
      return row ? String(row.account_id) : undefined;
    },
    async resetTokenUsable(hash, now) {
      return (
        stmt(`SELECT 1 FROM password_reset_tokens WHERE hash = ? AND used_at IS NULL AND expires_at > ?`).get(
          hash,
          now,
        ) !== undefined
      );
    },
    async webSecret(name, candidate) {
      stmt('INSERT INTO web_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING').run(
        name,
        candidate,
      );
      return String((stmt('SELECT value FROM web_secrets WHERE name = ?').get(name) as Row).value);
    },
  };
}
