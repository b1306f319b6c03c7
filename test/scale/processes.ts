import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** Real `compresso` processes for the scale-out suites and the bench: node core/cli/src/bin.ts … */
export const repo = resolve(import.meta.dirname, '../..');
export const bin = join(repo, 'core/cli/src/bin.ts');

export interface Proc {
  name: string;
  child: ChildProcess;
  /** Every stdout line (pino JSON), parsed when it is JSON. */
  logs: Record<string, unknown>[];
  stderr: string[];
  /** Set once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  alive(): boolean;
  /** Resolves with the first log line (or stderr line) matching, within timeoutMs. */
  waitFor(match: (line: Record<string, unknown> | string) => boolean, timeoutMs?: number): Promise<unknown>;
  /** SIGTERM and wait for the exit (SIGKILL after graceMs). */
  stop(graceMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function startProc(name: string, args: string[], env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, [bin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: Record<string, unknown>[] = [];
  const stderr: string[] = [];
  const waiters = new Set<(line: Record<string, unknown> | string) => void>();
  const split = (stream: NodeJS.ReadableStream, onLine: (line: string) => void) => {
    let rest = '';
    stream.on('data', (chunk: Buffer) => {
      const lines = (rest + chunk.toString()).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) if (line) onLine(line);
    });
  };
  split(child.stdout!, (line) => {
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(line) as Record<string, unknown>;
    } catch {
      parsed = { msg: line };
    }
    logs.push(parsed);
    for (const w of waiters) w(parsed);
  });
  split(child.stderr!, (line) => {
    stderr.push(line);
    for (const w of waiters) w(line);
  });
  let done = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) => {
    child.on('exit', (code, signal) => {
      done = true;
      resolveExit({ code, signal });
    });
  });
  return {
    name,
    child,
    logs,
    stderr,
    exited,
    alive: () => !done,
    waitFor(match, timeoutMs = 30_000) {
      const already = [...logs, ...stderr].find((l) => match(l));
      if (already) return Promise.resolve(already);
      return new Promise((resolveWait, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${name}: not seen within ${timeoutMs} ms; stderr:\n${stderr.join('\n')}`));
        }, timeoutMs);
        const check = (line: Record<string, unknown> | string) => {
          if (!match(line)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolveWait(line);
        };
        waiters.add(check);
        exited.then(({ code, signal }) => {
          if (!waiters.has(check)) return;
          clearTimeout(timer);
          waiters.delete(check);
          reject(
            new Error(
              `${name} exited (${code ?? signal}) before it was ready; stderr:\n${stderr.join('\n')}`,
            ),
          );
        });
      });
    },
    async stop(graceMs = 15_000) {
      if (done) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}

/** `compresso serve` on a free port; resolves with its base URL once it listens. */
export async function startServe(name: string, env: NodeJS.ProcessEnv, extra: string[] = []) {
  const proc = startProc(name, ['serve', '--port', '0', '--host', '127.0.0.1', ...extra], env);
  const line = (await proc.waitFor(
    (l) => typeof l === 'string' && l.startsWith('compresso: serving '),
    60_000,
  )) as string;
  const url = /serving (http:\/\/[^/]+)\/api\/v1/.exec(line)?.[1];
  if (!url) throw new Error(`${name}: no URL in ${line}`);
  return { proc, url };
}

export async function startWorkerProc(name: string, env: NodeJS.ProcessEnv, extra: string[] = []) {
  const proc = startProc(name, ['worker', ...extra], env);
  const started = (await proc.waitFor(
    (l) => typeof l === 'object' && l.msg === 'compresso worker started',
    60_000,
  )) as Record<string, unknown>;
  // The start line names where the worker reads originals: it must be the API processes' blob store.
  if (env['COMPRESSO_BLOB_DIR'] && started['blob_location'] !== env['COMPRESSO_BLOB_DIR']) {
    throw new Error(
      `${name}: reads blobs from ${String(started['blob_location'])}, not ${env['COMPRESSO_BLOB_DIR']}`,
    );
  }
  return proc;
}

export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

/**
 * A PostgreSQL server of our own (a fresh cluster in a temporary directory, on a free port): one the
 * test may stop and start like an operator restarting it, which the machine's shared server (other
 * suites run on it) must never be. Its binaries are the installed server's (`pg_config --bindir`;
 * CI installs the `postgresql` package). PostgreSQL refuses to run as root, so as root it runs as the
 * `postgres` user the package creates.
 */
export async function privatePostgres() {
  const bindir = (() => {
    const fromConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' }).stdout?.trim();
    if (fromConfig && existsSync(join(fromConfig, 'initdb'))) return fromConfig;
    const versions = existsSync('/usr/lib/postgresql')
      ? readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a))
      : [];
    const found = versions
      .map((v) => `/usr/lib/postgresql/${v}/bin`)
      .find((d) => existsSync(join(d, 'initdb')));
    if (!found)
      throw new Error('PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install -y postgresql');
    return found;
  })();
  const root = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'compresso-pg-'));
  if (root) {
    const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout);
    const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout);
    chownSync(dir, uid, gid);
  }
  const pgRun = (tool: string, args: string[]) => {
    const command = root ? 'runuser' : join(bindir, tool);
    const argv = root ? ['-u', 'postgres', '--', join(bindir, tool), ...args] : args;
    const result = spawnSync(command, argv, { encoding: 'utf8', timeout: 60_000 });
    if (result.status !== 0)
      throw new Error(`${tool} ${args.join(' ')} failed: ${result.stderr || result.stdout || result.error}`);
  };
  const data = join(dir, 'data');
  // No fsync: a throwaway cluster for one test, which only ever stops cleanly (fast shutdown).
  pgRun('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  let port = await freePort();
  const start = () =>
    pgRun('pg_ctl', [
      '-D',
      data,
      '-l',
      join(dir, 'server.log'),
      '-w',
      '-o',
      `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off`,
      'start',
    ]);
  // The port was free when looked up, but the postmaster binds it only now: if another process took
  // it meanwhile, the postmaster exits ("could not bind"), pg_ctl -w fails, and another port is tried.
  // `-w` waits for this cluster's own postmaster (its pid file), so another server on the port is
  // never taken for ours.
  for (let attempt = 1; ; attempt++) {
    try {
      start();
      break;
    } catch (error) {
      const log = existsSync(join(dir, 'server.log')) ? readFileSync(join(dir, 'server.log'), 'utf8') : '';
      if (attempt >= 5 || !/could not bind|Address already in use/i.test(log)) throw error;
      port = await freePort();
    }
  }
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    /** What `systemctl stop postgresql` does: fast shutdown, every connection cut, new ones refused. */
    stop: () => pgRun('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']),
    start,
    /** Stop it (if running) and remove its files. */
    remove() {
      try {
        pgRun('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // Already stopped.
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A redis-server of our own on a free port: one the test may stop and start. Without `dir` it keeps
 * nothing; with it, it keeps an append-only file there, as docker-compose.yml's Redis does, so jobs
 * outlive a restart on the same `dir`.
 */
export async function privateRedis(port?: number, dir?: string) {
  // A port looked up free may be taken before redis-server binds it: then it exits with "Address already
  // in use" and, unless the caller needs this very port (a restart), another one is tried. Readiness
  // is this child's own log line, so another process's server on the port is never taken for ours.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRedisServer(port ?? (await freePort()), dir);
    } catch (error) {
      if (port !== undefined || attempt >= 5 || !/Address already in use/i.test(String(error))) throw error;
    }
  }
}

async function startRedisServer(p: number, dir?: string) {
  const persistence = dir ? ['--appendonly', 'yes', '--dir', dir] : ['--appendonly', 'no'];
  const child = spawn(
    'redis-server',
    ['--port', String(p), '--bind', '127.0.0.1', '--save', '', ...persistence],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout!.on('data', (c: Buffer) => {
    output += c.toString();
  });
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  // Ready when this child says so, or failed when it exits first (the line or the exit, no timer).
  await new Promise<void>((resolve, reject) => {
    const check = () => {
      if (output.includes('Ready to accept connections')) resolve();
    };
    child.stdout!.on('data', check);
    check();
    child.once('error', (error) =>
      reject(
        new Error(`redis-server could not be started (apt-get install -y redis-server): ${error.message}`),
      ),
    );
    child.once('exit', () =>
      reject(new Error(`redis-server on port ${p} did not start (is redis-server installed?):\n${output}`)),
    );
  });
  return {
    port: p,
    url: `redis://127.0.0.1:${p}`,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
