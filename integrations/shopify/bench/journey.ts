/**
 * The Shopify app's journey, measured: `node integrations/shopify/bench/journey.ts` (or `npm run bench
 * -w @compresso/shopify`). Everything real but Shopify, as in the tests (test-harness.ts): the
 * Compresso server on loopback (`/api/v1`, real sharp), the fake Shopify through the real
 * @shopify/shopify-api, the app process with its in-process queue and one worker.
 *
 * 1. Latency: products created one at a time on an idle worker — from the products/create delivery
 *    (the moment Shopify sends it) to each image replaced in place (the fake's file is READY with the
 *    new bytes).
 * 2. Throughput: `--products` products of three photos created at once; images replaced per second
 *    from the first delivery to the last replacement, by one worker (`--concurrency` jobs at once,
 *    default the runtime's COMPRESSO_WORKER_CONCURRENCY, 2).
 *
 * Prints one JSON object (with the machine's load average at start and end) and a summary line.
 * Flags: --products 30 --latency-runs 5 --quality 75 --concurrency 2.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { startHarness } from '../src/test-harness.ts';

const { values } = parseArgs({
  options: {
    products: { type: 'string', default: '30' },
    'latency-runs': { type: 'string', default: '5' },
    quality: { type: 'string', default: '75' },
    concurrency: { type: 'string' },
  },
});
const products = Number(values.products);
const latencyRuns = Number(values['latency-runs']);
const quality = Number(values.quality);
const concurrency = values.concurrency ? Number(values.concurrency) : undefined;

const CORPUS = new URL('../../../../shared/corpus/', import.meta.url);
const PHOTOS = [
  'photo-skimage-rocket.jpg',
  'photo-mate-LadyBird.jpg',
  'photo-skimage-hubble_deep_field.jpg',
  'photo-mate-TwoWings.jpg',
  'photo-mate-Dune.jpg',
  'photo-sharpfixture-2569067123.jpg',
].map((name) => ({ name, bytes: readFileSync(new URL(name, CORPUS)) }));

const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;
const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

const loadAtStart = loadavg().map((n) => round(n));
const h = await startHarness({ overrides: concurrency ? { workerConcurrency: concurrency } : {} });
try {
  const shop = h.fake.addShop('bench');
  await h.install(shop);
  await h.app.app.shops.updateSettings(shop, { enabled: true, quality });

  /** Resolves once every one of these files is replaced (version 2), with when each was. */
  async function replaced(ids: string[]): Promise<Map<string, number>> {
    const at = new Map<string, number>();
    for (;;) {
      const changed = h.fake.changed();
      for (const id of ids) {
        const file = h.fake.file(id);
        if (!at.has(id) && file && file.version >= 2 && file.status === 'READY')
          at.set(id, performance.now());
      }
      if (at.size === ids.length) return at;
      await changed;
    }
  }
  /** Every job of the queue done (the self-caused products/update too): the worker is idle again. */
  async function idle(): Promise<void> {
    for (;;) {
      const counts = await h.app.queue.counts();
      if (counts.waiting + counts.active + counts.delayed === 0) return;
      await new Promise<void>((resolve) => {
        const stop = h.app.queue.on((e) => {
          if (e.type === 'completed' || e.type === 'failed') {
            stop();
            resolve();
          }
        });
      });
    }
  }

  let n = 0;
  const images = () => [0, 1, 2].map(() => PHOTOS[n++ % PHOTOS.length]!);

  // 1. Latency, one product at a time on an idle worker.
  const latency: { image: number; ms: number }[] = [];
  for (let run = 0; run < latencyRuns; run++) {
    const sent = performance.now();
    const product = await h.fake.createProduct(shop, {
      title: `Latency ${run}`,
      images: images().map((p, i) => ({ bytes: p.bytes, filename: `latency-${run}-${i}-${p.name}` })),
    });
    const at = await replaced(product.mediaIds);
    product.mediaIds.forEach((id, i) => {
      latency.push({ image: i + 1, ms: (at.get(id) as number) - sent });
    });
    await idle();
  }

  // 2. Throughput: every product's webhook delivered, then the one worker works through them.
  const started = performance.now();
  const ids: string[] = [];
  let bytesBefore = 0;
  for (let p = 0; p < products; p++) {
    const photos = images();
    bytesBefore += photos.reduce((sum, photo) => sum + photo.bytes.length, 0);
    const product = await h.fake.createProduct(shop, {
      title: `Burst ${p}`,
      images: photos.map((photo, i) => ({ bytes: photo.bytes, filename: `burst-${p}-${i}-${photo.name}` })),
    });
    ids.push(...product.mediaIds);
  }
  const delivered = performance.now() - started;
  const at = await replaced(ids);
  const elapsed = Math.max(...at.values()) - started;
  const bytesAfter = ids.reduce((sum, id) => sum + (h.fake.file(id)?.bytes.length ?? 0), 0);
  const answered = h.fake.deliveries.map((d) => d.answeredInMs).sort((a, b) => a - b);
  await idle();
  const failed = await h.app.queue.failed();

  const first = latency
    .filter((l) => l.image === 1)
    .map((l) => l.ms)
    .sort((a, b) => a - b);
  const third = latency
    .filter((l) => l.image === 3)
    .map((l) => l.ms)
    .sort((a, b) => a - b);
  const result = {
    when: new Date().toISOString(),
    cpus: availableParallelism(),
    load_average_start: loadAtStart,
    load_average_end: loadavg().map((x) => round(x)),
    quality,
    worker_concurrency: h.app.config.workerConcurrency,
    latency_runs: latencyRuns,
    webhook_to_first_image_ms: {
      median: Math.round(percentile(first, 50)),
      max: Math.round(Math.max(...first)),
    },
    webhook_to_third_image_ms: {
      median: Math.round(percentile(third, 50)),
      max: Math.round(Math.max(...third)),
    },
    burst: {
      products,
      images: ids.length,
      webhooks_delivered_ms: Math.round(delivered),
      elapsed_ms: Math.round(elapsed),
      images_per_second: round(ids.length / (elapsed / 1000)),
      bytes_before: bytesBefore,
      bytes_after: bytesAfter,
      saved_percent: round((1 - bytesAfter / bytesBefore) * 100, 1),
    },
    webhook_answer_ms: {
      median: Math.round(percentile(answered, 50)),
      max: Math.round(Math.max(...answered)),
    },
    deliveries: answered.length,
    failed_jobs: failed.length,
  };
  console.log(JSON.stringify(result, null, 2));
  console.log(
    `webhook → image replaced: first ${result.webhook_to_first_image_ms.median} ms, third ${result.webhook_to_third_image_ms.median} ms (median of ${latencyRuns}); ` +
      `${ids.length} images in ${round(elapsed / 1000, 1)} s = ${result.burst.images_per_second} images/s, one worker ` +
      `(concurrency ${result.worker_concurrency}); load average ${loadAtStart.join(' ')} → ${result.load_average_end.join(' ')}`,
  );
  if (failed.length > 0) process.exitCode = 1;
} finally {
  await h.close();
}
