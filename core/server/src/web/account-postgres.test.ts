import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createEngine } from '@compresso/engine';
import { createLogger, createPromoCode, type Database, loadConfig } from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../app.ts';
import { createHttpServer } from '../start.ts';
import { signupTokenFromLog } from '../testing.ts';
import { Browser } from './test-browser.ts';

/**
 * The web pages on PostgreSQL with two app instances (own pool, own port) over one database, as
 * when several processes share the load: a session, a CSRF token and a reset link made by one are
 * good on the other, and a reset link still works only once. Each run uses a schema of its own.
 */
const TEST_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `cmp_web_${randomBytes(4).toString('hex')}`;
const admin = new pg.Pool({ connectionString: TEST_URL, max: 1, connectionTimeoutMillis: 5000 });

interface Instance {
  url: string;
  db: Database;
  log: string[];
  close(): Promise<void>;
}

async function instance(): Promise<Instance> {
  const config = loadConfig({}, { databaseUrl: TEST_URL, maxUploadBytes: 1024 * 1024 });
  const log: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      log.push(String(chunk));
      done();
    },
  });
  const db = postgresDatabase({ url: TEST_URL, schema, poolSize: 4 });
  await db.migrate();
  const engine = createEngine({ concurrency: 1, limits: { maxInputBytes: config.maxUploadBytes } });
  const server: Server = createHttpServer(
    createApp({ engine, db, logger: createLogger(config, sink), config }),
    config,
  );
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1' }, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    db,
    log,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await db.close();
    },
  };
}

let a: Instance;
let b: Instance;

beforeAll(async () => {
  try {
    await admin.query('SELECT 1');
  } catch (error) {
    throw new Error(
      `These tests need PostgreSQL at ${TEST_URL} (set COMPRESSO_TEST_DATABASE_URL to use another): ${(error as Error).message}`,
    );
  }
  a = await instance();
  b = await instance();
});

afterAll(async () => {
  await a?.close();
  await b?.close();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
});

describe('web account pages on PostgreSQL, two instances', () => {
  it('shares sessions, CSRF tokens and one-time reset links between instances', async () => {
    await createPromoCode(a.db, { code: 'PG-PRO', plan: 'pro', uses: 5 });
    const onA = new Browser(a.url);
    let res = await onA.submit('/signup', '/signup', {
      email: 'pg@example.com',
      password: 'postgres passphrase',
    });
    expect(res.status).toBe(200);
    // The link A sealed opens on B (the sealing key is in the database).
    const signup = signupTokenFromLog(a.log);
    const finish = new Browser(b.url);
    res = await finish.submit(`/signup/${signup}`, `/signup/${signup}`, {});
    expect(res.status).toBe(303);
    for (const [k, v] of finish.cookies) onA.cookies.set(k, v);

    // The same cookies on the other instance: signed in, and A's token is accepted there.
    const onB = new Browser(b.url);
    for (const [k, v] of onA.cookies) onB.cookies.set(k, v);
    const token = await onA.token('/account');
    res = await onB.post('/account/promo', { _csrf: token, code: 'PG-PRO' });
    expect(res.status).toBe(303);
    res = await onB.submit('/account', '/account/keys', { name: 'pg key' });
    expect(res.status).toBe(201);
    expect(await (await onA.get('/account')).text()).toContain('<td>pg key</td>');

    // A reset link asked on A, used on B, then refused on A.
    const stranger = new Browser(a.url);
    res = await stranger.submit('/reset', '/reset', { email: 'pg@example.com' });
    expect(res.status).toBe(200);
    const reset = /\/reset\/([A-Za-z0-9_-]{43})/.exec(a.log.join(''))?.[1] ?? '';
    expect(reset).not.toBe('');
    const onB2 = new Browser(b.url);
    res = await onB2.submit(`/reset/${reset}`, `/reset/${reset}`, { password: 'new postgres passphrase' });
    expect(res.status).toBe(303);
    expect((await stranger.get(`/reset/${reset}`)).status).toBe(400);
    res = await stranger.submit('/reset', `/reset/${reset}`, {
      password: 'third postgres passphrase',
    });
    expect(res.status).toBe(400);
    // The reset signed the first browser out everywhere.
    expect((await onA.get('/account')).status).toBe(303);
    const again = new Browser(a.url);
    res = await again.submit('/login', '/login', {
      email: 'pg@example.com',
      password: 'new postgres passphrase',
    });
    expect(res.status).toBe(303);
  });
});
