import type { ErrorCode, InfoResult } from '@compresso/schema';
import cliProgress from 'cli-progress';
import type { CliIo } from './io.ts';

export interface FileResult extends InfoResult {
  input: string;
  output: string;
  /** False when nothing had to be written (already optimal, replaced in place by itself). */
  written: boolean;
}

export interface FileFailure {
  input: string;
  code: ErrorCode;
  status: number;
  message: string;
}

export interface Totals {
  /** Files attempted: succeeded + failed. */
  files: number;
  succeeded: number;
  failed: number;
  /** Files passed over in folders and globs (not images by name, hidden, earlier outputs). */
  skipped: number;
  /** Bytes of the inputs that succeeded, and of their outputs. */
  input_size: number;
  output_size: number;
  savings_percent: number;
  duration_ms: number;
}

export interface RunReport {
  files: FileResult[];
  errors: FileFailure[];
  totals: Totals;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let value = bytes / 1000;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.round((ms % 60_000) / 1000);
  return `${minutes} min ${String(seconds).padStart(2, '0')} s`;
}

export function savingsPercent(before: number, after: number): number {
  return before > 0 ? Math.round((1 - after / before) * 1000) / 10 : 0;
}

export function summaryLine(totals: Totals): string {
  const parts = [`${totals.succeeded} ${totals.succeeded === 1 ? 'file' : 'files'} compressed`];
  if (totals.failed) parts.push(`${totals.failed} failed`);
  if (totals.skipped) parts.push(`${totals.skipped} skipped`);
  const time = `in ${formatDuration(totals.duration_ms)}`;
  if (totals.succeeded === 0) return `${parts.join(', ')} ${time}`;
  const saved = totals.input_size - totals.output_size;
  return (
    `${parts.join(', ')}: ${formatBytes(totals.input_size)} → ${formatBytes(totals.output_size)}, ` +
    `saved ${totals.savings_percent}% (${saved >= 0 ? formatBytes(saved) : `-${formatBytes(-saved)}`}) ${time}`
  );
}

export function resultLine(result: FileResult): string {
  const sizes = `${formatBytes(result.input_size)} → ${formatBytes(result.output_size)}`;
  const note = result.optimized
    ? `${result.savings_percent >= 0 ? '-' : '+'}${Math.abs(result.savings_percent)}%`
    : result.written
      ? 'already optimal, copied unchanged'
      : 'already optimal, left as is';
  return `${result.input} → ${result.output}  ${sizes}  ${note}`;
}

export function failureLine(failure: FileFailure): string {
  return `compresso: ${failure.input}: ${failure.code}: ${failure.message}`;
}

export interface ReporterOptions {
  json: boolean;
  quiet: boolean;
  total: number;
}

/** Where a run tells what happens: progress, per-file lines, failures and the closing summary or JSON. */
export interface Reporter {
  done(result: FileResult): void;
  failed(failure: FileFailure): void;
  finish(report: RunReport): void;
}

/**
 * A progress bar is drawn only for a person at a terminal (stderr is a TTY) and only when there is
 * more than one file; otherwise each file gets one line, so logs and pipes stay readable.
 */
export function createReporter(io: CliIo, options: ReporterOptions): Reporter {
  const useBar = !options.json && !options.quiet && io.stderr.isTTY === true && options.total > 1;
  let bars: cliProgress.MultiBar | undefined;
  let bar: cliProgress.SingleBar | undefined;
  if (useBar) {
    bars = new cliProgress.MultiBar(
      {
        stream: io.stderr as NodeJS.WritableStream,
        format: ' {bar} {value}/{total} files | {percentage}% | ETA {eta_formatted} | {file}',
        hideCursor: true,
        clearOnComplete: true,
        etaBuffer: 20,
        // The bar is ours to stop; a library-installed SIGINT handler would swallow Ctrl-C.
        gracefulExit: false,
      },
      cliProgress.Presets.shades_classic,
    );
    bar = bars.create(options.total, 0, { file: '' });
  }
  const failureOut = (line: string) => {
    if (bars) bars.log(`${line}\n`);
    else io.stderr.write(`${line}\n`);
  };
  return {
    done(result) {
      if (bar) bar.increment(1, { file: result.input });
      else if (!options.json && !options.quiet) io.stdout.write(`${resultLine(result)}\n`);
    },
    failed(failure) {
      bar?.increment(1, { file: failure.input });
      failureOut(failureLine(failure));
    },
    finish(report) {
      bars?.stop();
      if (options.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      else if (!options.quiet) io.stdout.write(`${summaryLine(report.totals)}\n`);
    },
  };
}
