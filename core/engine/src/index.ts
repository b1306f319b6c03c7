export {
  AUTO_FLOOR,
  AUTO_MAX_Q,
  AUTO_MIN_Q,
  AUTO_SETTINGS,
  AUTO_TARGET,
  createAutoEncoder,
} from './auto.ts';
export { ByteSemaphore } from './byte-semaphore.ts';
export { type Detected, detectFormat } from './detect.ts';
export { AVIF_EFFORT, applyEncoder, type EncodeSettings, WEBP_EFFORT } from './encode.ts';
export {
  createEngine,
  DEFAULT_MEMORY_BUDGET,
  type Engine,
  type EngineConfig,
  type EngineStats,
} from './engine.ts';
export { exifHasGps, stripMetadataLossless } from './exif.ts';
export { closeHeicDecoder, HEIC_CONCURRENCY, heicDecoderStats } from './heic.ts';
export { DEFAULT_LIMITS, type EngineLimits, resolveLimits, withTimeLimit } from './limits.ts';
export {
  ALPHA_BACKGROUNDS,
  closeMetricPool,
  type DecodeToRgbOptions,
  decodeToRgb,
  METRIC_THREADS,
  type RgbImage,
  scoreAsync,
  ssimulacra2,
} from './metric/index.ts';
export { type AutoEncoder, type OptimizeOutput, PNG_TO_JPEG_MIN_SAVING, prepare } from './optimize.ts';
export { DEFAULT_SCALE_QUALITY, encoderQuality, scoreForQuality } from './quality.ts';
export { Semaphore } from './semaphore.ts';
export { openSource, type Source } from './source.ts';
