import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount, type Database, sqliteDatabase } from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import { Browser, hashPassword } from '@compresso/server/testing';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { type Proc, startServe } from './processes.ts';

/**
 * The log-in throttle across processes: two real `compresso serve` processes over one database (a
 * SQLite file, then a PostgreSQL database), a burst of 25 wrong passwords spread over both at once.
 * The attempt is counted in the database before the password is checked, so the two processes
 * together let exactly five through; checking first and counting after let all 25 through.
 */
const ADMIN_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const PASSWORD = 'correct horse battery';
const run = randomBytes(4).toString('hex');
const work = mkdtempSync(join(tmpdir(), 'compresso-login-burst-'));
const procs: Proc[] = [];
const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1, connectionTimeoutMillis: 5000 });
const pgName = `cmp_login_${run}`;

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await admin.query(`DROP DATABASE IF EXISTS ${pgName} WITH (FORCE)`).catch(() => {});
  await admin.end();
  rmSync(work, { recursive: true, force: true });
});

function envFor(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(env))
    if (key.startsWith('COMPRESSO_') || key === 'DATABASE_URL') delete env[key];
  delete env.REDIS_URL;
  return { ...env, COMPRESSO_WORKERS: '1', COMPRESSO_CONCURRENCY: '1', LOG_LEVEL: 'warn', ...extra };
}

/** The form's cookie and token from one process: both processes share the CSRF secret (database). */
async function loginForm(url: string): Promise<{ cookie: string; token: string }> {
  const browser = new Browser(url);
  const token = await browser.token('/login');
  return { cookie: [...browser.cookies].map(([k, v]) => `${k}=${v}`).join('; '), token };
}

async function burst(urls: string[], db: Database): Promise<Record<number, number>> {
  const account = await createAccount(db, 'burst@example.com');
  await db.setPasswordHash(account.id, await hashPassword(PASSWORD), new Date().toISOString());
  const { cookie, token } = await loginForm(urls[0]!);
  const results = await Promise.all(
    Array.from({ length: 25 }, (_, i) =>
      fetch(`${urls[i % urls.length]}/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
        body: new URLSearchParams({ _csrf: token, email: 'burst@example.com', password: `guess ${i}` }),
      }).then(async (res) => {
        await res.arrayBuffer();
        return res.status;
      }),
    ),
  );
  return results.reduce<Record<number, number>>((counts, s) => {
    counts[s] = (counts[s] ?? 0) + 1;
    return counts;
  }, {});
}

describe('a burst of wrong passwords over two processes', () => {
  it('SQLite file shared by two processes: five checked, twenty refused', async () => {
    const dataDir = join(work, 'sqlite');
    const env = envFor({ COMPRESSO_DATA_DIR: dataDir });
    const a = await startServe('sqlite-a', env);
    procs.push(a.proc);
    const b = await startServe('sqlite-b', env);
    procs.push(b.proc);
    const db = sqliteDatabase({ dataDir });
    try {
      await db.migrate();
      expect(await burst([a.url, b.url], db)).toEqual({ 401: 5, 429: 20 });
    } finally {
      await db.close();
    }
  });

  it('PostgreSQL shared by two processes: five checked, twenty refused', async () => {
    await admin.query(`CREATE DATABASE ${pgName}`);
    const url = new URL(ADMIN_URL);
    url.pathname = `/${pgName}`;
    const env = envFor({ DATABASE_URL: url.toString(), COMPRESSO_DATA_DIR: join(work, 'pg') });
    const a = await startServe('pg-a', env);
    procs.push(a.proc);
    const b = await startServe('pg-b', env);
    procs.push(b.proc);
    const db = postgresDatabase({ url: url.toString(), poolSize: 2 });
    try {
      await db.migrate();
      expect(await burst([a.url, b.url], db)).toEqual({ 401: 5, 429: 20 });
    } finally {
      await db.close();
    }
  });
});
