/**
 * A bulk worker process for the kill test (bulk-runner-kill.test.ts): the app's real parts on disk —
 * a SQLite file, a blob directory, the folder platform — and a real server through the client. It
 * prints one JSON line per event, so the test can SIGKILL it at a moment it chooses, and a final
 * line with the run. `KIT_CLOCK_OFFSET_MS` moves its clock forward: the process that takes over
 * after a kill sees the dead one's leases as run out without anyone waiting for them.
 */
import { Compresso } from '@compresso/client';
import { fileBlobStore, sqliteDatabase } from '@compresso/runtime';
import { backupStore } from './backups.ts';
import { createBulkRunner } from './bulk-runner.ts';
import { type Clock, systemClock } from './clock.ts';
import { KIT_MIGRATIONS } from './migrations.ts';
import { createOptimizer } from './pipeline.ts';
import { createFolderPlatform } from './testing/folder-platform.ts';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};
const offset = Number(process.env.KIT_CLOCK_OFFSET_MS ?? 0);
const clock: Clock = { now: () => Date.now() + offset, sleep: systemClock.sleep };
const site = env('KIT_SITE');
const db = sqliteDatabase({ path: env('KIT_DB'), migrations: [KIT_MIGRATIONS] });
await db.migrate();
const platform = createFolderPlatform({ root: env('KIT_PLATFORM_ROOT'), clock });
const client = new Compresso(env('COMPRESSO_API_KEY'), { baseUrl: env('COMPRESSO_BASE_URL') });
const optimizer = createOptimizer({
  db,
  port: platform.port,
  backups: backupStore({ blobs: fileBlobStore({ root: env('KIT_BLOBS') }) }),
  client: () => client,
  settings: () => ({ quality: 80 }),
  clock,
});
const runner = createBulkRunner({
  db,
  port: platform.port,
  optimizer,
  clock,
  pageSize: 4,
  onProgress: (event) => {
    if (event.type === 'asset')
      console.log(JSON.stringify({ type: 'asset', id: event.asset.id, kind: event.outcome.kind }));
  },
});

if (process.env.KIT_MODE === 'start') {
  const { run } = await runner.start(site);
  console.log(JSON.stringify({ type: 'started', id: run.id }));
  console.log(JSON.stringify({ type: 'run', run: await runner.drive(run.id) }));
} else {
  const runs = await runner.resumeOrphans();
  console.log(JSON.stringify({ type: 'runs', runs }));
}
await db.close();
