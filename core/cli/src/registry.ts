/**
 * Every command of `compresso`, one line each. A command module in src/commands/ exports
 * `register(program)`; adding a command is adding its line here (help lists them in this order).
 */
export { register as compress } from './commands/compress.ts';
