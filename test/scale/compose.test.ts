import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createProgram } from '@compresso/cli';
import { CONFIG_ENV, loadConfig } from '@compresso/runtime';
import { form, smallJpeg, startTestServer } from '@compresso/server/testing';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

/**
 * docker-compose.yml cannot run here (no Docker), so it is checked the way it would go wrong: it must
 * parse, every variable it gives a Compresso service must be one the code reads (a typo would be
 * ignored silently by the program and by Docker), the values must pass the same validation as at a
 * real start, the services it points at must exist, and its commands must be commands of `compresso`.
 */
const repo = resolve(import.meta.dirname, '../..');

interface Service {
  build?: unknown;
  image?: string;
  ports?: string[];
  expose?: string[];
  volumes?: string[];
  command?: string[];
  environment?: Record<string, string | number>;
  depends_on?: Record<string, unknown>;
}
const compose = parse(readFileSync(join(repo, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};
const compresso = Object.entries(compose.services).filter(([, s]) => s.build !== undefined);
const known = new Set(Object.values(CONFIG_ENV));

/** `${NAME:?message}` is filled in by `docker compose` from the caller's environment. */
function resolved(env: Record<string, string | number>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).map(([k, v]) => [
      k,
      String(v).replace(/^\$\{[A-Z_]+:\?[^}]*\}$/, 'a-token-for-this-test-0123456789'),
    ]),
  );
}

describe('docker-compose.yml', () => {
  it('has the API, the worker, the proxy in front, PostgreSQL and Redis', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['api', 'postgres', 'proxy', 'redis', 'worker']);
    expect(compresso.map(([name]) => name).sort()).toEqual(['api', 'worker']);
  });

  it('sets only variables the code reads, with values the code accepts', () => {
    for (const [name, service] of compresso) {
      const env = resolved(service.environment ?? {});
      expect(Object.keys(env).length, name).toBeGreaterThan(3);
      for (const variable of Object.keys(env)) expect(known, `${name}: ${variable}`).toContain(variable);
      const config = loadConfig(env);
      expect(config.databaseUrl, name).toMatch(/^postgres:\/\/.+@postgres:5432\//);
      expect(config.redisUrl, name).toBe('redis://redis:6379');
      expect(Object.keys(service.depends_on ?? {}).sort(), name).toEqual(['postgres', 'redis']);
    }
    const api = loadConfig(resolved(compose.services.api!.environment ?? {}));
    expect(api.workers).toBe(0);
    expect(api.metricsToken).toBeDefined();
  });

  it('runs commands that `compresso` has, through the Dockerfile entry point', () => {
    const program = createProgram();
    const commands = new Set(program.commands.map((c) => c.name()));
    expect(compose.services.api!.command?.[0]).toBe('serve');
    expect(compose.services.worker!.command?.[0]).toBe('worker');
    for (const [name, service] of compresso) {
      const command = program.commands.find((c) => c.name() === service.command?.[0]);
      expect(commands, name).toContain(service.command?.[0]);
      // Every flag given must be one of the command's options.
      const flags = (service.command ?? []).filter((arg) => arg.startsWith('--'));
      const options = new Set(command?.options.map((o) => o.long));
      for (const flag of flags) expect(options, `${name} ${flag}`).toContain(flag);
    }
    const dockerfile = readFileSync(join(repo, 'Dockerfile'), 'utf8');
    const entry = /^ENTRYPOINT \[(.*)\]$/m.exec(dockerfile)?.[1];
    const argv = JSON.parse(`[${entry}]`) as string[];
    expect(argv[0]).toBe('node');
    expect(existsSync(join(repo, argv[1]!))).toBe(true);
    expect(dockerfile).toMatch(/^FROM node:24/m);
    // A production install has no dev tools: lifecycle scripts that need them (the root `prepare`
    // builds with tsc) must not run there.
    const scripts = (
      JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { scripts?: Record<string, string> }
    ).scripts;
    const install = /^RUN (npm ci[^&\n]*)/m.exec(dockerfile)?.[1] ?? '';
    expect(install).toContain('--omit=dev');
    if (scripts?.prepare || scripts?.postinstall) expect(install).toContain('--ignore-scripts');
  });

  describe('--scale api=N behind the proxy', () => {
    const api = compose.services.api!;
    const proxy = compose.services.proxy!;
    const apiPort = api.command?.[api.command.indexOf('--port') + 1];

    it('publishes the host port on the proxy only, so any number of API replicas start', () => {
      // A fixed host port on api ("3000:3000") lets the second replica fail to bind it.
      expect(api.ports ?? []).toEqual([]);
      expect(api.expose).toEqual([apiPort]);
      expect(proxy.ports).toEqual(['3000:80']);
      expect(proxy.depends_on as unknown).toEqual(['api']);
      // The proxy's configuration is the repository's Caddyfile, which sends every request to every
      // replica of the api service on the port it serves on.
      const mount = proxy.volumes?.find((v) => v.endsWith(':/etc/caddy/Caddyfile:ro')) ?? '';
      const caddyfile = readFileSync(join(repo, mount.split(':')[0]!), 'utf8');
      expect(caddyfile).toMatch(new RegExp(`^\\s*dynamic a api ${apiPort}$`, 'm'));
      expect(caddyfile).toMatch(/^:80 \{$/m);
    });

    it('trusts exactly the one hop the proxy is (TRUST_PROXY=1)', () => {
      const config = loadConfig(resolved(api.environment ?? {}));
      expect(config.trustProxy).toBe(1);
      // The worker serves no HTTP: it has no proxy to trust.
      expect(loadConfig(resolved(compose.services.worker!.environment ?? {})).trustProxy).toBe(false);
    });

    it("with the api service's TRUST_PROXY, the app takes the client from the proxy's X-Forwarded-For entry, not a client's", async () => {
      const trustProxy = loadConfig(resolved(api.environment ?? {})).trustProxy;
      // The visitor allowance (1 image a day here) is keyed on the client address the app derives.
      const server = await startTestServer({
        dbPath: ':memory:',
        overrides: { trustProxy, visitorDailyLimit: 1 },
      });
      try {
        const page = await fetch(`${server.url}/`);
        const token = /<meta name="csrf-token" content="([^"]+)">/.exec(await page.text())?.[1] ?? '';
        const cookie = page.headers
          .getSetCookie()
          .map((c) => c.split(';')[0])
          .join('; ');
        const jpeg = await smallJpeg();
        // What Caddy sends: whatever the client claimed, then the address it saw, last.
        const upload = async (forwardedFor: string) =>
          (
            await fetch(`${server.url}/web/compress`, {
              method: 'POST',
              headers: {
                'x-csrf-token': token,
                cookie,
                'sec-fetch-site': 'same-origin',
                accept: 'image/*, application/json',
                'x-forwarded-for': forwardedFor,
              },
              body: form(jpeg, { output_format: 'webp' }),
            })
          ).status;
        expect(await upload('203.0.113.10')).toBe(200);
        // The same client, claiming other addresses before the proxy's entry: still its allowance.
        expect(await upload('10.1.1.1, 203.0.113.10')).toBe(429);
        expect(await upload('198.51.100.99, 203.0.113.10')).toBe(429);
        // Another client behind the same proxy has an allowance of its own.
        expect(await upload('203.0.113.11')).toBe(200);
      } finally {
        await server.close();
      }
    });
  });
});
