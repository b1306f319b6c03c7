/**
 * The HTTP path: POST /api/v1/compress on a real `compresso serve` process against the engine called
 * directly, on the same 12-megapixel photos, to 2048-px WebP at the default quality.
 *
 *   node test/bench/http.ts [--requests N] [--levels 1,2,8] [--out FILE]
 *
 * Prints throughput and p50/p99 latency at each concurrency level, the HTTP ÷ engine ratio, and the
 * server's peak memory (VmHWM of its process) after a burst of 8 concurrent 12 MP uploads, half of them
 * HEIC. The server runs as its own process so its memory is not mixed with the load generator's.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createEngine } from '@compresso/engine';
import sharp from 'sharp';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const corpus = resolve(repo, '../shared/corpus');
const bin = join(repo, 'core/cli/src/bin.ts');

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '30' },
    levels: { type: 'string', default: '1,2,8' },
    out: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write('node test/bench/http.ts [--requests N per level] [--levels 1,2,8] [--out FILE]\n');
  process.exit(0);
}
const requestsPerLevel = Number(args.requests);
const levels = args.levels.split(',').map(Number);
const OPTIONS = { output_format: 'webp', max_dimension: 2048 } as const;

/** 12 MP inputs made from corpus photos: the size a phone camera writes. */
async function makeInputs(dir: string): Promise<{ jpegs: Buffer[]; heics: Buffer[]; heicNote: string }> {
  const sources = ['photo-sharpfixture-2569067123.jpg', 'photo-mate-Dune.jpg', 'photo-mate-TwoWings.jpg'];
  const jpegs: Buffer[] = [];
  for (const name of sources) {
    jpegs.push(
      await sharp(join(corpus, name))
        .resize(4000, 3000, { fit: 'cover' })
        .jpeg({ quality: 92, mozjpeg: false })
        .toBuffer(),
    );
  }
  const heics: Buffer[] = [];
  let heicNote = 'heif-enc (Debian libheif-examples) not installed: HEIC uploads use the corpus HEIC photos';
  if (spawnSync('heif-enc', ['--version']).status !== null) {
    for (const [i, jpeg] of jpegs.entries()) {
      const png = join(dir, `in-${i}.png`);
      await sharp(jpeg).png({ compressionLevel: 1 }).toFile(png);
      const out = join(dir, `in-${i}.heic`);
      const r = spawnSync('heif-enc', ['-q', '80', '-o', out, png]);
      if (r.status === 0 && existsSync(out)) heics.push(readFileSync(out));
    }
    if (heics.length) heicNote = `12 MP HEIC made with heif-enc from the same photos (${heics.length})`;
  }
  if (!heics.length) {
    heics.push(
      readFileSync(join(corpus, 'photo-heic-mate-Dune.heic')),
      readFileSync(join(corpus, 'photo-heic-rocket.heic')),
    );
  }
  return { jpegs, heics, heicNote };
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function runPool(
  count: number,
  concurrency: number,
  task: (i: number) => Promise<void>,
): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await task(next++);
    }),
  );
  return (performance.now() - started) / 1000;
}

function cli(env: NodeJS.ProcessEnv, ...argv: string[]): string {
  const r = spawnSync(process.execPath, [bin, ...argv], { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`compresso ${argv.join(' ')} failed: ${r.stderr}`);
  return r.stdout.trim();
}

function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return Math.round(kb / 1024);
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'compresso-http-bench-'));
  const env = { ...process.env, COMPRESSO_DATA_DIR: join(work, 'data'), LOG_LEVEL: 'warn' };
  const { jpegs, heics, heicNote } = await makeInputs(work);

  cli(env, 'account', 'create', '--email', 'bench@example.com');
  cli(env, 'promo', 'create', 'BENCH', '--plan', 'pro', '--uses', '1');
  cli(env, 'account', 'plan', 'bench@example.com', '--promo', 'BENCH');
  const key = cli(env, 'keys', 'create', '--account', 'bench@example.com', '--name', 'bench');

  const server = spawn(process.execPath, [bin, 'serve', '--port', '0', '--host', '127.0.0.1'], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const base = await new Promise<string>((resolveUrl, reject) => {
    let text = '';
    server.stderr.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      const url = /serving (http:\/\/\S+)\/api\/v1/.exec(text)?.[1];
      if (url) resolveUrl(url);
    });
    server.on('exit', (code) => reject(new Error(`server exited (${code}): ${text}`)));
  });

  const post = async (bytes: Buffer, name: string): Promise<number> => {
    const form = new FormData();
    form.set('file', new Blob([new Uint8Array(bytes)]), name);
    for (const [k, v] of Object.entries(OPTIONS)) form.set(k, String(v));
    const t = performance.now();
    const res = await fetch(`${base}/api/v1/compress`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    const body = await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${Buffer.from(body).toString()}`);
    return performance.now() - t;
  };

  const engine = createEngine();
  // Warm both paths (decoder pools, libvips caches, the server's first request).
  await post(jpegs[0]!, 'warm.jpg');
  await engine.optimize(jpegs[0]!, OPTIONS);

  const rows: {
    concurrency: number;
    http_img_s: number;
    engine_img_s: number;
    ratio: number;
    p50_ms: number;
    p99_ms: number;
  }[] = [];
  for (const concurrency of levels) {
    const latencies: number[] = [];
    const httpSeconds = await runPool(requestsPerLevel, concurrency, async (i) => {
      latencies.push(await post(jpegs[i % jpegs.length]!, `photo-${i}.jpg`));
    });
    const engineSeconds = await runPool(requestsPerLevel, concurrency, async (i) => {
      await engine.optimize(jpegs[i % jpegs.length]!, OPTIONS);
    });
    latencies.sort((a, b) => a - b);
    const httpRate = requestsPerLevel / httpSeconds;
    const engineRate = requestsPerLevel / engineSeconds;
    rows.push({
      concurrency,
      http_img_s: round(httpRate, 2),
      engine_img_s: round(engineRate, 2),
      ratio: round(httpRate / engineRate, 3),
      p50_ms: Math.round(percentile(latencies, 50)),
      p99_ms: Math.round(percentile(latencies, 99)),
    });
    process.stderr.write(
      `  concurrency ${concurrency}: HTTP ${httpRate.toFixed(2)} img/s, engine ${engineRate.toFixed(2)} img/s\n`,
    );
  }

  // The burst: 8 uploads of 12 MP at once, half HEIC; the server's peak RSS covers the whole run.
  const burst = Array.from({ length: 8 }, (_, i) =>
    i % 2 === 0
      ? post(jpegs[i % jpegs.length]!, `burst-${i}.jpg`)
      : post(heics[i % heics.length]!, `burst-${i}.heic`),
  );
  const burstStart = performance.now();
  await Promise.all(burst);
  const burstSeconds = (performance.now() - burstStart) / 1000;
  const peak = peakRssMiB(server.pid!);

  server.kill('SIGTERM');
  await new Promise((r) => server.once('exit', r));
  await engine.close();
  rmSync(work, { recursive: true, force: true });

  const result = {
    date: new Date().toISOString(),
    machine: {
      cpu: cpus()[0]?.model,
      cores: availableParallelism(),
      memory_gib: round(totalmem() / 2 ** 30, 1),
      node: process.version,
      malloc_arena_max: process.env['MALLOC_ARENA_MAX'] ?? null,
      loadavg_end: loadavg().map((x) => round(x, 2)),
    },
    work: '12 MP JPEG (4000×3000) → 2048-px WebP, default quality, multipart POST /api/v1/compress',
    requests_per_level: requestsPerLevel,
    rows,
    burst: { uploads: 8, heic: 4, seconds: round(burstSeconds, 2), heic_source: heicNote },
    server_peak_rss_mib: peak,
  };
  const md = [
    `HTTP path, ${result.work}; ${requestsPerLevel} requests per level; ${result.machine.cores} cores (${result.machine.cpu}).`,
    '',
    '| concurrency | HTTP img/s | engine img/s | HTTP ÷ engine | p50 ms | p99 ms |',
    '| ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.concurrency} | ${r.http_img_s} | ${r.engine_img_s} | ${r.ratio} | ${r.p50_ms} | ${r.p99_ms} |`,
    ),
    '',
    `Server peak RSS over the run, including a burst of 8 concurrent 12 MP uploads (4 HEIC, ${heicNote}): **${peak} MiB** (burst took ${round(burstSeconds, 1)} s).`,
    '',
  ].join('\n');
  process.stdout.write(`${md}\n`);
  const out = args.out ? resolve(args.out) : join(repo, 'test/bench/results/http-latest.json');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(out.replace(/\.json$/, '.md'), md);
}

function round(n: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

await main();
