import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import type { BenchResult } from './report.ts';

const run = promisify(execFile);
const ROOT = resolve(fileURLToPath(import.meta.url), '../../..');
const dir = mkdtempSync(join(tmpdir(), 'compresso-bench-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Structure and sanity only: timings depend on the machine and its load and are never asserted.
describe('npm run bench --quick', () => {
  it('writes JSON and Markdown with positive measurements for every kind', async () => {
    const out = join(dir, 'quick.json');
    const { stdout } = await run(
      process.execPath,
      ['test/bench/run.ts', '--quick', '--no-reference', '--out', out],
      // A hang guard, not a speed check: the quick run takes ~20 s alone, minutes on a loaded machine.
      { cwd: ROOT, timeout: 280_000, maxBuffer: 16 * 1024 * 1024 },
    );
    const result = JSON.parse(readFileSync(out, 'utf8')) as BenchResult;

    expect(result.benchmark).toBe('compresso');
    expect(Date.parse(result.date)).not.toBeNaN();
    expect(result.machine['cores']).toBeGreaterThan(0);
    expect(result.machine['sharp']).toMatch(/^\d+\.\d+\.\d+/);
    expect(result.machine['libvips']).toMatch(/^\d+\.\d+\.\d+/);
    expect(result.settings.quick).toBe(true);
    expect(result.settings.formats).toEqual(['webp']);
    expect(result.settings.maxDimension).toBe(2048);
    expect(result.settings.concurrency).toBeGreaterThan(0);
    expect(result.referenceTools).toEqual([]);
    expect(result.memory.processMaxRssMiB).toBeGreaterThan(0);

    const kinds = ['photo', 'screenshot', 'icon', 'chart', 'graphic'];
    for (const kind of [...kinds, 'all']) {
      for (const encoder of ['engine', 'sharp']) {
        const row = result.rows.find(
          (r) => r.kind === kind && r.encoder === encoder && r.format === 'webp' && r.mode === 'default',
        );
        expect(row, `${kind} ${encoder}`).toBeDefined();
        expect(row!.errors).toEqual([]);
        expect(row!.images).toBeGreaterThan(0);
        expect(row!.imagesPerSecond).toBeGreaterThan(0);
        expect(row!.outputBytes).toBeGreaterThan(0);
        expect(row!.outputBytes).toBeLessThan(row!.inputBytes);
        expect(row!.peakRssMiB).toBeGreaterThan(0);
      }
      const engine = result.rows.find(
        (r) => r.kind === kind && r.encoder === 'engine' && r.mode === 'default',
      )!;
      expect(engine.engineOverRaw).toBeGreaterThan(0);
      // Raw sharp runs the engine's own encoder settings, so the bytes must come out the same.
      const raw = result.rows.find((r) => r.kind === kind && r.encoder === 'sharp' && r.mode === 'default')!;
      expect(raw.identicalToEngine).toBe(raw.images);
      if (result.metric.scored) {
        expect(engine.scored).toBe(engine.images);
        expect(engine.meanScore).toBeGreaterThan(30);
        expect(engine.meanScore).toBeLessThanOrEqual(100);
      }
    }
    const all = result.rows.find((r) => r.kind === 'all' && r.encoder === 'engine' && r.mode === 'default')!;
    expect(all.images).toBe(result.settings.images.length);

    expect(stdout).toMatch(/\| format +\| quality +\| encoder +\|/);
    expect(readFileSync(out.replace(/\.json$/, '.md'), 'utf8')).toBe(stdout);
  }, 300_000);
});
