import { CompressoError } from '@compresso/schema';

/**
 * Limits against hostile or accidental input. Each one is checked before the expensive step it
 * protects: bytes before parsing, pixels and frames from the header before decoding, time during.
 */
export interface EngineLimits {
  /** Largest input accepted, in bytes. */
  maxInputBytes: number;
  /**
   * Largest frame, in pixels (width × height). 64 MP covers 48–50 MP phone sensors; a decoded RGBA
   * frame of that size is 256 MB, so this bounds the worst single decode.
   */
  maxPixels: number;
  /** Most frames in an animation. */
  maxFrames: number;
  /** Most pixels over all frames of an animation (frames × width × height). */
  maxTotalPixels: number;
  /**
   * Longest time one pipeline (a decode, or one encode) may take, in seconds. Whole seconds for
   * sharp's own timeout (fractions round up there); the wall-clock guard and the HEIC worker use it
   * exactly.
   */
  timeoutSeconds: number;
}

export const DEFAULT_LIMITS: EngineLimits = Object.freeze({
  maxInputBytes: 50 * 1024 * 1024,
  maxPixels: 64_000_000,
  maxFrames: 500,
  maxTotalPixels: 256_000_000,
  timeoutSeconds: 60,
});

/**
 * Race `work` against the pipeline time limit. sharp's own `.timeout()` stops libvips between
 * regions while pixels are being computed, but not inside an encoder that has already taken the whole
 * image (AVIF/HEIF, which can run for seconds on a large frame): this bounds what the caller waits
 * for. The encoder then finishes in the background on the libuv pool; its result is dropped.
 */
export async function withTimeLimit<T>(work: Promise<T>, seconds: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(
        new CompressoError(
          'PROCESSING_TIMEOUT',
          `file: processing the image took longer than the limit of ${seconds} s.`,
          { details: { limit_seconds: seconds } },
        ),
      );
    }, seconds * 1000);
    // The limit must never be what keeps a process alive.
    timer.unref();
  });
  // A late failure of the abandoned work must not surface as an unhandled rejection.
  work.catch(() => {});
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

const INTEGER_LIMITS = ['maxInputBytes', 'maxPixels', 'maxFrames', 'maxTotalPixels'] as const;

/**
 * The engine's limits: the defaults overridden by `overrides`, every field checked. A bad limit is a
 * configuration mistake, so it fails when the engine is created, with one message naming every
 * problem — not later, as a confusing refusal of a good image.
 */
export function resolveLimits(overrides: Partial<EngineLimits> = {}): EngineLimits {
  const problems: string[] = [];
  const known = new Set<string>([...INTEGER_LIMITS, 'timeoutSeconds']);
  for (const key of Object.keys(overrides)) {
    if (!known.has(key)) problems.push(`${key}: not a limit (known: ${[...known].join(', ')})`);
  }
  const limits = { ...DEFAULT_LIMITS, ...overrides };
  for (const key of INTEGER_LIMITS) {
    const value = limits[key];
    if (!Number.isSafeInteger(value) || value < 1) {
      problems.push(`${key}: expected a positive integer, received ${String(value)}`);
    }
  }
  const { timeoutSeconds } = limits;
  // sharp accepts at most an hour.
  if (typeof timeoutSeconds !== 'number' || !(timeoutSeconds > 0 && timeoutSeconds <= 3600)) {
    problems.push(
      `timeoutSeconds: expected a number of seconds above 0 and at most 3600, received ${String(timeoutSeconds)}`,
    );
  }
  if (problems.length) throw new RangeError(`Invalid engine limits — ${problems.join('; ')}`);
  return Object.freeze(limits);
}
