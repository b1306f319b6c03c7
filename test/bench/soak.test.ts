import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import type { SoakResult } from './soak.ts';

const run = promisify(execFile);
const ROOT = resolve(fileURLToPath(import.meta.url), '../../..');
const dir = mkdtempSync(join(tmpdir(), 'compresso-soak-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The harness works end to end on a handful of requests; its speed and memory numbers belong to
// `npm run bench:soak` and are never asserted here.
describe('npm run bench:soak', () => {
  it('drives the real server with the mix and writes counts per input kind, RSS samples and /metrics', async () => {
    const out = join(dir, 'soak.json');
    await run(
      process.execPath,
      ['test/bench/soak.ts', '--requests', '20', '--concurrency', '4', '--idle-seconds', '0', '--out', out],
      { cwd: ROOT, timeout: 110_000, maxBuffer: 16 * 1024 * 1024 },
    );
    const result = JSON.parse(readFileSync(out, 'utf8')) as SoakResult;
    const md = readFileSync(out.replace(/\.json$/, '.md'), 'utf8');

    const kinds = Object.values(result.kinds);
    expect(kinds.reduce((sum, k) => sum + k.requests, 0)).toBe(20);
    // The first 20 of the interleaving reach good and bad kinds alike.
    expect(result.kinds['jpeg-12mp-webp']!.statuses['200']).toBeGreaterThan(0);
    const bad = Object.entries(result.kinds).filter(([name, k]) => name.startsWith('bad-') && k.requests > 0);
    expect(bad.length).toBeGreaterThan(0);
    for (const [, k] of bad) expect(Object.keys(k.statuses).every((s) => /^4\d\d$/.test(s))).toBe(true);
    expect(result.server_errors).toBe(0);
    expect(result.unexpected).toBe(0);
    expect(Object.values(result.status_counts).reduce((a, b) => a + b, 0)).toBe(20);

    expect(result.samples.length).toBeGreaterThan(1);
    expect(result.peak_rss_mib).toBeGreaterThanOrEqual(Math.max(...result.samples.map((s) => s.rss_mib)));
    expect(result.requests_per_second).toBeGreaterThan(0);
    expect(result.cpu_ms_per_request).toBeGreaterThan(0);
    // Read from the server's /metrics, not computed here.
    expect(result.metrics_end_of_load['compresso_nodejs_heap_size_used_bytes']).toBeGreaterThan(0);
    expect(result.metrics_after_idle['compresso_engine_memory_bytes{state="in_use"}']).toBe(0);
    expect(result.metrics_after_idle['compresso_engine_memory_budget_bytes']).toBe(768 * 1024 * 1024);
    expect(md).toContain('| jpeg-12mp-webp | ');
    expect(md).toMatch(/peak RSS \(VmHWM\) \| \d+ MiB/);
  }, 120_000);
});
