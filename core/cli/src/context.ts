import type { Command } from 'commander';
import type { CliIo } from './io.ts';

/**
 * What a command module needs from the run it belongs to. Kept beside the commander tree (not in
 * module state) so several runs can share a process, as the tests do.
 */
export interface RunContext {
  io: CliIo;
  /** The exit status the run ends with; actions raise it, never lower it. */
  exitCode: number;
}

const contexts = new WeakMap<Command, RunContext>();

export function attachContext(program: Command, context: RunContext): void {
  contexts.set(program, context);
}

/** The context of the program a (sub)command belongs to. */
export function contextOf(command: Command): RunContext {
  let root: Command = command;
  while (root.parent) root = root.parent;
  const context = contexts.get(root);
  if (!context) throw new Error('this command was not created by createProgram()');
  return context;
}
