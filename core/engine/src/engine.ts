import { availableParallelism } from 'node:os';
import {
  type CompressOptions,
  type CompressOptionsInput,
  type ImageInspection,
  parseCompressOptions,
} from '@compresso/schema';
import sharp from 'sharp';
import { createAutoEncoder } from './auto.ts';
import { closeHeicDecoder } from './heic.ts';
import { inspectImage } from './inspect.ts';
import { type EngineLimits, resolveLimits } from './limits.ts';
import { closeMetricPool } from './metric/index.ts';
import { type AutoEncoder, type OptimizeOutput, optimizeImage } from './optimize.ts';
import { Semaphore } from './semaphore.ts';

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
   * (1 on glibc without jemalloc unless MALLOC_ARENA_MAX is set, else one per core).
   */
  threadsPerImage?: number;
  /** Strategy for quality "auto". Default: the SSIMULACRA2 search of auto.ts (`createAutoEncoder()`). */
  auto?: AutoEncoder;
}

export interface EngineStats {
  active: number;
  waiting: number;
  concurrency: number;
  /** libvips threads per image (sharp.concurrency(), process-wide): 1 or the cores, see threadsPerImage. */
  threadsPerImage: number;
}

export interface Engine {
  readonly limits: EngineLimits;
  /** Compress one image. Options are validated here too, so raw input from anywhere is safe. */
  optimize(input: Uint8Array, options?: CompressOptionsInput | CompressOptions): Promise<OptimizeOutput>;
  inspect(input: Uint8Array): Promise<ImageInspection>;
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
  const gate = new Semaphore(config.concurrency ?? availableParallelism());
  if (config.threadsPerImage !== undefined) sharp.concurrency(config.threadsPerImage);
  // libvips keeps recently used operations; files: 0 because inputs are buffers, and an fd cache
  // only holds descriptors open.
  sharp.cache({ memory: 64, files: 0, items: 100 });
  const context = { limits, auto: config.auto ?? createAutoEncoder() };
  return {
    limits,
    // async, so a bad option arrives as a rejection like every other failure, never a sync throw.
    async optimize(input, options) {
      const parsed = parseCompressOptions(options ?? {});
      return gate.run(() => optimizeImage(input, parsed, context));
    },
    inspect(input) {
      return gate.run(() => inspectImage(input, limits));
    },
    stats() {
      return {
        active: gate.active,
        waiting: gate.waiting,
        concurrency: gate.limit,
        threadsPerImage: sharp.concurrency(),
      };
    },
    async close() {
      // Taking every slot means every image already admitted has finished.
      await Promise.all(Array.from({ length: gate.limit }, () => gate.run(async () => {})));
      await Promise.all([closeHeicDecoder(), closeMetricPool()]);
    },
  };
}
