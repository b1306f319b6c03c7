/**
 * Prepared references a metric thread (worker.ts) keeps, most recently used last. A search scores
 * 2–7 candidates against one reference in a row, and a transparent image has two references (one per
 * background, compare.ts). Each holds ~35 float planes' worth (≈ 120 MB at 2048 × 1280). In WebAssembly
 * (simd.ts) the planes live in the module's memory, which grows to the thread's largest need and is
 * handed back only when the thread exits (after IDLE_TIMEOUT_MS idle, index.ts): SIMD_MAX_PIXELS
 * bounds that.
 *
 * The thread keeps KEEP_MIN references of any size (two searches of opaque images interleaved, as
 * always) and up to KEEP_MAX while their pixels together stay within KEEP_PIXELS. Until 2026-11-28
 * it kept two whatever their size: two transparent images searched side by side (four references)
 * evicted each other on every score, so each score prepared its reference again (two 256-px icons
 * into WebP: 18 preparations for their 16 scores, where 4 would do). More than two are kept only
 * while together they hold no more pixels than one 2048 × 2048 reference (four of 1024 × 1024): a
 * thread keeps a finished search's references until they are pushed out, and its memory never
 * shrinks, so a larger bound would keep a third 2048-px reference (~130 MB) after every run of large
 * autos. With this one, large images are kept exactly as before (two), and what the smaller ones
 * keep is less than two large references already take.
 */
export const KEEP_MIN = 2;
export const KEEP_MAX = 4;
export const KEEP_PIXELS = 2048 * 2048;
