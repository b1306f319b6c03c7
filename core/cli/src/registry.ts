/**
 * Every command of `compresso`, one line each. A command module exports `register(program)`;
 * adding a command is adding its line here (help lists them in name order).
 */
export { register as compress } from './commands/compress.ts';
