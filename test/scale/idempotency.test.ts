import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  applyPromo,
  createAccount,
  createApiKey,
  createPromoCode,
  type Database,
  quotaDay,
} from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import pg from 'pg';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Proc, startServe } from './processes.ts';

/**
 * Idempotency-Key across processes: two real `compresso serve` processes on one PostgreSQL database
 * (a database of this run's own), 200 submissions sent at once — 20 keys, each 10 times, alternating
 * between the processes. Each key must spend the quota once and get one answer, whichever process a
 * copy reached and whenever it arrived (before, during or after the first one's work).
 */
const ADMIN_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = randomBytes(4).toString('hex');
const dbName = `cmp_idem_proc_${run}`;
const DATABASE_URL = (() => {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${dbName}`;
  return url.toString();
})();
const work = mkdtempSync(join(tmpdir(), 'compresso-idem-'));
const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1, connectionTimeoutMillis: 5000 });
let db: Database;
const procs: Proc[] = [];
let urls: string[] = [];

beforeAll(async () => {
  await admin.query(`CREATE DATABASE "${dbName}"`);
  db = postgresDatabase({ url: DATABASE_URL, poolSize: 2 });
  await db.migrate();
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(env))
    if (key.startsWith('COMPRESSO_') || key === 'REDIS_URL') delete env[key];
  const started = await Promise.all(
    ['a', 'b'].map((name) =>
      startServe(`serve-${name}`, {
        ...env,
        DATABASE_URL,
        COMPRESSO_DATA_DIR: join(work, `data-${name}`),
        COMPRESSO_CONCURRENCY: '1',
        LOG_LEVEL: 'warn',
        MALLOC_ARENA_MAX: '2',
      }),
    ),
  );
  for (const s of started) procs.push(s.proc);
  urls = started.map((s) => s.url);
}, 180_000);

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await db?.close();
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await admin.end();
  rmSync(work, { recursive: true, force: true });
});

describe('Idempotency-Key across two server processes on PostgreSQL', () => {
  it('200 concurrent duplicated submissions (20 keys × 10): quota spent once per key, one answer per key', async () => {
    const email = `idem-${run}@example.com`;
    const account = await createAccount(db, email);
    const code = `P${randomBytes(5).toString('hex').toUpperCase()}`;
    await createPromoCode(db, { code, plan: 'pro', uses: 1 });
    await applyPromo(db, email, code);
    const { secret } = await createApiKey(db, account.id, 'idem');
    const image = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#3a7' } })
      .jpeg({ quality: 95 })
      .toBuffer();
    const keys = Array.from({ length: 20 }, (_, k) => `proc-${run}-${k}`);
    const answers = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const k = i % 20;
        const body = new FormData();
        body.append('quality', String(40 + k));
        body.append('output_format', 'webp');
        body.append('file', new Blob([new Uint8Array(image)], { type: 'image/jpeg' }), `p-${k}.jpg`);
        const res = await fetch(`${urls[i % 2]}/api/v1/compress`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'idempotency-key': keys[k]! },
          body,
        });
        return {
          k,
          status: res.status,
          replayed: res.headers.get('idempotent-replayed') === 'true',
          disposition: res.headers.get('content-disposition'),
          size: res.headers.get('x-output-size'),
          body: Buffer.from(await res.arrayBuffer()).toString('base64'),
        };
      }),
    );
    expect(await db.usageOn(account.id, quotaDay())).toBe(20);
    for (let k = 0; k < 20; k++) {
      const mine = answers.filter((a) => a.k === k);
      expect(mine.filter((a) => !a.replayed)).toHaveLength(1);
      const first = mine.find((a) => !a.replayed)!;
      expect(first.status).toBe(200);
      expect(first.disposition).toBe(`attachment; filename="p-${k}.webp"`);
      for (const a of mine) expect({ ...a, replayed: false }).toEqual(first);
    }
    // Half the copies went to each process (i % 2); both are still serving.
    expect(procs.every((p) => p.alive())).toBe(true);
  }, 120_000);
});
