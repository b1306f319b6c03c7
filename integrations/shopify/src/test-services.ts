import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Servers of a fault test's own, that it may stop and start like an operator restarting them — the
 * machine's shared Redis and PostgreSQL (other suites run on them) must never be. Same approach as
 * test/scale/processes.ts (a package may not import it): a free port, readiness from the server's own
 * log or pid file (never "something answers on the port", which could be another suite's server).
 */

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

export interface PrivateRedis {
  url: string;
  /** SIGTERM (Redis writes its append-only file) and wait for the exit. */
  stop(): Promise<void>;
  /** Start again on the same port and directory: the jobs are still there. */
  start(): Promise<void>;
  /** Stop it and remove its files. */
  remove(): Promise<void>;
}

/**
 * A redis-server on a free port keeping an append-only file, as docker-compose.yml's Redis does, so
 * queued and active jobs outlive a restart.
 */
export async function privateRedis(): Promise<PrivateRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'compresso-redis-'));
  let child: ReturnType<typeof spawn> | undefined;
  let port = 0;
  const startOn = async (p: number) => {
    const proc = spawn(
      'redis-server',
      ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes', '--dir', dir],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    let output = '';
    await new Promise<void>((resolve, reject) => {
      proc.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) resolve();
      });
      proc.once('error', (error) =>
        reject(
          new Error(`redis-server could not be started (apt-get install -y redis-server): ${error.message}`),
        ),
      );
      proc.once('exit', () => reject(new Error(`redis-server did not start on ${p}:\n${output}`)));
    });
    proc.stdout!.resume();
    child = proc;
  };
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await startOn(port);
      break;
    } catch (error) {
      if (attempt >= 5 || !/Address already in use/i.test(String(error))) throw error;
    }
  }
  const stop = async () => {
    const proc = child;
    if (!proc || proc.exitCode !== null) return;
    const exited = once(proc, 'exit');
    proc.kill('SIGTERM');
    await exited;
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    stop,
    start: () => startOn(port),
    async remove() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface PrivatePostgres {
  url: string;
  /** What `systemctl stop postgresql` does: fast shutdown, every connection cut, new ones refused. */
  stop(): void;
  /** Start again, same port and data; returns once it accepts connections (pg_ctl -w). */
  start(): void;
  remove(): void;
}

/**
 * A fresh PostgreSQL cluster in a temporary directory on a free port (the installed server's binaries;
 * as root it runs as the `postgres` user, which PostgreSQL requires).
 */
export async function privatePostgres(): Promise<PrivatePostgres> {
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
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: () => pgRun('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']),
    start,
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
