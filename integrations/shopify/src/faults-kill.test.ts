import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectIntact } from './test-fault-checks.ts';
import { type Harness, startHarness } from './test-harness.ts';
import { webhookJobId } from './webhooks.ts';

const CORPUS = new URL('../../../../shared/corpus/', import.meta.url);
const PHOTOS = ['photo-skimage-rocket.jpg', 'photo-mate-LadyBird.jpg'];

type Line = { type: string; id?: string; [key: string]: unknown };
interface WorkerProc {
  child: ChildProcess;
  exited: Promise<unknown>;
  kill(): Promise<void>;
}

let h: Harness;
const lines: Line[] = [];
const waiters = new Set<() => void>();
const procs: WorkerProc[] = [];

/** `npm run shopify:worker` as a real child process on the app's Redis, database and blobs. */
function startWorker(): WorkerProc {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'test-worker-process.ts')], {
    env: {
      PATH: process.env.PATH ?? '',
      ...h.env,
      FAKE_SHOPIFY_URL: h.fake.url,
      // A killed worker's job goes to the next one after about lock + check interval: seconds.
      COMPRESSO_JOB_LOCK_MS: '3000',
      COMPRESSO_WORKER_CONCURRENCY: '1',
      LOG_LEVEL: 'silent',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  createInterface({ input: child.stdout! }).on('line', (text) => {
    lines.push(JSON.parse(text) as Line);
    for (const wake of [...waiters]) wake();
  });
  const exited = once(child, 'exit');
  const proc = {
    child,
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
  procs.push(proc);
  return proc;
}

/** The first line (of any worker) matching, waited for on the lines themselves. */
function line(match: (l: Line) => boolean): Promise<Line> {
  const seen = lines.find(match);
  if (seen) return Promise.resolve(seen);
  return new Promise((resolve) => {
    const wake = () => {
      const found = lines.find(match);
      if (found) {
        waiters.delete(wake);
        resolve(found);
      }
    };
    waiters.add(wake);
  });
}
/** The n-th line (of any worker, 1-based) matching, waited for on the lines themselves. */
function nth(n: number, match: (l: Line) => boolean): Promise<Line> {
  return new Promise((resolve) => {
    const check = () => {
      const found = lines.filter(match)[n - 1];
      if (!found) return;
      waiters.delete(check);
      resolve(found);
    };
    waiters.add(check);
    check();
  });
}

/** The job's end: completed, or failed with no retry left. */
const completed = (id: string) =>
  line((l) => l.id === id && (l.type === 'completed' || (l.type === 'failed' && l.willRetry === false)));

beforeAll(async () => {
  // The HTTP process only queues (BullMQ on the shared Redis, a prefix of its own); no worker here.
  h = await startHarness({ redis: true, noWorker: true });
});
afterAll(async () => {
  if (h) h.fake.onEvent = undefined;
  for (const proc of procs) await proc.kill();
  await h?.close();
});

describe('a worker process SIGKILLed mid-image', () => {
  it('between upload and fileUpdate, then with the new file still PROCESSING: the next worker finishes; each image replaced exactly once, one backup each', async () => {
    const shop = h.fake.addShop('kill');
    await h.install(shop);
    await h.app.app.shops.updateSettings(shop, { enabled: true, quality: 75 });
    const originals = PHOTOS.map((n) => readFileSync(new URL(n, CORPUS)));
    let current = startWorker();
    await line((l) => l.type === 'ready');

    let second = '';
    const kills: string[] = [];
    let firstKill!: () => void;
    let secondKill!: () => void;
    const killedOnce = new Promise<void>((resolve) => {
      firstKill = resolve;
    });
    const killedTwice = new Promise<void>((resolve) => {
      secondKill = resolve;
    });
    h.fake.onEvent = async (event) => {
      if (event.shop !== shop) return;
      // 1. The first image's compressed bytes are uploaded; fileUpdate has not been sent.
      if (event.kind === 'upload' && event.filename === 'kill-0.jpg' && kills.length === 0) {
        await current.kill();
        kills.push('after upload');
        firstKill();
      }
      // 2. Shopify took the second image's new file (PROCESSING); the worker has not recorded it.
      if (event.kind === 'fileUpdate' && event.fileIds.includes(second) && kills.length === 1)
        h.fake.holdProcessing = true;
      if (event.kind === 'fileUpdated' && event.fileIds.includes(second) && kills.length === 1) {
        await current.kill();
        kills.push('after fileUpdate');
        h.fake.holdProcessing = false;
        await h.fake.finishProcessing();
        secondKill();
      }
    };
    const product = await h.fake.createProduct(shop, {
      title: 'Kill',
      images: originals.map((bytes, i) => ({ bytes, filename: `kill-${i}.jpg` })),
    });
    second = product.mediaIds[1]!;
    const mine = () => h.fake.deliveries.filter((d) => d.body.includes(product.id));
    const jobId = webhookJobId(mine()[0]!.webhookId);

    await killedOnce;
    current = startWorker();
    await killedTwice;
    current = startWorker();
    // Done once the queue says so: on this busy machine a live worker may miss renewing its lock, and
    // then the stalled-job check gives the job out once more (it finds nothing left to do).
    let view = await h.app.queue.getJob(jobId);
    for (let ends = 1; view?.state !== 'completed'; ends++) {
      const end = await nth(ends, (l) => l.id === jobId && (l.type === 'completed' || l.type === 'failed'));
      if (end.type === 'failed' && end.willRetry === false) break;
      view = await h.app.queue.getJob(jobId);
    }
    h.fake.onEvent = undefined;
    expect(kills).toEqual(['after upload', 'after fileUpdate']);
    // The takeovers were the queue's stalled-job check, which spends no attempt on a kill.
    expect(view?.state, JSON.stringify(view)).toBe('completed');
    expect(view?.stalls, JSON.stringify(view)).toBeGreaterThanOrEqual(1);
    expect(view?.failedReason ?? null, JSON.stringify(view)).toBeNull();

    // The products/update the replacements caused: taken by the last worker, nothing to do.
    for (const delivery of mine()) {
      expect(delivery.status).toBe(200);
      expect((await completed(webhookJobId(delivery.webhookId))).type).toBe('completed');
    }
    await expectIntact(
      h,
      shop,
      product.mediaIds.map((id, i) => ({ id, original: originals[i]!, replaced: true })),
    );
    await current.kill();
  }, 180_000);
});
