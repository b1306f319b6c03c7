// The packages' import graph, read from the source: which package imports which, in shipped code and
// in tests. `node scripts/import-graph.ts` prints it and exits 1 when it breaks the layering that
// ARCHITECTURE.md draws (an arrow up, a cycle, a relative import out of a package, or the Node client
// importing more of schema than its zod-free `./wire` entry); test/import-graph.test.ts runs the same
// check in `npm test`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';

export const REPO = resolve(import.meta.dirname, '..');

/**
 * What each package's shipped code may import (ARCHITECTURE.md, "Import directions"). A package
 * missing here is a new one: the check fails until its place is decided.
 */
export const ALLOWED: Record<string, readonly string[]> = {
  schema: [],
  engine: ['schema'],
  runtime: ['schema'],
  server: ['schema', 'engine', 'runtime'],
  cli: ['schema', 'engine', 'runtime', 'server'],
  client: ['schema'],
  mcp: ['schema', 'client'],
  python: [],
  // Planned (issue 14): integrations reach the API through the client, as a customer does.
  kit: ['schema', 'client', 'runtime'],
  shopify: ['schema', 'client', 'runtime', 'kit'],
  wordpress: [],
};

/** The only entries of another package the Node client's shipped code may import. */
const CLIENT_MAY_IMPORT = new Set(['@compresso/schema/wire']);
/** Packages whose npm name is not `@compresso/<directory>`. */

/** Tests (and the helpers only tests load) may import any package, through its entries only. */
export function isTestFile(path: string): boolean {
  const name = path.split('/').at(-1) ?? '';
  return (
    /\.test\.ts$/.test(name) ||
    /^test-/.test(name) ||
    name === 'testing.ts' ||
    name === 'hostile-server.ts' ||
    name === 'process-fixture.ts' ||
    path.includes('/test-support/') ||
    // Benchmarks are not shipped: they stand up servers the way tests do.
    /^(core|integrations)\/[^/]+\/bench\//.test(path) ||
    // The Python client's tests (Python, and the TypeScript that exports the schema for them).
    path.startsWith('core/python/tests/')
  );
}

export interface Edge {
  from: string;
  to: string;
  specifier: string;
  file: string;
  test: boolean;
}

const SOURCE = /\.(ts|mts|mjs|js)$/;
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"]([^'"]+)['"]/g;

function* sources(dir: string): Generator<string> {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const entry of entries) {
    if (entry === 'node_modules' || entry === 'dist' || entry.startsWith('.')) continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) yield* sources(path);
    else if (SOURCE.test(entry) && !entry.endsWith('.d.ts')) yield path;
  }
}

/** Every import of every package under core/ and integrations/, with the package it reaches. */
export function readGraph(root = REPO): { packages: string[]; edges: Edge[]; problems: string[] } {
  const packages: string[] = [];
  const dirs = new Map<string, string>();
  for (const group of ['core', 'integrations']) {
    let names: string[] = [];
    try {
      names = readdirSync(join(root, group));
    } catch {
      continue;
    }
    for (const name of names) {
      const dir = join(root, group, name);
      if (!statSync(dir).isDirectory()) continue;
      packages.push(name);
      dirs.set(name, dir);
    }
  }
  // `@compresso/integration-kit` is the folder `kit`: packages are named by their package.json.
  const byName = new Map<string, string>();
  for (const [pkg, dir] of dirs) {
    try {
      const { name } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string };
      if (typeof name === 'string') byName.set(name, pkg);
    } catch {
      // No package.json (a fixture tree): the folder name is the package name.
    }
  }
  const edges: Edge[] = [];
  const problems: string[] = [];
  for (const [pkg, dir] of dirs) {
    for (const file of sources(dir)) {
      const rel = relative(root, file).split(sep).join('/');
      const test = isTestFile(rel);
      const text = readFileSync(file, 'utf8');
      for (const match of text.matchAll(IMPORT)) {
        const specifier = match[1]!;
        if (specifier.startsWith('.')) {
          const target = resolve(file, '..', specifier);
          if (!target.startsWith(dir + sep)) {
            problems.push(
              `${rel}: imports ${specifier}, outside its package (import a package entry instead)`,
            );
          }
          continue;
        }
        const scoped = /^@compresso\/([a-z0-9-]+)/.exec(specifier);
        if (!scoped) continue;
        const to = byName.get(`@compresso/${scoped[1]}`) ?? scoped[1]!;
        if (to === pkg) continue;
        edges.push({ from: pkg, to, specifier, file: rel, test });
      }
    }
  }
  return { packages: packages.sort(), edges, problems };
}

/** The layering rules over a graph: every broken one as a sentence naming the file. */
export function checkGraph(graph: ReturnType<typeof readGraph>): string[] {
  const problems = [...graph.problems];
  for (const pkg of graph.packages) {
    if (!ALLOWED[pkg]) problems.push(`${pkg}: a package with no place in ALLOWED (scripts/import-graph.ts)`);
  }
  for (const edge of graph.edges) {
    if (edge.test) continue;
    const allowed = ALLOWED[edge.from] ?? [];
    if (!allowed.includes(edge.to)) {
      problems.push(
        `${edge.file}: ${edge.from} imports ${edge.specifier} (${edge.from} may import ${allowed.join(', ') || 'nothing'})`,
      );
    } else if (edge.from === 'client' && !CLIENT_MAY_IMPORT.has(edge.specifier)) {
      problems.push(
        `${edge.file}: the client imports ${edge.specifier}; only @compresso/schema/wire is built into it`,
      );
    }
  }
  // Cycles in the shipped graph (tests excluded): a depth-first search for a back edge.
  const next = new Map<string, Set<string>>();
  for (const edge of graph.edges)
    if (!edge.test) (next.get(edge.from) ?? next.set(edge.from, new Set()).get(edge.from)!).add(edge.to);
  const state = new Map<string, 'open' | 'done'>();
  const visit = (node: string, path: string[]) => {
    if (state.get(node) === 'done') return;
    if (state.get(node) === 'open') {
      problems.push(`cycle: ${[...path.slice(path.indexOf(node)), node].join(' -> ')}`);
      return;
    }
    state.set(node, 'open');
    for (const to of next.get(node) ?? []) visit(to, [...path, node]);
    state.set(node, 'done');
  };
  for (const pkg of graph.packages) visit(pkg, []);
  return problems;
}

/** `from -> to` for each package pair, shipped code first, then what only tests import. */
export function describeGraph(graph: ReturnType<typeof readGraph>): string {
  const lines: string[] = [];
  for (const test of [false, true]) {
    const pairs = new Map<string, Set<string>>();
    for (const edge of graph.edges.filter((e) => e.test === test)) {
      (pairs.get(edge.from) ?? pairs.set(edge.from, new Set()).get(edge.from)!).add(edge.specifier);
    }
    lines.push(test ? 'tests:' : 'shipped code:');
    for (const pkg of graph.packages) {
      const to = [...(pairs.get(pkg) ?? [])].sort();
      if (to.length || !test) lines.push(`  ${pkg} -> ${to.join(', ') || '(nothing)'}`);
    }
  }
  return lines.join('\n');
}

if (import.meta.main) {
  const graph = readGraph();
  process.stdout.write(`${describeGraph(graph)}\n`);
  const problems = checkGraph(graph);
  for (const problem of problems) process.stderr.write(`${problem}\n`);
  process.exitCode = problems.length ? 1 : 0;
}
