/** The part of a stream the CLI writes to. Tests pass plain collectors; the binary passes process streams. */
export interface CliOutput {
  write(chunk: string): unknown;
  /** True when a person is watching: enables the progress bar (stderr) and nothing else. */
  isTTY?: boolean;
  columns?: number;
}

/**
 * Everything a command touches outside its arguments. Injected so tests run the real program
 * in-process, without spawning, changing directory or exiting the test runner.
 */
export interface CliIo {
  stdout: CliOutput;
  stderr: CliOutput;
  /** Relative paths in arguments resolve against this directory. */
  cwd: string;
}

export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, cwd: process.cwd() };
}
