import { performance } from 'node:perf_hooks';

/**
 * Run `fn` over `items` with exactly `limit` in flight (fewer only at the tail), the way a server
 * with one slot per core would see them. Returns the wall-clock seconds for the whole batch.
 */
export async function runBatch<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<void>,
): Promise<number> {
  let next = 0;
  const start = performance.now();
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return (performance.now() - start) / 1000;
}

/**
 * `runBatch` over the same items again and again until the rounds together have taken at least
 * `minSeconds`; returns the mean seconds of one round and how many ran. A batch of small images
 * (two icons: four fixed encodes in ~25 ms) is otherwise timed over tens of milliseconds, where a
 * thread waking late or another process moves it by a third: two bench runs of the same code on an
 * idle machine read 21.5 and 29.5 graphic JPEGs a second at the fixed quality (0.14–0.19 s batches)
 * where the auto batches of the same images (~0.7 s) read 6.18 and 5.97 (2026-11-28).
 */
export async function runRounds<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<void>,
  minSeconds: number,
): Promise<{ seconds: number; rounds: number }> {
  let total = 0;
  let rounds = 0;
  do {
    total += await runBatch(items, limit, fn);
    rounds++;
  } while (total < minSeconds);
  return { seconds: total / rounds, rounds };
}

/**
 * A batch of fewer jobs than slots would measure latency, not throughput: small kinds (one chart,
 * two icons) repeat their images until every slot has had at least two jobs.
 */
export function fillJobs<T>(items: readonly T[], minimum: number): T[] {
  if (items.length === 0) return [];
  const jobs = [...items];
  while (jobs.length < minimum) jobs.push(items[jobs.length % items.length]!);
  return jobs;
}

/**
 * Process RSS sampled every few milliseconds. libvips allocates outside the V8 heap, so RSS is the
 * number that matters for sizing a server; the sampler reads it cheaply from the event loop, which
 * stays free while sharp works on the libuv pool.
 */
export class RssSampler {
  #peak = 0;
  #timer: NodeJS.Timeout | undefined;

  start(intervalMs = 20): void {
    this.#peak = process.memoryUsage.rss();
    this.#timer = setInterval(() => {
      const rss = process.memoryUsage.rss();
      if (rss > this.#peak) this.#peak = rss;
    }, intervalMs);
    this.#timer.unref();
  }

  /** Peak since start(), then stop. */
  stop(): number {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    const rss = process.memoryUsage.rss();
    if (rss > this.#peak) this.#peak = rss;
    return this.#peak;
  }
}

export const MiB = 1024 * 1024;

/** The median of `xs` (NaN for none, which JSON writes as null). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return Number.NaN;
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

export function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}
