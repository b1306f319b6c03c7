import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkGraph, readGraph } from '../scripts/import-graph.ts';

/**
 * The packages' import graph keeps the layering ARCHITECTURE.md draws: shipped code imports only the
 * packages below it, nothing forms a cycle, the Node client reaches schema through its zod-free
 * `./wire` entry only, and no file imports another package's files by relative path (tests included:
 * they use package entries such as @compresso/server/testing).
 */
const made: string[] = [];
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'compresso-graph-'));
  made.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe('the import graph', () => {
  it('of this repository breaks no rule', () => {
    const graph = readGraph();
    expect(graph.packages).toEqual(expect.arrayContaining(['schema', 'client', 'server', 'runtime', 'mcp']));
    // The client's one arrow: schema's wire entry, built into its dist.
    expect([
      ...new Set(graph.edges.filter((e) => e.from === 'client' && !e.test).map((e) => e.specifier)),
    ]).toEqual(['@compresso/schema/wire']);
    expect(checkGraph(graph)).toEqual([]);
  });

  it('names an arrow up, a cycle, the client past schema/wire, and a relative import out of a package', () => {
    const root = tree({
      'core/schema/src/index.ts': "import { x } from '@compresso/engine';\n",
      'core/engine/src/index.ts': "import { s } from '@compresso/schema';\n",
      'core/runtime/src/index.ts': "export const r = await import('@compresso/server');\n",
      'core/server/src/index.ts': "import { r } from '@compresso/runtime';\n",
      'core/client/src/index.ts': "import { CompressOptionsSchema } from '@compresso/schema';\n",
      'core/mcp/src/a.test.ts':
        "import { f } from '../../cli/src/report.ts';\nimport { s } from '@compresso/server';\n",
    });
    const problems = checkGraph(readGraph(root));
    expect(problems).toEqual(
      expect.arrayContaining([
        'core/mcp/src/a.test.ts: imports ../../cli/src/report.ts, outside its package (import a package entry instead)',
        'core/schema/src/index.ts: schema imports @compresso/engine (schema may import nothing)',
        'core/runtime/src/index.ts: runtime imports @compresso/server (runtime may import schema)',
        'core/client/src/index.ts: the client imports @compresso/schema; only @compresso/schema/wire is built into it',
        'cycle: schema -> engine -> schema',
        'cycle: runtime -> server -> runtime',
      ]),
    );
    // A test may import any package through its entry.
    expect(problems.filter((p) => p.includes('@compresso/server') && p.includes('a.test.ts'))).toEqual([]);
  });

  it('refuses a package that has no place in the layering yet', () => {
    const root = tree({ 'integrations/magento/src/index.ts': "import { c } from '@compresso/client';\n" });
    expect(checkGraph(readGraph(root))).toContain(
      'magento: a package with no place in ALLOWED (scripts/import-graph.ts)',
    );
  });
});
