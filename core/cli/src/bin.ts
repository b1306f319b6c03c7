#!/usr/bin/env node
import { run } from './program.ts';

// exitCode rather than process.exit(): pending output on piped stdout is flushed before Node exits.
process.exitCode = await run(process.argv.slice(2));
