/**
 * Quality "auto" on every image of the corpus but the photos (or the kinds given), fitted into
 * several sizes (PNG copies made by sharp, never enlarged), in one format: one JSON line per image
 * and size with the bytes, quality, score, steps and chroma auto wrote. Run it with two engines (this checkout's, and another's with
 * --engine, e.g. a git worktree sharing this node_modules) to compare a change to auto's settings
 * image by image; the 4:2:0 second opinion for JPEG tried on 2026-11-28 was measured this way
 * (results/auto-sizes-jpeg-30e1e96.jsonl and -second-opinion.jsonl).
 *
 * Usage: node test/bench/auto-sizes.ts [--format jpeg|webp|avif] [--sizes 2048,1024,512,256]
 *        [--kinds photo,screenshot,…] [--engine PATH/core/engine/src/index.ts] [--out FILE]
 * (--kinds: default every kind but photo)
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { DEFAULT_CORPUS, loadCorpus } from './corpus.ts';

const { values } = parseArgs({
  options: {
    format: { type: 'string' },
    sizes: { type: 'string' },
    engine: { type: 'string' },
    kinds: { type: 'string' },
    out: { type: 'string' },
  },
});
const format = (values.format ?? 'jpeg') as 'jpeg' | 'webp' | 'avif';
const sizes = (values.sizes ?? '2048,1024,512,256').split(',').map(Number);
const kinds = values.kinds?.split(',');
const module: typeof import('@compresso/engine') = values.engine
  ? await import(resolve(values.engine))
  : await import('@compresso/engine');

const engine = module.createEngine({ concurrency: 1 });
const lines: string[] = [];
// HEVC HEIC is left out: sharp cannot decode it to make the resized copies.
const chosen = (await loadCorpus(DEFAULT_CORPUS)).filter(
  (i) => !i.heic && (kinds ? kinds.includes(i.kind) : i.kind !== 'photo'),
);
for (const image of chosen) {
  for (const size of sizes) {
    const input = await sharp(image.bytes)
      .resize(size, size, { fit: 'inside', withoutEnlargement: true })
      .png()
      .toBuffer();
    const { width, height } = await sharp(input).metadata();
    // Each size once: an image smaller than several sizes is measured at the first of them only.
    if (Math.max(width, height) < size && size !== sizes[0]) continue;
    const { data, info } = await engine.optimize(input, { output_format: format, quality: 'auto' });
    const line = JSON.stringify({
      name: image.name,
      size,
      width,
      height,
      bytes: data.length,
      quality: info.quality,
      score: info.score,
      steps: info.auto_steps,
      chroma: info.chroma_subsampling ?? null,
      lossless: info.lossless ?? null,
    });
    console.log(line);
    lines.push(line);
  }
}
await engine.close();
await module.closeMetricPool();
if (values.out) writeFileSync(values.out, `${lines.join('\n')}\n`);
