/**
 * Soak: a realistic mix of good and bad uploads against a real `compresso serve`, measured from outside
 * (/proc/<pid>/status and /metrics), as an operator would see it.
 *
 *   npm run bench:soak -- [--requests N] [--concurrency N] [--idle-seconds S] [--out FILE]
 *                         [--server-repo DIR] [--start-script CMD] [--label TEXT] [--large-auto]
 *
 * The server is started exactly as `npm start` starts it (the package.json `start` script of the
 * checkout given by --server-repo, default this one, with `--port 0`), with a temporary data dir, so
 * the same harness measures the current code and an older checkout alike. RSS is sampled every
 * 250 ms through the load and the idle period after it. Results: test/bench/results/soak-latest.json
 * and .md unless --out.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import sharp from 'sharp';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '../..');
const CORPUS = resolve(REPO, '../shared/corpus');

/** One kind of request in the mix: its share (per 100 requests) and how to build it. */
interface Kind {
  name: string;
  share: number;
  /** What a correct server answers: 200, or the 4xx a bad input deserves. */
  expect: 'ok' | 'client-error';
  file: Buffer;
  filename: string;
  fields: Record<string, string>;
}

/**
 * The mix of issue 12 (per 100 requests): 40 big phone photos to WebP, 15 mid-size JPEGs to AVIF,
 * small JPEGs, alpha PNGs, HEIC, quality "auto" on small images, and 15 bad inputs of five sorts.
 */
async function buildMix(dir: string, largeAuto = false): Promise<Kind[]> {
  const photo = join(CORPUS, 'photo-sharpfixture-2569067123.jpg');
  // 12 MP, as a phone writes it: upscaled once from a corpus photo (the corpus has none that large).
  const big = await sharp(photo).resize(4000, 3000, { fit: 'cover' }).jpeg({ quality: 92 }).toBuffer();
  const mid = await sharp(join(CORPUS, 'photo-mate-Dune.jpg'))
    .resize(2560, 1707, { fit: 'cover' })
    .jpeg({ quality: 90 })
    .toBuffer();
  const small = await sharp(join(CORPUS, 'photo-mate-TwoWings.jpg'))
    .resize(800, 600, { fit: 'cover' })
    .jpeg({ quality: 88 })
    .toBuffer();
  const smallAuto = await sharp(join(CORPUS, 'photo-mate-LadyBird.jpg'))
    .resize(640, 480, { fit: 'cover' })
    .jpeg({ quality: 90 })
    .toBuffer();
  const alpha = readFileSync(join(CORPUS, 'graphic-mate-Arc-Colors-Transparent.png'));
  const heic = readFileSync(join(CORPUS, 'photo-heic-mate-Dune.heic'));
  writeFileSync(join(dir, 'big.jpg'), big);
  // --large-auto: 10 of the 40 big photos become quality "auto" at full size, as a bulk optimizer
  // sends them: a 2048-px photo into WebP (one reference) and the transparent Arc graphic into WebP
  // (two backgrounds, auto's dearest case: ~160 B a pixel, results/memory-per-pixel.md).
  const autoKinds: Kind[] = largeAuto
    ? [
        {
          name: 'jpeg-2048-auto-webp',
          share: 6,
          expect: 'ok',
          file: mid,
          filename: 'mid.jpg',
          fields: { quality: 'auto', output_format: 'webp', max_dimension: '2048' },
        },
        {
          name: 'png-alpha-auto-webp',
          share: 4,
          expect: 'ok',
          file: alpha,
          filename: 'alpha.png',
          fields: { quality: 'auto', output_format: 'webp' },
        },
      ]
    : [];
  return [
    ...autoKinds,
    {
      name: 'jpeg-12mp-webp',
      share: largeAuto ? 30 : 40,
      expect: 'ok',
      file: big,
      filename: 'big.jpg',
      fields: { output_format: 'webp', max_dimension: '2048' },
    },
    {
      name: 'jpeg-2560-avif',
      share: 15,
      expect: 'ok',
      file: mid,
      filename: 'mid.jpg',
      fields: { output_format: 'avif', max_dimension: '1024' },
    },
    { name: 'jpeg-small', share: 10, expect: 'ok', file: small, filename: 'small.jpg', fields: {} },
    {
      name: 'png-alpha-webp',
      share: 8,
      expect: 'ok',
      file: alpha,
      filename: 'alpha.png',
      fields: { output_format: 'webp' },
    },
    {
      name: 'heic-jpeg',
      share: 5,
      expect: 'ok',
      file: heic,
      filename: 'photo.heic',
      fields: { output_format: 'jpeg', max_dimension: '2048' },
    },
    {
      name: 'jpeg-small-auto',
      share: 7,
      expect: 'ok',
      file: smallAuto,
      filename: 'auto.jpg',
      fields: { quality: 'auto', output_format: 'webp' },
    },
    {
      name: 'bad-empty',
      share: 3,
      expect: 'client-error',
      file: Buffer.alloc(0),
      filename: 'empty.jpg',
      fields: {},
    },
    // Cut in the middle of the entropy-coded data: the header is fine, the pixels stop.
    {
      name: 'bad-truncated',
      share: 3,
      expect: 'client-error',
      file: big.subarray(0, Math.floor(big.length * 0.6)),
      filename: 'cut.jpg',
      fields: { output_format: 'webp', max_dimension: '2048' },
    },
    {
      name: 'bad-text',
      share: 3,
      expect: 'client-error',
      file: Buffer.from('this is not an image\n'.repeat(20)),
      filename: 'notes.jpg',
      fields: {},
    },
    {
      name: 'bad-options',
      share: 3,
      expect: 'client-error',
      file: small,
      filename: 'small.jpg',
      fields: { quality: 'best', max_dimension: '-5' },
    },
    {
      name: 'bad-40000px-png',
      share: 3,
      expect: 'client-error',
      file: pngHeaderOnly(40_000, 40_000),
      filename: 'huge.png',
      fields: {},
    },
  ];
}

/** CRC-32 of PNG chunks (ISO 3309), table-free: the bench builds one header. */
function crc32(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1));
  }
  return (crc ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** A valid PNG header declaring width × height RGBA pixels, followed by one tiny IDAT and IEND. */
export function pngHeaderOnly(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 6; // RGBA
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', Buffer.from([0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01])),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Request i's kind: a fixed interleaving (37 is coprime to 100) so every 100 requests hold the mix. */
function kindFor(kinds: Kind[], i: number): Kind {
  const slot = (i * 37) % 100;
  let acc = 0;
  for (const kind of kinds) {
    acc += kind.share;
    if (slot < acc) return kind;
  }
  return kinds[kinds.length - 1]!;
}

interface Sample {
  t: number;
  rss_mib: number;
  hwm_mib: number;
  phase: 'load' | 'idle';
}

function procStatus(pid: number): { rss: number; hwm: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(text)?.[1] ?? 0);
    return { rss: Math.round(kb('VmRSS') / 1024), hwm: Math.round(kb('VmHWM') / 1024) };
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds the server has used (user + system, /proc/<pid>/stat, in clock ticks of 1/100 s on
 * Linux). On a shared machine wall-clock throughput swings with the neighbours' load; CPU per request
 * is what the server itself spent, and compares runs made under different load.
 */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command name.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function cli(repo: string, env: NodeJS.ProcessEnv, ...argv: string[]): string {
  const r = spawnSync(process.execPath, [join(repo, 'core/cli/src/bin.ts'), ...argv], {
    env,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`compresso ${argv.join(' ')} failed: ${r.stderr}`);
  return r.stdout.trim();
}

/**
 * Start the server the way `npm start` does: the checkout's own start script, run through `env` so
 * its `VAR=value` prefixes apply and `exec` keeps one process — the pid whose /proc is read is the
 * server itself, not a shell.
 */
function startScriptOf(repo: string): string {
  const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const script = pkg.scripts['start'];
  if (!script) throw new Error(`${repo}/package.json has no start script`);
  return script;
}

function startServer(
  repo: string,
  script: string,
  env: NodeJS.ProcessEnv,
): { child: ChildProcess; url: Promise<string> } {
  const child = spawn('sh', ['-c', `exec env ${script} "$@"`, 'sh', '--port', '0', '--host', '127.0.0.1'], {
    cwd: repo,
    env: { ...env, PATH: `${join(repo, 'node_modules/.bin')}:${env['PATH'] ?? ''}` },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const url = new Promise<string>((resolveUrl, reject) => {
    child.stderr!.on('data', (data: Buffer) => {
      log += data.toString();
      const found = /serving (http:\/\/\S+)\/api\/v1/.exec(log)?.[1];
      if (found) resolveUrl(found);
    });
    child.once('exit', (code) => reject(new Error(`server exited (${code}): ${log.slice(-2000)}`)));
  });
  return { child, url };
}

function metricValue(text: string, name: string, labels = ''): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const [key, value] = line.split(' ');
    if (key === `${name}${labels}`) return Number(value);
  }
  return undefined;
}

export interface SoakOptions {
  requests: number;
  concurrency: number;
  idleSeconds: number;
  /** Checkout whose server is run (its package.json start script); default this one. */
  serverRepo?: string;
  /** Replaces the checkout's start script, to measure another allocator or setting the same way. */
  startScript?: string;
  label?: string;
  /** Replace 10 of the 40 big photos a hundred with large quality-"auto" requests (buildMix). */
  largeAuto?: boolean;
  /** Called with a line of progress now and then. */
  progress?: (line: string) => void;
}

export interface KindCounts {
  requests: number;
  statuses: Record<string, number>;
  codes: Record<string, number>;
}

export interface SoakResult {
  label: string;
  date: string;
  machine: Record<string, unknown>;
  settings: {
    requests: number;
    concurrency: number;
    idle_seconds: number;
    server_repo: string;
    start_script: string;
    /** The mix with large quality-"auto" requests (--large-auto). */
    large_auto?: boolean;
  };
  seconds: number;
  requests_per_second: number;
  /** Server CPU (user + system) per request over the load, in ms: comparable across machine load. */
  cpu_ms_per_request: number;
  /** Load average over the last minute when the load ended (other processes on the machine). */
  loadavg_at_end_of_load: number;
  status_counts: Record<string, number>;
  server_errors: number;
  /** Answers that differ from what the input deserves (a 4xx for a good image, a 200 for a bad one). */
  unexpected: number;
  kinds: Record<string, KindCounts>;
  peak_rss_mib: number;
  rss_at_end_of_load_mib: number;
  rest_rss_mib: number;
  /** Seconds of idling until RSS was under 300 MiB (null: not within the idle period). */
  seconds_to_under_300_mib: number | null;
  samples: Sample[];
  metrics_end_of_load: Record<string, number | undefined>;
  metrics_after_idle: Record<string, number | undefined>;
}

const METRICS = [
  ['compresso_nodejs_heap_size_used_bytes', ''],
  ['compresso_process_resident_memory_bytes', ''],
  ['compresso_engine_memory_bytes', '{state="in_use"}'],
  ['compresso_engine_memory_bytes', '{state="waiting"}'],
  ['compresso_engine_memory_budget_bytes', ''],
  ['compresso_engine_images', '{state="active"}'],
  ['compresso_engine_images', '{state="waiting"}'],
] as const;

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const serverRepo = resolve(options.serverRepo ?? REPO);
  const startScript = options.startScript ?? startScriptOf(serverRepo);
  const say = options.progress ?? (() => {});
  const work = mkdtempSync(join(tmpdir(), 'compresso-soak-'));
  const metricsToken = randomBytes(16).toString('hex');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    COMPRESSO_DATA_DIR: join(work, 'data'),
    LOG_LEVEL: 'warn',
    METRICS_TOKEN: metricsToken,
  };
  // What the parent shell exported must not change the server's settings: the start script decides.
  for (const name of [
    'MALLOC_ARENA_MAX',
    'MALLOC_MMAP_THRESHOLD_',
    'MALLOC_TRIM_THRESHOLD_',
    'MALLOC_CONF',
    'LD_PRELOAD',
  ]) {
    delete env[name];
  }
  let server: ChildProcess | undefined;
  try {
    const kinds = await buildMix(work, options.largeAuto);
    cli(serverRepo, env, 'account', 'create', '--email', 'soak@example.com');
    cli(serverRepo, env, 'promo', 'create', 'SOAK', '--plan', 'pro', '--uses', '1');
    cli(serverRepo, env, 'account', 'plan', 'soak@example.com', '--promo', 'SOAK');
    const key = cli(serverRepo, env, 'keys', 'create', '--account', 'soak@example.com', '--name', 'soak');
    // The pro plan's daily allowance must not be what the soak measures.
    env['COMPRESSO_PRO_DAILY_LIMIT'] = String(Math.max(500, options.requests * 2));
    const started = startServer(serverRepo, startScript, env);
    server = started.child;
    const base = await started.url;
    const pid = server.pid!;
    const readMetrics = async () => {
      const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } });
      const text = await res.text();
      return Object.fromEntries(
        METRICS.map(([name, labels]) => [`${name}${labels}`, metricValue(text, name, labels)]),
      );
    };

    const samples: Sample[] = [];
    const t0 = performance.now();
    let phase: Sample['phase'] = 'load';
    const sample = () => {
      const s = procStatus(pid);
      if (s)
        samples.push({ t: Math.round(performance.now() - t0) / 1000, rss_mib: s.rss, hwm_mib: s.hwm, phase });
    };
    sample();
    const sampler = setInterval(sample, 250);

    const counts: Record<string, KindCounts> = {};
    for (const kind of kinds) counts[kind.name] = { requests: 0, statuses: {}, codes: {} };
    let unexpected = 0;
    let done = 0;
    let next = 0;
    const loadStart = performance.now();
    const cpuStart = cpuSeconds(pid);
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        while (next < options.requests) {
          const kind = kindFor(kinds, next++);
          const form = new FormData();
          form.set('file', new Blob([new Uint8Array(kind.file)]), kind.filename);
          for (const [k, v] of Object.entries(kind.fields)) form.set(k, v);
          let status: string;
          let code = '';
          try {
            const res = await fetch(`${base}/api/v1/compress`, {
              method: 'POST',
              headers: { authorization: `Bearer ${key}` },
              body: form,
            });
            const body = Buffer.from(await res.arrayBuffer());
            status = String(res.status);
            if (res.status !== 200) {
              try {
                code = (JSON.parse(body.toString()) as { error?: { code?: string } }).error?.code ?? '';
              } catch {
                code = 'unparsable';
              }
            }
          } catch (error) {
            status = 'network-error';
            code = (error as Error).message;
          }
          const c = counts[kind.name]!;
          c.requests++;
          c.statuses[status] = (c.statuses[status] ?? 0) + 1;
          if (code) c.codes[code] = (c.codes[code] ?? 0) + 1;
          const ok = status === '200';
          const clientError = /^4\d\d$/.test(status);
          if ((kind.expect === 'ok' && !ok) || (kind.expect === 'client-error' && !clientError)) unexpected++;
          if (++done % 250 === 0) {
            const s = procStatus(pid);
            say(`  ${done}/${options.requests} requests, RSS ${s?.rss} MiB, peak ${s?.hwm} MiB`);
          }
        }
      }),
    );
    const seconds = (performance.now() - loadStart) / 1000;
    const cpuUsed = cpuSeconds(pid) - cpuStart;
    sample();
    const rssAtEnd = samples[samples.length - 1]!.rss_mib;
    const loadAtEnd = Math.round(loadavg()[0]! * 100) / 100;
    const metricsEndOfLoad = await readMetrics();

    phase = 'idle';
    const idleStart = performance.now();
    let under300: number | null = rssAtEnd < 300 ? 0 : null;
    await new Promise<void>((done) => {
      const check = setInterval(() => {
        const s = procStatus(pid);
        if (under300 === null && s && s.rss < 300) under300 = (performance.now() - idleStart) / 1000;
        if (performance.now() - idleStart >= options.idleSeconds * 1000) {
          clearInterval(check);
          done();
        }
      }, 250);
    });
    clearInterval(sampler);
    sample();
    const metricsAfterIdle = await readMetrics();
    const final = samples[samples.length - 1]!;

    const statusCounts: Record<string, number> = {};
    for (const c of Object.values(counts)) {
      for (const [s, n] of Object.entries(c.statuses)) statusCounts[s] = (statusCounts[s] ?? 0) + n;
    }
    const serverErrors = Object.entries(statusCounts)
      .filter(([s]) => !/^[1-4]\d\d$/.test(s))
      .reduce((sum, [, n]) => sum + n, 0);
    return {
      label: options.label ?? 'current',
      date: new Date().toISOString(),
      machine: {
        cpu: cpus()[0]?.model,
        cores: availableParallelism(),
        memory_gib: Math.round((totalmem() / 2 ** 30) * 10) / 10,
        node: process.version,
        loadavg_end: loadavg().map((x) => Math.round(x * 100) / 100),
      },
      settings: {
        requests: options.requests,
        concurrency: options.concurrency,
        idle_seconds: options.idleSeconds,
        server_repo: serverRepo,
        start_script: startScript,
        large_auto: options.largeAuto ?? false,
      },
      seconds: Math.round(seconds * 10) / 10,
      requests_per_second: Math.round((options.requests / seconds) * 100) / 100,
      cpu_ms_per_request: Math.round((cpuUsed * 1000) / options.requests),
      loadavg_at_end_of_load: loadAtEnd,
      status_counts: statusCounts,
      server_errors: serverErrors,
      unexpected,
      kinds: counts,
      peak_rss_mib: final.hwm_mib,
      rss_at_end_of_load_mib: rssAtEnd,
      rest_rss_mib: final.rss_mib,
      seconds_to_under_300_mib: under300 === null ? null : Math.round(under300 * 10) / 10,
      samples,
      metrics_end_of_load: metricsEndOfLoad,
      metrics_after_idle: metricsAfterIdle,
    };
  } finally {
    if (server && server.exitCode === null) {
      const exited = new Promise((r) => server!.once('exit', r));
      server.kill('SIGTERM');
      await exited;
    }
    rmSync(work, { recursive: true, force: true });
  }
}

const BARS = '▁▂▃▄▅▆▇█';

/** RSS over time as a sparkline plus a coarse table: enough to see a ramp, a plateau, a release. */
export function soakMarkdown(r: SoakResult): string {
  const max = Math.max(1, ...r.samples.map((s) => s.rss_mib));
  const buckets = 60;
  const step = Math.max(1, Math.ceil(r.samples.length / buckets));
  const spark: string[] = [];
  for (let i = 0; i < r.samples.length; i += step) {
    const slice = r.samples.slice(i, i + step);
    const top = Math.max(...slice.map((s) => s.rss_mib));
    spark.push(BARS[Math.min(BARS.length - 1, Math.floor((top / max) * (BARS.length - 1)))]!);
  }
  const rows: string[] = [];
  const tableStep = Math.max(1, Math.ceil(r.samples.length / 12));
  for (let i = 0; i < r.samples.length; i += tableStep) {
    const s = r.samples[i]!;
    rows.push(`| ${s.t.toFixed(1)} | ${s.phase} | ${s.rss_mib} | ${s.hwm_mib} |`);
  }
  const last = r.samples[r.samples.length - 1]!;
  rows.push(`| ${last.t.toFixed(1)} | ${last.phase} | ${last.rss_mib} | ${last.hwm_mib} |`);
  const kindRows = Object.entries(r.kinds).map(([name, c]) => {
    const statuses = Object.entries(c.statuses)
      .map(([s, n]) => `${s}×${n}`)
      .join(' ');
    const codes = Object.entries(c.codes)
      .map(([s, n]) => `${s}×${n}`)
      .join(' ');
    return `| ${name} | ${c.requests} | ${statuses} | ${codes} |`;
  });
  const heap = r.metrics_end_of_load['compresso_nodejs_heap_size_used_bytes'];
  return [
    `## Soak (${r.label}): ${r.settings.requests} requests at concurrency ${r.settings.concurrency}${r.settings.large_auto ? ', mix with large quality-"auto" requests' : ''}, ${r.date}`,
    '',
    `Server: \`${r.settings.start_script}\` in ${r.settings.server_repo}; ${r.machine['cores']} cores (${r.machine['cpu']}), load average at end ${(r.machine['loadavg_end'] as number[]).join(' ')}.`,
    '',
    '| measure | value |',
    '| --- | ---: |',
    `| requests/s | ${r.requests_per_second} (${r.seconds} s; load average ${r.loadavg_at_end_of_load} at the end) |`,
    `| server CPU per request | ${r.cpu_ms_per_request} ms |`,
    `| 5xx or no answer | ${r.server_errors} |`,
    `| answers not what the input deserves | ${r.unexpected} |`,
    `| peak RSS (VmHWM) | ${r.peak_rss_mib} MiB |`,
    `| RSS at the end of the load | ${r.rss_at_end_of_load_mib} MiB |`,
    `| RSS after ${r.settings.idle_seconds} s idle | ${r.rest_rss_mib} MiB |`,
    `| idle seconds until RSS < 300 MiB | ${r.seconds_to_under_300_mib ?? `not within ${r.settings.idle_seconds} s`} |`,
    `| V8 heap used at the end of the load | ${heap === undefined ? 'n/a' : `${Math.round(heap / 2 ** 20)} MiB`} |`,
    '',
    `RSS over time (max ${max} MiB): \`${spark.join('')}\``,
    '',
    '| t (s) | phase | RSS MiB | peak MiB |',
    '| ---: | --- | ---: | ---: |',
    ...rows,
    '',
    '| input kind | requests | statuses | error codes |',
    '| --- | ---: | --- | --- |',
    ...kindRows,
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: {
      requests: { type: 'string', default: '1000' },
      concurrency: { type: 'string', default: '4' },
      'idle-seconds': { type: 'string', default: '60' },
      'server-repo': { type: 'string' },
      'start-script': { type: 'string' },
      label: { type: 'string' },
      'large-auto': { type: 'boolean', default: false },
      out: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (args.help) {
    process.stdout.write(
      'npm run bench:soak -- [--requests N] [--concurrency N] [--idle-seconds S] [--server-repo DIR] [--start-script CMD] [--label TEXT] [--large-auto] [--out FILE.json]\n',
    );
    return;
  }
  const positive = (name: string, value: string, min: number) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min)
      throw new Error(`--${name}: expected a whole number ≥ ${min}, received ${value}`);
    return n;
  };
  const result = await runSoak({
    requests: positive('requests', args.requests, 1),
    concurrency: positive('concurrency', args.concurrency, 1),
    idleSeconds: positive('idle-seconds', args['idle-seconds'], 0),
    ...(args['server-repo'] ? { serverRepo: args['server-repo'] } : {}),
    ...(args['start-script'] ? { startScript: args['start-script'] } : {}),
    ...(args.label ? { label: args.label } : {}),
    largeAuto: args['large-auto'],
    progress: (line) => process.stderr.write(`${line}\n`),
  });
  const out = resolve(args.out ?? join(HERE, 'results/soak-latest.json'));
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  const md = soakMarkdown(result);
  writeFileSync(out.replace(/\.json$/, '.md'), md);
  process.stdout.write(md);
}

if (import.meta.main) await main();
