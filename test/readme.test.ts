import { execFile, spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  type FakeProvider,
  fakeOpenAi,
  proAccount,
  startTestServer,
  type TestServer,
} from '@compresso/server/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appDir, installBuild, PHOTO, REPO } from '../core/client/src/test-support.ts';

/**
 * The root README's code: its two commands are what every other suite and .ci/run exercise; the
 * client snippets marked `<!-- readme-test: name -->` run here against a real server, the Node one
 * through the built package as a user installs it, the Python one on the machine's python3.
 */
const run = promisify(execFile);
const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
const snippets = new Map(
  [...readme.matchAll(/<!-- readme-test: (\S+) -->\n```(?:js|python|sh)\n([\s\S]*?)```/g)].map(
    ([, name, code]) => [name!, code!] as const,
  ),
);

let srv: TestServer;
let key: string;
let app: string;
let ai: FakeProvider | undefined;

beforeAll(async () => {
  // The AI snippets need a provider: a loopback fake of the OpenAI API, as the server's own tests use.
  ai = await fakeOpenAi({ apiKey: 'sk-root-readme' });
  srv = await startTestServer({
    dbPath: ':memory:',
    overrides: { openaiApiKey: 'sk-root-readme', openaiBaseUrl: ai.url },
  });
  ({ key } = await proAccount(srv.db, 'root-readme@example.com'));
  app = appDir('root-readme');
  installBuild(app);
  copyFileSync(PHOTO, join(app, 'photo.jpg'));
  for (const [name, code] of snippets) writeFileSync(join(app, name), code);
});
afterAll(async () => {
  await srv?.close();
  await ai?.close();
  if (app) rmSync(app, { recursive: true, force: true });
});

function env(): NodeJS.ProcessEnv {
  return {
    PATH: process.env['PATH'],
    COMPRESSO_API_KEY: key,
    COMPRESSO_BASE_URL: srv.url,
    PYTHONPATH: join(REPO, 'core/python/src'),
  };
}

describe('the root README', () => {
  it('starts with the two commands: the server and the tests', () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    expect(firstBlock).toMatch(/^npm ci && npm start\s/m);
    expect(firstBlock).toMatch(/^npm ci && npm test\s/m);
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8'));
    expect(pkg.scripts.start).toContain('core/cli/src/bin.ts serve');
  });

  it('has the Node and Python snippets', () => {
    expect([...snippets.keys()]).toEqual(['node.mjs', 'python.py', 'ai.sh', 'ai.mjs', 'ai.py']);
  });

  it('the AI snippets: curl, Node and Python edit, describe and generate', async () => {
    const sh = await run('bash', ['-e', join(app, 'ai.sh')], { cwd: app, env: env() });
    expect(sh.stdout).toMatch(/^x-edit-operations: \[\{"op":"resize","width":800\},\{"op":"grayscale"\}\]/im);
    expect(sh.stdout).toContain('"source":"provider"');
    expect(sh.stdout).toMatch(/^x-aspect-ratio: 3:2/im);
    expect((await sharp(join(app, 'photo-bw.jpg')).metadata()).width).toBe(800);
    // curl's bytes are the API's: the same edit sent again (here with fetch) answers the same file.
    const form = new FormData();
    form.append('file', new Blob([readFileSync(join(app, 'photo.jpg'))]), 'photo.jpg');
    form.append('instruction', 'make it 800 wide and black and white');
    const again = await fetch(`${srv.url}/api/v1/edit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    expect(Buffer.from(await again.arrayBuffer())).toEqual(readFileSync(join(app, 'photo-bw.jpg')));
    expect((await sharp(join(app, 'boat.webp')).metadata()).format).toBe('webp');
    const node = await run(process.execPath, [join(app, 'ai.mjs')], { cwd: app, env: env() });
    expect(node.stdout).toContain(
      `${join(app, 'rotated.webp')} [ { op: 'rotate', degrees: 270 }, { op: 'format', format: 'webp' } ]`,
    );
    expect(node.stdout).toContain(`${join(app, 'boat.webp')}: openai gpt-image-1 at 3:2`);
    const py = await run('python3', [join(app, 'ai.py')], { cwd: app, env: env() });
    expect(py.stdout).toContain(`${join(app, 'boat.webp')} openai 1:1`);
    expect(py.stdout).toMatch(/^provider A gradient/m);
  });

  it('the Node snippet writes a WebP beside the photo and says what it saved', async () => {
    const { stdout } = await run(process.execPath, [join(app, 'node.mjs')], { cwd: app, env: env() });
    const written = join(app, 'photo.min.webp');
    const meta = await sharp(written).metadata();
    expect(meta.format).toBe('webp');
    const original = await sharp(PHOTO).metadata();
    expect(stdout.trim()).toMatch(
      new RegExp(`^${written}: \\d+(\\.\\d+)?% smaller, ${original.width}×${original.height}$`),
    );
    expect(readFileSync(written).length).toBeLessThan(readFileSync(PHOTO).length);
  });

  it('the Python snippet writes an AVIF beside the photo', async () => {
    const { stdout } = await run('python3', [join(app, 'python.py')], { cwd: app, env: env() });
    const written = join(app, 'photo.min.avif');
    expect((await sharp(written).metadata()).format).toBe('heif');
    expect(stdout.trim()).toMatch(new RegExp(`^${written}: \\d+(\\.\\d+)?% smaller$`));
  });

  it('installs the Node client from the clone with the npm command it gives, into a project elsewhere', async () => {
    const project = mkdtempSync(join(tmpdir(), 'compresso-readme-install-'));
    try {
      expect(readme).toContain('npm install /path/to/compresso/core/client');
      writeFileSync(join(project, 'package.json'), '{"name":"app","version":"1.0.0","private":true}');
      // The system npm, as a user runs it; the folder has no dependencies, so nothing is fetched.
      await run('npm', ['install', '--no-audit', '--no-fund', join(REPO, 'core/client')], {
        cwd: project,
        env: { ...process.env, npm_config_offline: 'true' },
      });
      const { stdout } = await run(
        process.execPath,
        ['-e', "const { Compresso } = require('@compresso/client'); console.log(typeof Compresso)"],
        { cwd: project },
      );
      expect(stdout.trim()).toBe('function');
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });

  it('the MCP configuration for a clone starts compresso-mcp, which lists its seven tools', async () => {
    const json = /```json\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    const config = JSON.parse(json.replaceAll('/path/to/compresso', REPO));
    const entry = config.mcpServers.compresso as {
      command: string;
      args: string[];
      env: Record<string, string>;
    };
    expect(entry.command).toBe('node');
    const child = spawn(process.execPath, entry.args, {
      env: { PATH: process.env['PATH'], ...entry.env, COMPRESSO_BASE_URL: srv.url },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      const listed = new Promise<string[]>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          for (const line of out.split('\n')) {
            if (!line.includes('"id":2')) continue;
            resolve(JSON.parse(line).result.tools.map((t: { name: string }) => t.name));
          }
        });
        child.once('exit', (code) => reject(new Error(`compresso-mcp exited ${code}`)));
      });
      const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
      send({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'readme', version: '1' },
        },
      });
      send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      send({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
      expect((await listed).sort()).toEqual([
        'alt_text',
        'compress_batch',
        'compress_image',
        'edit_image',
        'generate_image',
        'get_usage',
        'image_info',
      ]);
    } finally {
      child.kill();
    }
  });
});
