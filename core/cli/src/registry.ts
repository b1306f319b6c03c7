/**
 * Every command of `compresso`, one line each. A command module in src/commands/ exports
 * `register(program)`; adding a command is adding its line here. Help lists commands in export-name
 * order: a module namespace keeps its keys sorted, whatever the order of the lines.
 */
export { register as compress } from './commands/compress.ts';
