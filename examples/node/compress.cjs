#!/usr/bin/env node
// Compress one image with the Node client (CommonJS; Node 16 or later).
//
//   COMPRESSO_API_KEY=cmp_live_… node compress.cjs photo.jpg photo.webp webp 75
//
// Arguments: input, output, then optional output format (default webp) and quality (1-100 or auto,
// default 80). COMPRESSO_BASE_URL defaults to a local `npm start` server.
const { Compresso, CompressoError } = require('@compresso/client');

const [input, output, format = 'webp', quality = '80'] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node compress.cjs <input> <output> [format] [quality]');
  process.exit(2);
}

const client = new Compresso();
client
  .compress(input, { output, format, quality: quality === 'auto' ? 'auto' : Number(quality) })
  .then((result) => {
    console.log(
      `${input} -> ${result.outputPath} (${result.inputSize} -> ${result.outputSize} bytes, -${result.savingsPercent}%, ${result.width}x${result.height})`,
    );
  })
  .catch((error) => {
    // The server's stable code (INVALID_API_KEY, NOT_AN_IMAGE, QUOTA_EXCEEDED, …) and its message.
    console.error(error instanceof CompressoError ? `${error.code}: ${error.message}` : error);
    process.exit(1);
  });
