import { availableParallelism } from 'node:os';
import {
  type CompressOptions,
  type CompressOptionsInput,
  defaultOutputFormat,
  type EditOperation,
  type ImageFacts,
  type ImageInspection,
  parseCompressOptions,
} from '@compresso/schema';
import sharp from 'sharp';
import { createAutoEncoder } from './auto.ts';
import { ByteSemaphore } from './byte-semaphore.ts';
import { measureFacts } from './describe.ts';
import { applyEdits } from './edit/apply.ts';
import { closeHeicDecoder } from './heic.ts';
import { inspectImage } from './inspect.ts';
import { type EngineLimits, resolveLimits } from './limits.ts';
import { estimateInspectBytes, estimateOptimizeBytes, estimateOptimizeClaim } from './memory-estimate.ts';
import { closeMetricPool } from './metric/index.ts';
import { type AutoEncoder, type OptimizeOutput, optimizeImage } from './optimize.ts';

export interface EngineConfig {
  limits?: Partial<EngineLimits>;
  /**
   * Images processed at once. Throughput comes from about one image in flight per core, not from
   * more libvips threads per image; the rest wait their turn, which keeps memory flat under bursts.
   * Default: the number of cores.
   */
  concurrency?: number;
  /**
   * libvips worker threads per image (sharp.concurrency, process-wide). Default: left to sharp
   * (1 on glibc unless MALLOC_ARENA_MAX is set or jemalloc preloaded, else one per core).
   */
  threadsPerImage?: number;
  /**
   * Native memory, in bytes, the images in flight may be expected to hold together (estimated from
   * each image's header: pixels × what its encoder holds per pixel, AVIF and HEIC the dearest). An
   * image that does not fit waits in line, first in first out; one larger than the whole budget runs
   * alone. Default: DEFAULT_MEMORY_BUDGET.
   */
  memoryBudget?: number;
  /** Strategy for quality "auto". Default: the SSIMULACRA2 search of auto.ts (`createAutoEncoder()`). */
  auto?: AutoEncoder;
}

/**
 * 768 MiB of estimated job memory (memory-estimate.ts): two quality-"auto" photos of up to ~3.7
 * megapixels in JPEG or WebP (~2.9 in AVIF; 2048 × 1365: ≈ 290 MiB each) run side by side on a
 * 2-core machine, as do a 2048-px photo and a transparent 2048 × 1148 graphic in WebP auto
 * (≈ 445 MiB), and two such graphics (754 MiB together: they share the metric thread, see
 * estimateOptimizeClaim); a transparent 2048 × 1536 one (≈ 590 MiB) runs with small images only, two
 * 2048 × 2048 autos (≈ 430 MiB each) one at a time.
 * 256 MiB until 2026-11-28, when auto was counted at a third of what it holds. Chosen with the soak
 * benchmark (test/bench/soak.ts --large-auto, 600 requests): at 768 MiB the process peaked at 887 MiB
 * and served 3.71 requests a second, at 512 MiB 756 MiB and 2.99, at 256 MiB 738 MiB and 2.90; on the
 * default mix 441 and 449 MiB at 768 and 512 — see the server README, "Memory".
 */
export const DEFAULT_MEMORY_BUDGET = 768 * 1024 * 1024;

export interface EngineStats {
  active: number;
  waiting: number;
  concurrency: number;
  /**
   * Estimated bytes held by the images in flight (together: autos share the metric thread, see
   * ByteSemaphore's heldTogether), and asked for by those waiting (each on its own).
   */
  memoryInUse: number;
  memoryWaiting: number;
  memoryBudget: number;
  /** libvips threads per image (sharp.concurrency(), process-wide): 1 or the cores, see threadsPerImage. */
  threadsPerImage: number;
}

export interface Engine {
  readonly limits: EngineLimits;
  /** Compress one image. Options are validated here too, so raw input from anywhere is safe. */
  optimize(input: Uint8Array, options?: CompressOptionsInput | CompressOptions): Promise<OptimizeOutput>;
  inspect(input: Uint8Array): Promise<ImageInspection>;
  /**
   * Apply edit operations (parseInstruction's) in order, then compress the result like optimize():
   * a `format` or `quality` operation wins over the options. The result's input facts are the
   * original's; `applied` lists the pixel operations carried out.
   */
  edit(
    input: Uint8Array,
    operations: readonly EditOperation[],
    options?: CompressOptionsInput | CompressOptions,
  ): Promise<OptimizeOutput & { applied: EditOperation[] }>;
  /** Size, orientation, dominant colour and transparency, measured (for offline alt text). */
  facts(input: Uint8Array): Promise<ImageFacts>;
  stats(): EngineStats;
  /**
   * Wait for images in flight, then stop the HEIC decoder and metric worker threads. The pools are
   * shared by every engine in the process, so call it once, at shutdown. Idle pools never keep the
   * process alive, so short scripts need not call it.
   */
  close(): Promise<void>;
}

export function createEngine(config: EngineConfig = {}): Engine {
  const limits: EngineLimits = resolveLimits(config.limits);
  const gate = new ByteSemaphore(
    config.memoryBudget ?? DEFAULT_MEMORY_BUDGET,
    config.concurrency ?? availableParallelism(),
  );
  if (config.threadsPerImage !== undefined) sharp.concurrency(config.threadsPerImage);
  // No libvips operation cache: every input is a new buffer, so cached operations are never hit again,
  // yet each one pins its pixels until evicted (up to 64 MiB with sharp's defaults) — memory a server
  // holds at rest for nothing. Auto's repeated encodes reuse decoded pixels of their own. Measured with
  // the soak: 25 MiB less at rest, the same CPU a request (core/server/README.md, Memory).
  sharp.cache(false);
  const context = { limits, auto: config.auto ?? createAutoEncoder() };
  // Every call from the moment it is made: an image is estimated (an await on its header) before it
  // queues for the budget, and close() must wait for those too, not only for the ones admitted.
  const inFlight = new Set<Promise<unknown>>();
  const track = <T>(work: Promise<T>): Promise<T> => {
    inFlight.add(work);
    work.then(
      () => inFlight.delete(work),
      () => inFlight.delete(work),
    );
    return work;
  };
  return {
    limits,
    optimize(input, options) {
      return track(
        // async, so a bad option arrives as a rejection like every other failure, never a sync throw.
        (async () => {
          const parsed = parseCompressOptions(options ?? {});
          // Estimated from the header before admission; a non-buffer counts 0 and is refused inside.
          // Auto's metric part is shared with the other searches running (memory-estimate.ts).
          const claim = input instanceof Uint8Array ? await estimateOptimizeClaim(input, parsed, limits) : 0;
          return gate.run(claim, () => optimizeImage(input, parsed, context));
        })(),
      );
    },
    inspect(input) {
      return track(
        (async () => {
          const bytes = input instanceof Uint8Array ? estimateInspectBytes(input, limits) : 0;
          return gate.run(bytes, () => inspectImage(input, limits));
        })(),
      );
    },
    edit(input, operations, options) {
      return track(
        (async () => {
          const parsed = parseCompressOptions(options ?? {});
          // The decoded pixels plus the encode: about twice what compressing the input would hold.
          const bytes =
            input instanceof Uint8Array ? 2 * (await estimateOptimizeBytes(input, parsed, limits)) : 0;
          return gate.run(bytes, async () => {
            const edited = await applyEdits(input, operations, limits);
            const encodeOptions: CompressOptions = {
              ...parsed,
              ...(edited.format ? { output_format: edited.format } : {}),
              ...(edited.quality !== undefined ? { quality: edited.quality } : {}),
              // The input's format, not the PNG the pixels travel in, unless a format was named.
              output_format:
                edited.format ?? parsed.output_format ?? defaultOutputFormat(edited.input.format),
            };
            const out = await optimizeImage(edited.png, encodeOptions, context);
            const inputSize = edited.input.size;
            return {
              data: out.data,
              applied: edited.applied,
              info: {
                ...out.info,
                input_size: inputSize,
                input_format: edited.input.format,
                input_width: edited.input.width,
                input_height: edited.input.height,
                savings_percent: Math.round((1 - out.data.length / inputSize) * 1000) / 10,
                // An edit is a new image: never "returned unchanged".
                optimized: true,
                metadata_stripped: true,
              },
            };
          });
        })(),
      );
    },
    facts(input) {
      return track(
        (async () => {
          const bytes = input instanceof Uint8Array ? estimateInspectBytes(input, limits) : 0;
          return gate.run(bytes, () => measureFacts(input, limits));
        })(),
      );
    },
    stats() {
      return {
        active: gate.active,
        waiting: gate.waiting,
        concurrency: gate.maxHolders,
        memoryInUse: gate.inUse,
        memoryWaiting: gate.waitingBytes,
        memoryBudget: gate.budget,
        threadsPerImage: sharp.concurrency(),
      };
    },
    async close() {
      while (inFlight.size) await Promise.allSettled([...inFlight]);
      await Promise.all([closeHeicDecoder(), closeMetricPool()]);
    },
  };
}
