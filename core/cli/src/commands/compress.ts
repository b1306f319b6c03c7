import { open, stat } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { createEngine, PNG_TO_JPEG_MIN_SAVING } from '@compresso/engine';
import {
  type CompressOptions,
  type CompressOptionsInput,
  CompressoError,
  DEFAULT_QUALITY,
  type FieldProblem,
  isCompressoError,
  MAX_DIMENSION_LIMIT,
  OUTPUT_FORMATS,
  parseCompressOptions,
  statusOf,
} from '@compresso/schema';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { contextOf } from '../context.ts';
import { displayPath, type ExpandOptions, expandInputs, type InputFile } from '../inputs.ts';
import {
  canonicalOutput,
  OutputGuard,
  type OutputRules,
  outputPathOf,
  predictedFormat,
  writeFileAtomic,
} from '../outputs.ts';
import {
  createReporter,
  type FileFailure,
  type FileResult,
  type RunReport,
  savingsPercent,
} from '../report.ts';
import { EXIT_FAILURES, EXIT_OK, UsageError } from '../usage-error.ts';

export const MAX_CONCURRENCY = 64;

interface CompressFlags {
  outputDir?: string;
  format?: CompressOptions['output_format'];
  quality?: CompressOptions['quality'];
  maxDimension?: number;
  keepExif?: boolean;
  pngToJpeg?: boolean;
  json?: boolean;
  overwrite?: boolean;
  concurrency?: number;
  recursive: boolean;
  quiet?: boolean;
}

/**
 * Each flag is checked by the schema's own field parser, so the CLI accepts exactly what the API
 * accepts and says what was expected in the same words.
 */
function schemaField<K extends keyof CompressOptionsInput>(field: K) {
  return (value: string) => {
    try {
      return parseCompressOptions({ [field]: value })[field as keyof CompressOptions];
    } catch (error) {
      if (!isCompressoError(error)) throw error;
      const problem = (error.details as FieldProblem[] | undefined)?.[0];
      throw new InvalidArgumentError(`Expected ${problem?.expected ?? error.message}.`);
    }
  };
}

function parseConcurrency(value: string): number {
  const n = Number(value);
  if (!/^\s*\d+\s*$/.test(value) || n < 1 || n > MAX_CONCURRENCY) {
    throw new InvalidArgumentError(`Expected an integer from 1 to ${MAX_CONCURRENCY}.`);
  }
  return n;
}

/** Engine messages name the HTTP field ("file: …"); here the file is named by the caller. */
function withoutFieldPrefix(message: string): string {
  return message.replace(/^file: /, '');
}

function toFailure(input: InputFile, error: unknown): FileFailure {
  if (isCompressoError(error)) {
    return {
      input: input.display,
      code: error.code,
      status: error.status,
      message: withoutFieldPrefix(error.message),
    };
  }
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const message = error instanceof Error ? error.message : String(error);
  if (code === 'ENOENT') return failure(input, 'NOT_FOUND', 'the file no longer exists.');
  if (code === 'EACCES' || code === 'EPERM')
    return failure(input, 'FORBIDDEN', `permission denied (${message}).`);
  return failure(input, 'INTERNAL_ERROR', message);
}

function failure(input: InputFile, code: FileFailure['code'], message: string): FileFailure {
  return { input: input.display, code, status: statusOf(code), message };
}

/** Run `task` over `items` with at most `limit` in flight, taking the next item as each one ends. */
async function forEachBounded<T>(
  items: readonly T[],
  limit: number,
  task: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      await task(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

async function compressAction(inputs: string[], flags: CompressFlags, command: Command): Promise<void> {
  const context = contextOf(command);
  const { io } = context;
  const started = performance.now();

  const raw: CompressOptionsInput = { strip_exif: !flags.keepExif, png_to_jpeg: flags.pngToJpeg === true };
  if (flags.quality !== undefined) raw.quality = flags.quality;
  if (flags.format !== undefined) raw.output_format = flags.format;
  if (flags.maxDimension !== undefined) raw.max_dimension = flags.maxDimension;
  const options = parseCompressOptions(raw);
  if (flags.pngToJpeg && flags.format && !flags.json && !flags.quiet) {
    io.stderr.write(`compresso: warning: --png-to-jpeg has no effect with --format ${flags.format}\n`);
  }

  const outputDir = flags.outputDir === undefined ? undefined : resolve(io.cwd, flags.outputDir);
  if (outputDir) {
    const info = await stat(outputDir).catch(() => undefined);
    if (info && !info.isDirectory()) {
      throw new UsageError(`--output-dir ${flags.outputDir} exists and is not a folder.`);
    }
  }
  const rules: OutputRules = { overwrite: flags.overwrite === true, ...(outputDir ? { outputDir } : {}) };
  const expandOptions: ExpandOptions = {
    cwd: io.cwd,
    recursive: flags.recursive,
    skipMinified: !outputDir && !flags.overwrite,
    ...(outputDir ? { outputDir } : {}),
  };
  const expansion = await expandInputs(inputs, expandOptions);
  if (expansion.files.length === 0) {
    const parts = [
      ...expansion.missing.map((a) => `${a} (not found)`),
      ...expansion.empty.map((a) => `${a} (no images)`),
    ];
    throw new UsageError(`no input files matched: ${parts.join(', ')}.`);
  }
  if (!flags.json && !flags.quiet) {
    for (const arg of expansion.empty) io.stderr.write(`compresso: warning: no image files in ${arg}\n`);
  }

  const files = expansion.files;
  const concurrency = flags.concurrency ?? availableParallelism();
  const engine = createEngine({ concurrency });
  const guard = new OutputGuard(files, rules.overwrite);
  const reporter = createReporter(io, {
    json: flags.json === true,
    quiet: flags.quiet === true,
    total: files.length + expansion.missing.length,
  });
  const results: (FileResult | undefined)[] = [];
  const failures: (FileFailure | undefined)[] = [];

  const missingFailures = expansion.missing.map((arg) => {
    const f: FileFailure = {
      input: arg,
      code: 'NOT_FOUND',
      status: statusOf('NOT_FOUND'),
      message: 'no such file, folder or glob match.',
    };
    reporter.failed(f);
    return f;
  });

  // Outputs whose name is known from the input's name are claimed up front, in argument order.
  const predicted = await Promise.all(
    files.map(async (file) => {
      const format = predictedFormat(file, options.output_format);
      if (!format) return undefined;
      const path = outputPathOf(file, format, rules);
      const real = await canonicalOutput(path);
      try {
        guard.claim(file, real, displayPath(io.cwd, path));
        return { real, error: undefined };
      } catch (error) {
        return { real, error };
      }
    }),
  );

  await forEachBounded(files, concurrency, async (file, index) => {
    try {
      const early = predicted[index];
      if (early?.error) throw early.error;
      const handle = await open(file.path, 'r');
      let bytes: Buffer;
      try {
        const info = await handle.stat();
        if (!info.isFile()) throw new CompressoError('INVALID_REQUEST', 'not a regular file.');
        // Checked before reading, so a huge file is refused without being loaded.
        if (info.size > engine.limits.maxInputBytes) {
          throw new CompressoError(
            'FILE_TOO_LARGE',
            `${info.size.toLocaleString('en')} bytes is over the limit of ${engine.limits.maxInputBytes.toLocaleString('en')} bytes.`,
          );
        }
        bytes = await handle.readFile();
      } finally {
        await handle.close();
      }
      const { data, info } = await engine.optimize(bytes, options);
      const output = outputPathOf(file, info.output_format, rules);
      const real = await canonicalOutput(output);
      if (real !== early?.real) {
        // The engine chose another format than the name suggested (png-to-jpeg, a mislabelled file).
        if (early) guard.release(file, early.real);
        guard.claim(file, real, displayPath(io.cwd, output));
      }
      const inPlace = real === file.real;
      const written = !(inPlace && !info.optimized);
      if (written) {
        const mode = inPlace ? (await stat(file.path)).mode : undefined;
        await writeFileAtomic(output, data, mode);
      }
      const result: FileResult = {
        input: file.display,
        output: displayPath(io.cwd, output),
        written,
        ...info,
      };
      results[index] = result;
      reporter.done(result);
    } catch (error) {
      const f = toFailure(file, error);
      failures[index] = f;
      reporter.failed(f);
    }
  });

  const done = results.filter((r): r is FileResult => r !== undefined);
  const errors = [...missingFailures, ...failures.filter((f): f is FileFailure => f !== undefined)];
  const inputSize = done.reduce((sum, r) => sum + r.input_size, 0);
  const outputSize = done.reduce((sum, r) => sum + r.output_size, 0);
  const report: RunReport = {
    files: done,
    errors,
    totals: {
      files: done.length + errors.length,
      succeeded: done.length,
      failed: errors.length,
      skipped: expansion.skipped,
      input_size: inputSize,
      output_size: outputSize,
      savings_percent: savingsPercent(inputSize, outputSize),
      duration_ms: Math.round(performance.now() - started),
    },
  };
  reporter.finish(report);
  context.exitCode = Math.max(context.exitCode, errors.length ? EXIT_FAILURES : EXIT_OK);
}

const HELP_AFTER = `
Output files:
  -o DIR           DIR/NAME.EXT; files found in folder and glob arguments keep their
                   sub-folders below the folder (or below the glob's fixed leading folders).
  no -o            beside each input as NAME.min.EXT (photo.jpg -> photo.min.jpg).
  --overwrite      beside each input as NAME.EXT: the input itself is replaced when the
                   format is unchanged; with a new format the input is kept.
  EXT is the output format's extension (jpg, png, webp, avif, gif); an unchanged format keeps
  the input's own extension (.jpeg stays .jpeg). An input is never written over without
  --overwrite, and never by another input's output. Existing files that are not inputs are replaced.
  Folders are searched for .jpg .jpeg .png .webp .avif .gif .tif .tiff .heic .heif files (hidden
  files and folders are passed over, and NAME.min.EXT files too when writing beside the inputs).
  Other files in folders are skipped quietly; a file named as an argument is always tried.

Exit status:
  0  every file was compressed
  1  at least one file failed (each failure is reported on stderr with its code)
  2  usage error: a bad option value, or no input files matched

Examples:
  compresso compress photo.jpg                      writes photo.min.jpg
  compresso compress photos -o dist -f webp -q 75   photos/a/b.png -> dist/a/b.webp
  compresso compress "shots/**/*.png" --png-to-jpeg --max-dimension 2048 -o out
  compresso compress . --overwrite --quiet          recompress every image here, in place
  compresso compress *.heic -f avif --json > report.json
`;

export function register(program: Command): void {
  program
    .command('compress')
    .summary('compress images locally (files, folders or glob patterns)')
    .description(
      'Compress images on this machine with the Compresso engine (sharp/libvips): JPEG, PNG, WebP, AVIF, GIF, TIFF and HEIC in; JPEG, PNG, WebP, AVIF or GIF out. No account or network needed.',
    )
    .argument(
      '<inputs...>',
      'image files, folders (searched recursively) or glob patterns (quote them: "img/**/*.png")',
    )
    .option(
      '-o, --output-dir <dir>',
      'write outputs into DIR (created if missing) (default: beside each input, as NAME.min.EXT)',
    )
    .addOption(
      new Option(
        '-f, --format <format>',
        `output format: ${OUTPUT_FORMATS.join(', ')} ("jpg" means jpeg) (default: the input's format; HEIC/HEIF and TIFF become jpeg)`,
      ).argParser(schemaField('output_format')),
    )
    .addOption(
      new Option(
        '-q, --quality <n|auto>',
        `visual quality on one scale for every format: an integer from 1 to 100, or "auto" for the smallest file that stays at the perceptual target (default: ${DEFAULT_QUALITY})`,
      ).argParser(schemaField('quality')),
    )
    .addOption(
      new Option(
        '--max-dimension <px>',
        `fit each image inside a PX×PX square, keeping its aspect ratio and never enlarging; 1 to ${MAX_DIMENSION_LIMIT} (default: keep the size)`,
      ).argParser(schemaField('max_dimension')),
    )
    .option(
      '--keep-exif',
      'keep EXIF, XMP and IPTC metadata (default: removed, GPS included, after applying the orientation)',
    )
    .option(
      '--png-to-jpeg',
      `write an opaque PNG as JPEG when that is at least ${Math.round(PNG_TO_JPEG_MIN_SAVING * 100)}% smaller than the best PNG; transparent PNGs stay PNG; ignored with --format (default: off)`,
    )
    .option(
      '--overwrite',
      'replace each input in place when its format is unchanged (default: inputs are never written over)',
    )
    .option(
      '--no-recursive',
      'take only the files directly inside folder arguments (default: search sub-folders too)',
    )
    .addOption(
      new Option(
        '--concurrency <n>',
        `images compressed at once, 1 to ${MAX_CONCURRENCY}; files are read one at a time as each slot frees (default: one per CPU core, here ${availableParallelism()})`,
      ).argParser(parseConcurrency),
    )
    .option(
      '--json',
      'print one JSON document on stdout: per-file results, per-file errors and totals (no progress, no text)',
    )
    .option('--quiet', 'print nothing but failures (no progress bar, per-file lines or summary)')
    .addHelpText('after', HELP_AFTER)
    .action(compressAction);
}
