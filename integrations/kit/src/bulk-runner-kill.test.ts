import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Compresso } from '@compresso/client';
import { fileBlobStore, sqliteDatabase } from '@compresso/runtime';
import { proAccount, startTestServer } from '@compresso/server/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { backupStore, sha256 } from './backups.ts';
import { assetLedger } from './ledger.ts';
import { KIT_MIGRATIONS } from './migrations.ts';
import type { BulkRun } from './runs.ts';
import { fixtureImage } from './testing/fixtures.ts';
import { createFolderPlatform } from './testing/folder-platform.ts';

const dir = mkdtempSync(join(tmpdir(), 'compresso-kit-kill-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Line = { type: string; [key: string]: unknown };

/** Start a worker process; `onLine` hears each JSON line it prints. Resolves with how it ended. */
function worker(
  env: Record<string, string>,
  onLine: (line: Line, child: ChildProcess) => void,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'test-bulk-worker.ts')], {
    cwd: join(import.meta.dirname, '..'),
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => {
    stderr += String(chunk);
  });
  createInterface({ input: child.stdout! }).on('line', (text) => onLine(JSON.parse(text) as Line, child));
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, stderr })));
}

describe('bulk runner: a worker process SIGKILLed mid-run', () => {
  it('the run is taken over by the next process and completes: every image compressed and replaced once, every original kept', async () => {
    const server = await startTestServer({ dbPath: ':memory:', overrides: { logLevel: 'warn' } });
    try {
      const { key } = await proAccount(server.db, 'kill@example.com');
      const site = 'kill.example';
      const platform = createFolderPlatform({ root: join(dir, 'platform') });
      platform.addSite(site, 'Kill Store');
      const originals = new Map<string, string>();
      for (let i = 0; i < 10; i++) {
        const image = await fixtureImage(
          200 + i,
          i % 5 === 4 ? 'small-jpeg' : i % 5 === 3 ? 'png' : 'jpeg',
          96,
        );
        originals.set(platform.addAsset(site, image), sha256(image.bytes));
      }
      const env = {
        KIT_SITE: site,
        KIT_DB: join(dir, 'app.sqlite'),
        KIT_BLOBS: join(dir, 'blobs'),
        KIT_PLATFORM_ROOT: join(dir, 'platform'),
        COMPRESSO_API_KEY: key,
        COMPRESSO_BASE_URL: server.url,
      };
      const usage = new Compresso(key, { baseUrl: server.url });
      const usedBefore = (await usage.usage()).used;

      // The first worker is killed as soon as it reports its 5th image: mid-way through the 6th,
      // wherever that is (a download, the compression, the replacement, a ledger write).
      let assets = 0;
      const first = await worker({ ...env, KIT_MODE: 'start' }, (line, child) => {
        if (line.type === 'asset' && ++assets === 5) child.kill('SIGKILL');
      });
      expect(first.signal, first.stderr).toBe('SIGKILL');
      expect(assets).toBeGreaterThanOrEqual(5);
      expect(assets).toBeLessThan(10);

      // The next process starts (its clock past the dead one's leases) and resumes the orphaned run.
      let runs: BulkRun[] = [];
      const second = await worker(
        { ...env, KIT_MODE: 'resume', KIT_CLOCK_OFFSET_MS: String(11 * 60_000) },
        (line) => {
          if (line.type === 'runs') runs = line.runs as BulkRun[];
        },
      );
      expect(second.code, second.stderr).toBe(0);
      expect(runs).toHaveLength(1);
      expect(runs[0]).toMatchObject({ state: 'completed', total: 10, done: 10, failed: 0 });

      const db = sqliteDatabase({ path: env.KIT_DB, migrations: [KIT_MIGRATIONS] });
      await db.migrate();
      try {
        const ledger = assetLedger(db);
        const backups = backupStore({ blobs: fileBlobStore({ root: env.KIT_BLOBS }) });
        const replaced = platform.replacements(site);
        let optimized = 0;
        for (const [id, originalHash] of originals) {
          const record = await ledger.get(site, id);
          expect(record?.originalHash).toBe(originalHash);
          expect(record?.currentHash).toBe(sha256(platform.bytesOf(site, id)));
          expect(['optimized', 'skipped']).toContain(record?.state);
          if (record?.state === 'optimized') optimized++;
          expect(
            replaced.filter((r) => r === id),
            id,
          ).toHaveLength(record?.state === 'optimized' ? 1 : 0);
          expect(sha256((await backups.read(record!.backupKey!)).bytes)).toBe(originalHash);
        }
        expect(optimized).toBe(runs[0]!.optimized);
        expect(optimized).toBeGreaterThanOrEqual(6);
        // Ten compressions counted, whatever the kill interrupted (the retry is the server's replay).
        expect((await usage.usage()).used - usedBefore - 1).toBe(10);
      } finally {
        await db.close();
      }
    } finally {
      await server.close();
    }
  });
});
