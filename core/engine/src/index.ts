export {
  AUTO_BELOW,
  AUTO_FLOOR,
  AUTO_MAX_Q,
  AUTO_MIN_Q,
  AUTO_SETTINGS,
  AUTO_TARGET,
  AUTO_TOLERANCE,
  createAutoEncoder,
  FLAT_CHECK,
  flatCheckApplies,
  fullChromaFirst,
  SAMPLED_FLOOR_MARGIN,
  SMALL_IMAGE_SIDE,
} from './auto.ts';
export { createBisectionAutoEncoder } from './auto-bisection.ts';
export { ByteSemaphore, heldTogether, type MemoryClaim } from './byte-semaphore.ts';
export { type AltTextContext, colorName, measureFacts, offlineAltText, wordsOfFileName } from './describe.ts';
export { type Detected, detectFormat } from './detect.ts';
export { applyEdits, type EditedPixels } from './edit/apply.ts';
export { normalizeInstruction, type ParsedInstruction, parseInstruction } from './edit/instruction.ts';
export {
  AVIF_EFFORT,
  applyEncoder,
  type ChromaSubsampling,
  type EncodeSettings,
  NEAR_LOSSLESS_LEVEL,
  WEBP_EFFORT,
} from './encode.ts';
export {
  createEngine,
  DEFAULT_MEMORY_BUDGET,
  type Engine,
  type EngineConfig,
  type EngineStats,
} from './engine.ts';
export { exifHasGps, stripMetadataLossless } from './exif.ts';
export { closeHeicDecoder, HEIC_CONCURRENCY, heicDecoderStats } from './heic.ts';
export { type ImageFeatures, isSynthetic, measureFeatures } from './image-features.ts';
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
export {
  type AutoEncoder,
  type EncodeVariant,
  type OptimizeOutput,
  PNG_TO_JPEG_MIN_SAVING,
  prepare,
} from './optimize.ts';
export { DEFAULT_SCALE_QUALITY, encoderQuality, scoreForQuality } from './quality.ts';
export { Semaphore } from './semaphore.ts';
export { openSource, type Source } from './source.ts';
