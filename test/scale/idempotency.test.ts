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
  sqliteDatabase,
} from '@compresso/runtime';
import { postgresDatabase } from '@compresso/runtime/postgres';
import pg from 'pg';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Proc, startServe } from './processes.ts';

/**
 * Idempotency-Key across processes, on each backend: two real `compresso serve` processes on one
 * database — the embedded default (both on one SQLite file in one data directory) and PostgreSQL (a
 * database of this run's own) — 200 submissions sent at once: 20 keys, each 10 times, alternating
 * between the processes. Each key must spend the quota once and get one answer, whichever process a
 * copy reached and whenever it arrived (before, during or after the first one's work).
 */
const ADMIN_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = randomBytes(4).toString('hex');
const dbName = `cmp_idem_proc_${run}`;
const POSTGRES_URL = (() => {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${dbName}`;
  return url.toString();
})();
const work = mkdtempSync(join(tmpdir(), 'compresso-idem-'));
const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1, connectionTimeoutMillis: 5000 });

afterAll(async () => {
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await admin.end();
  rmSync(work, { recursive: true, force: true });
});

interface Backend {
  /** The environment both processes share (besides their data directories). */
  env(): Promise<NodeJS.ProcessEnv>;
  /** The data directory of process `name`. */
  dataDir(name: string): string;
  /** The test's own handle on the database the processes use. */
  open(): Promise<Database>;
}

const BACKENDS: Record<string, Backend> = {
  // One data directory for both: one SQLite file (WAL), as two `compresso serve` on one machine.
  'embedded SQLite': {
    env: async () => ({}),
    dataDir: () => join(work, 'data-sqlite'),
    async open() {
      const db = sqliteDatabase({ dataDir: join(work, 'data-sqlite') });
      await db.migrate();
      return db;
    },
  },
  PostgreSQL: {
    async env() {
      await admin.query(`CREATE DATABASE "${dbName}"`);
      return { DATABASE_URL: POSTGRES_URL };
    },
    dataDir: (name) => join(work, `data-pg-${name}`),
    async open() {
      const db = postgresDatabase({ url: POSTGRES_URL, poolSize: 2 });
      await db.migrate();
      return db;
    },
  },
};

describe.each(Object.keys(BACKENDS))('Idempotency-Key across two server processes on %s', (backend) => {
  let db: Database;
  const procs: Proc[] = [];
  let urls: string[] = [];

  beforeAll(async () => {
    const shared = await BACKENDS[backend]!.env();
    // The test's handle migrates first, so the two processes start on a ready database.
    db = await BACKENDS[backend]!.open();
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const key of Object.keys(env))
      if (key.startsWith('COMPRESSO_') || key === 'REDIS_URL' || key === 'DATABASE_URL') delete env[key];
    const started = await Promise.all(
      ['a', 'b'].map((name) =>
        startServe(`serve-${name}`, {
          ...env,
          ...shared,
          COMPRESSO_DATA_DIR: BACKENDS[backend]!.dataDir(name),
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
  });

  it('200 concurrent duplicated submissions (20 keys × 10): quota spent once per key, one answer per key', async () => {
    const email = `idem-${backend.replace(/\W/g, '')}-${run}@example.com`;
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
    // Half the copies went to each process (i % 2), and each answered some first: both are serving.
    expect(procs.every((p) => p.alive())).toBe(true);
  }, 120_000);
});
