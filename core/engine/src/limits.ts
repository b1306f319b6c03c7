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
  /** Longest time one sharp pipeline may run, in seconds. */
  timeoutSeconds: number;
}

export const DEFAULT_LIMITS: EngineLimits = Object.freeze({
  maxInputBytes: 50 * 1024 * 1024,
  maxPixels: 64_000_000,
  maxFrames: 500,
  maxTotalPixels: 256_000_000,
  timeoutSeconds: 60,
});
