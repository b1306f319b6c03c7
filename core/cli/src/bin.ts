#!/usr/bin/env node
import { rmSync } from 'node:fs';
import { pendingWrites } from './outputs.ts';
import { run } from './program.ts';

// Ctrl-C mid-run: remove half-written temporary files (originals are only ever replaced by rename).
process.once('SIGINT', () => {
  for (const temp of pendingWrites) rmSync(temp, { force: true });
  // The progress bar hides the cursor; give it back.
  if (process.stderr.isTTY) process.stderr.write('\x1b[?25h');
  process.stderr.write('\ncompresso: interrupted\n');
  process.exit(130);
});

process.exitCode = await run(process.argv.slice(2));
