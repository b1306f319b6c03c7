/**
 * The scaled-out setup under load: requests per second and latency of real `compresso serve`
 * processes, for the embedded default (SQLite, in-process queue) and for PostgreSQL + Redis with one
 * and with two API processes behind a round-robin client.
 *
 *   node test/bench/scale.ts [--seconds N] [--clients N] [--out FILE]
 *
 * Three workloads, each run for --seconds after a short warm-up, by --clients concurrent keep-alive
 * clients in this process:
 * - `usage`: GET /api/v1/usage — authentication, the atomic quota count and a JSON answer: the
 *   per-request cost of the database path, no image work, every client on one account (one hot
 *   quota row);
 * - `usage-32-accounts`: the same with each client on an account of its own;
 * - `info`: POST /api/v1/info with a 64×64 PNG → WebP — the same plus multipart and the engine.
 * On a 2-core machine the load generator shares the cores with the servers (and PostgreSQL/Redis),
 * so a second API process can only show how much headroom one process leaves, not linear scaling.
 * Needs PostgreSQL and Redis as the tests do (COMPRESSO_TEST_DATABASE_URL, COMPRESSO_TEST_REDIS_URL).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  applyPromo,
  createAccount,
  createApiKey,
  createPromoCode,
  loadConfig,
  openDatabase,
} from '@compresso/runtime';
import pg from 'pg';
import sharp from 'sharp';
import { type Proc, repo, startServe } from '../scale/processes.ts';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    clients: { type: 'string', default: '32' },
    out: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write('node test/bench/scale.ts [--seconds N per run] [--clients N] [--out FILE]\n');
  process.exit(0);
}
const seconds = Number(args.seconds);
const clients = Number(args.clients);
const ADMIN_URL = process.env.COMPRESSO_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.COMPRESSO_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

interface Row {
  setup: string;
  api_processes: number;
  workload: string;
  requests: number;
  errors: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
}

type Workload = 'usage' | 'usage-32-accounts' | 'info';

async function load(urls: string[], keys: string[], workload: Workload, tiny: Buffer, forSeconds: number) {
  const latencies: number[] = [];
  let errors = 0;
  let n = 0;
  const until = performance.now() + forSeconds * 1000;
  const one = async (base: string, key: string) => {
    const t = performance.now();
    let res: Response;
    if (workload !== 'info') {
      res = await fetch(`${base}/api/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
    } else {
      const form = new FormData();
      form.set('file', new Blob([new Uint8Array(tiny)]), 'tiny.png');
      form.set('output_format', 'webp');
      res = await fetch(`${base}/api/v1/info`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: form,
      });
    }
    await res.arrayBuffer();
    if (res.status !== 200) errors++;
    return performance.now() - t;
  };
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      // Every client on one account, or each on an account of its own (usage-32-accounts).
      const key = workload === 'usage-32-accounts' ? keys[client % keys.length]! : keys[0]!;
      while (performance.now() < until) latencies.push(await one(urls[n++ % urls.length]!, key));
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    rps: round(latencies.length / elapsed),
    p50_ms: round(percentile(latencies, 50)),
    p99_ms: round(percentile(latencies, 99)),
  };
}

async function measure(setup: string, procs: { proc: Proc; url: string }[], keys: string[], tiny: Buffer) {
  const rows: Row[] = [];
  const urls = procs.map((p) => p.url);
  for (const workload of ['usage', 'usage-32-accounts', 'info'] as const) {
    await load(urls, keys, workload, tiny, 1); // warm-up: connections, JIT, pools
    const r = await load(urls, keys, workload, tiny, seconds);
    rows.push({ setup, api_processes: procs.length, workload, ...r });
    process.stderr.write(
      `  ${setup}, ${procs.length} API process(es), ${workload}: ${r.rps} req/s, p50 ${r.p50_ms} ms, p99 ${r.p99_ms} ms${r.errors ? `, ${r.errors} errors` : ''}\n`,
    );
  }
  return rows;
}

async function main(): Promise<void> {
  const loadAtStart = loadavg().map((x) => round(x, 2));
  const run = randomBytes(4).toString('hex');
  const work = mkdtempSync(join(tmpdir(), 'compresso-scale-bench-'));
  const dbName = `cmp_bench_${run}`;
  const prefix = `cmpbench${run}`;
  const admin = new pg.Pool({ connectionString: ADMIN_URL, max: 1 });
  const dbUrl = new URL(ADMIN_URL);
  dbUrl.pathname = `/${dbName}`;
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(base)) if (k.startsWith('COMPRESSO_')) delete base[k];
  // The quota is not what is measured: a limit no run reaches.
  Object.assign(base, { LOG_LEVEL: 'warn', COMPRESSO_PRO_DAILY_LIMIT: '100000000' });
  const embedded = { ...base, COMPRESSO_DATA_DIR: join(work, 'embedded') };
  const scaled = {
    ...base,
    COMPRESSO_DATA_DIR: join(work, 'scaled'),
    DATABASE_URL: dbUrl.toString(),
    REDIS_URL,
    COMPRESSO_QUEUE_PREFIX: prefix,
    COMPRESSO_WORKERS: '0',
  };
  const tiny = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#4a8' } })
    .png()
    .toBuffer();
  // 32 Pro accounts with a key each, written straight into the database the servers will use.
  const accounts = async (env: NodeJS.ProcessEnv): Promise<string[]> => {
    const db = await openDatabase(loadConfig(env));
    try {
      await createPromoCode(db, { code: 'BENCH', plan: 'pro', uses: 32 });
      const keys: string[] = [];
      for (let i = 0; i < 32; i++) {
        const account = await createAccount(db, `bench${i}@example.com`);
        await applyPromo(db, account.email, 'BENCH');
        keys.push((await createApiKey(db, account.id, 'bench')).secret);
      }
      return keys;
    } finally {
      await db.close();
    }
  };

  const rows: Row[] = [];
  const running: Proc[] = [];
  try {
    const keys = await accounts(embedded);
    const one = await startServe('embedded', embedded);
    running.push(one.proc);
    rows.push(...(await measure('embedded (SQLite, in-process queue)', [one], keys, tiny)));
    await one.proc.stop();

    await admin.query(`CREATE DATABASE "${dbName}"`);
    const scaledKeys = await accounts(scaled);
    const [a, b] = await Promise.all([startServe('api-1', scaled), startServe('api-2', scaled)]);
    running.push(a.proc, b.proc);
    rows.push(...(await measure('PostgreSQL + Redis', [a], scaledKeys, tiny)));
    rows.push(...(await measure('PostgreSQL + Redis', [a, b], scaledKeys, tiny)));
  } finally {
    await Promise.all(running.map((p) => p.stop()));
    await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => {});
    await admin.end();
    const keys = spawnSync('redis-cli', ['-u', REDIS_URL, '--scan', '--pattern', `${prefix}:*`], {
      encoding: 'utf8',
    })
      .stdout.split('\n')
      .filter(Boolean);
    if (keys.length) spawnSync('redis-cli', ['-u', REDIS_URL, 'del', ...keys]);
    rmSync(work, { recursive: true, force: true });
  }

  const result = {
    date: new Date().toISOString(),
    machine: {
      cpu: cpus()[0]?.model,
      cores: availableParallelism(),
      memory_gib: round(totalmem() / 2 ** 30),
      node: process.version,
      malloc_arena_max: process.env.MALLOC_ARENA_MAX ?? null,
      loadavg_start: loadAtStart,
      loadavg_end: loadavg().map((x) => round(x, 2)),
    },
    seconds_per_run: seconds,
    clients,
    workloads: {
      usage: 'GET /api/v1/usage (auth, atomic quota count, JSON), every client on one account',
      'usage-32-accounts': 'the same, each client on an account of its own',
      info: 'POST /api/v1/info, 64×64 PNG → WebP (auth, quota, multipart, engine)',
    },
    rows,
  };
  const md = [
    `Scaled-out setup: ${clients} keep-alive clients in the load generator, ${seconds} s per run, round-robin over the API processes; ${result.machine.cores} cores (${result.machine.cpu}) shared by the load generator, the servers, PostgreSQL and Redis.`,
    '',
    '| setup | API processes | workload | req/s | p50 ms | p99 ms | errors |',
    '| --- | ---: | --- | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.setup} | ${r.api_processes} | ${r.workload} | ${r.rps} | ${r.p50_ms} | ${r.p99_ms} | ${r.errors} |`,
    ),
    '',
    `usage = ${result.workloads.usage}; usage-32-accounts = ${result.workloads['usage-32-accounts']}; info = ${result.workloads.info}. Load average ${loadAtStart[0]} at the start, ${result.machine.loadavg_end[0]} at the end.`,
    '',
  ].join('\n');
  process.stdout.write(`${md}\n`);
  const out = args.out ? resolve(args.out) : join(repo, 'test/bench/results/scale-latest.json');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(out.replace(/\.json$/, '.md'), md);
}

await main();
