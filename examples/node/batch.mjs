#!/usr/bin/env node
// Compress many images with the Node client (ES module; Node 16 or later).
//
//   COMPRESSO_API_KEY=cmp_live_… node batch.mjs optimized/ photos/*.jpg
//
// Writes <name>.webp for each image into the output folder, two at a time, with progress on stderr.
// One bad file does not stop the others: it is reported with its error code, and the exit code is 1.
import { Compresso } from '@compresso/client';

const [outputDir, ...inputs] = process.argv.slice(2);
if (!outputDir || inputs.length === 0) {
  console.error('usage: node batch.mjs <output dir> <image>...');
  process.exit(2);
}

const client = new Compresso();
const items = await client.compressBatch(inputs, {
  outputDir,
  format: 'webp',
  concurrency: 2,
  onProgress: ({ completed, total }) => console.error(`${completed}/${total}`),
});
for (const item of items) {
  if (item.ok) console.log(`${item.input} -> ${item.result.outputPath} (-${item.result.savingsPercent}%)`);
  else console.log(`${item.input} FAILED ${item.error.code}: ${item.error.message}`);
}
process.exitCode = items.every((item) => item.ok) ? 0 : 1;
