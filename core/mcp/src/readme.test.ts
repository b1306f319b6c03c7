import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Connected, connect, REPO } from './test-support.ts';
import { VERSION } from './version.ts';

const root = resolve(import.meta.dirname, '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

let mcp: Connected;
beforeAll(async () => {
  mcp = await connect({ env: {} });
});
afterAll(async () => {
  await mcp?.close();
});

describe('README', () => {
  it('shows exactly the configuration the example test runs', () => {
    const block = /<!-- config: examples\/mcp\/mcp-servers\.json -->\n```json\n([\s\S]*?)\n```/.exec(
      readme,
    )?.[1];
    expect(block, 'the marked json block').toBeDefined();
    const example = readFileSync(join(REPO, 'examples/mcp/mcp-servers.json'), 'utf8');
    expect(JSON.parse(block!)).toEqual(JSON.parse(example));
  });

  it('documents every tool, every argument and every result field the server declares', async () => {
    const { tools } = await mcp.client.listTools();
    for (const tool of tools) {
      expect(readme, tool.name).toContain(`### \`${tool.name}\``);
      for (const name of Object.keys(tool.inputSchema.properties ?? {})) {
        expect(readme, `${tool.name} argument ${name}`).toContain(`\`${name}\``);
      }
      for (const name of Object.keys(tool.outputSchema?.properties ?? {})) {
        expect(readme, `${tool.name} result ${name}`).toContain(`\`${name}\``);
      }
    }
  });

  it('states the version package.json has', () => {
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
    expect(VERSION).toBe(manifest.version);
    expect(readme).toContain(`compresso-mcp ${VERSION} on stdio`);
  });
});
