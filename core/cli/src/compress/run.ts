import { readFile, stat } from 'node:fs/promises';
import { createEngine } from '@compresso/engine';
import {
  type CompressOptionsInput,
  CompressoError,
  type InfoResult,
  isCompressoError,
  isErrorCode,
} from '@compresso/schema';
import { MultiBar, Presets } from 'cli-progress';
import { type CliIO, EXIT_FAILED, EXIT_OK } from '../context.ts';
import { displayPath, type InputFile } from './inputs.ts';
import { canonicalPath, fromFsError, outputPathFor, writeAtomically } from './outputs.ts';
import { formatBytes, formatDuration, savedPercent } from './units.ts';

export interface CompressRun {
  files: InputFile[];
  options: CompressOptionsInput;
  /** Absolute. */
  outputDir?: string;
  overwrite: boolean;
  concurrency: number;
  json: boolean;
  quiet: boolean;
}

export interface FileResult extends InfoResult {
  file: string;
  output: string;
}

export interface FileError {
  file: string;
  code: string;
  message: string;
}

export interface CompressReport {
  results: FileResult[];
  errors: FileError[];
  totals: {
    files: number;
    done: number;
    failed: number;
    input_bytes: number;
    output_bytes: number;
    saved_bytes: number;
    savings_percent: number;
    seconds: number;
  };
}

function toCompressoError(error: unknown): CompressoError {
  if (isCompressoError(error)) return error;
  // Another copy of the schema package (or a serialised error) still carries a known code.
  const maybe = error as { code?: unknown; message?: unknown } | undefined;
  if (maybe && isErrorCode(maybe.code) && typeof maybe.message === 'string') {
    return new CompressoError(maybe.code, maybe.message, { cause: error });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new CompressoError('INTERNAL_ERROR', message, { cause: error });
}

/** Engine messages name the request field ("file: …"); on a command line the path says which file. */
function humanMessage(message: string): string {
  return message.replace(/^file: /, '');
}

/**
 * Compress every file with a bounded pool: `concurrency` workers pull the next path from the list, so
 * at most that many images (their bytes and their outputs) are in memory at any moment.
 */
export async function compressFiles(run: CompressRun, io: CliIO): Promise<number> {
  const started = performance.now();
  const engine = createEngine({ concurrency: run.concurrency });
  const inputPaths = new Set(run.files.map((f) => f.path));
  const claimed = new Map<string, string>();
  const results: (FileResult | undefined)[] = new Array(run.files.length);
  const errors: (FileError | undefined)[] = new Array(run.files.length);
  const show = (path: string) => displayPath(path, io.cwd);

  const useBar = Boolean(io.stderr.isTTY) && !run.json && !run.quiet;
  const multibar = useBar
    ? new MultiBar(
        {
          stream: io.stderr as NodeJS.WritableStream,
          format: ' {bar} {value}/{total} | {percentage}% | ETA {eta_formatted} | {file}',
          hideCursor: true,
          clearOnComplete: true,
          etaBuffer: 20,
        },
        Presets.shades_classic,
      )
    : undefined;
  const bar = multibar?.create(run.files.length, 0, { file: '' });
  const lineOut = !useBar && !run.json && !run.quiet;

  const fail = (index: number, error: unknown) => {
    const failure = toCompressoError(error);
    const file = run.files[index]!.path;
    errors[index] = { file, code: failure.code, message: failure.message };
    const line = `error: ${show(file)}: ${failure.code}: ${humanMessage(failure.message)}\n`;
    if (multibar) multibar.log(line);
    else io.stderr.write(line);
  };

  const processOne = async (index: number) => {
    const input = run.files[index]!;
    const size = await stat(input.path).then(
      (s) => s.size,
      (error) => {
        throw fromFsError(error, 'read', input.path);
      },
    );
    // Refuse before reading: a stray multi-gigabyte file must not be pulled into memory first.
    if (size > engine.limits.maxInputBytes) {
      throw new CompressoError(
        'FILE_TOO_LARGE',
        `the file is ${formatBytes(size)}; at most ${formatBytes(engine.limits.maxInputBytes)} is accepted`,
      );
    }
    const bytes = await readFile(input.path).catch((error) => {
      throw fromFsError(error, 'read', input.path);
    });
    const { data, info } = await engine.optimize(bytes, run.options);
    const target = await canonicalPath(
      outputPathFor(input, info.output_format, info.output_format === info.input_format, run),
    );
    if (target === input.path && !(run.overwrite && info.output_format === info.input_format)) {
      throw new CompressoError(
        'CONFLICT',
        `the output would replace the input itself; pass --overwrite or choose another --output-dir`,
      );
    }
    if (target !== input.path && inputPaths.has(target)) {
      throw new CompressoError(
        'CONFLICT',
        `the output ${show(target)} is another input of this run and is never replaced`,
      );
    }
    const owner = claimed.get(target);
    if (owner !== undefined) {
      throw new CompressoError(
        'CONFLICT',
        `the output ${show(target)} is already the output of ${show(owner)}`,
      );
    }
    claimed.set(target, input.path);
    // An input the engine could not improve is left untouched rather than rewritten with its own bytes.
    if (!(target === input.path && !info.optimized)) {
      await writeAtomically(target, data).catch((error) => {
        throw fromFsError(error, 'write', target);
      });
    }
    results[index] = { file: input.path, output: target, ...info };
    if (lineOut) {
      const saved = savedPercent(info.input_size, info.output_size);
      const note = !info.optimized ? '(already optimal)' : saved >= 0 ? `-${saved}%` : `+${-saved}%`;
      io.stdout.write(
        `${show(input.path)} → ${show(target)}  ${formatBytes(info.input_size)} → ${formatBytes(info.output_size)}  ${note}\n`,
      );
    }
  };

  let next = 0;
  const worker = async () => {
    while (next < run.files.length) {
      const index = next++;
      try {
        await processOne(index);
      } catch (error) {
        fail(index, error);
      }
      bar?.increment(1, { file: show(run.files[index]!.path) });
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(run.concurrency, run.files.length) }, worker));
  } finally {
    multibar?.stop();
  }

  const done = results.filter((r): r is FileResult => r !== undefined);
  const failed = errors.filter((e): e is FileError => e !== undefined);
  const inputBytes = done.reduce((sum, r) => sum + r.input_size, 0);
  const outputBytes = done.reduce((sum, r) => sum + r.output_size, 0);
  const seconds = (performance.now() - started) / 1000;
  const report: CompressReport = {
    results: done,
    errors: failed,
    totals: {
      files: run.files.length,
      done: done.length,
      failed: failed.length,
      input_bytes: inputBytes,
      output_bytes: outputBytes,
      saved_bytes: inputBytes - outputBytes,
      savings_percent: savedPercent(inputBytes, outputBytes),
      seconds: Math.round(seconds * 1000) / 1000,
    },
  };
  if (run.json) {
    io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else if (!run.quiet) {
    const failedPart = failed.length > 0 ? `, ${failed.length} failed` : '';
    io.stdout.write(
      `${done.length} of ${run.files.length} compressed${failedPart}: ${formatBytes(inputBytes)} → ${formatBytes(outputBytes)}, saved ${report.totals.savings_percent}% in ${formatDuration(seconds)}\n`,
    );
  }
  return failed.length > 0 ? EXIT_FAILED : EXIT_OK;
}
