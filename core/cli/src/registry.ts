/**
 * Every command of `compresso`, one line each. A command module in src/commands/ exports
 * `register(program)`; adding a command is adding its line here. Help lists commands in export-name
 * order: a module namespace keeps its keys sorted, whatever the order of the lines.
 */

export { register as account } from './commands/account.ts';
export { register as compress } from './commands/compress.ts';
export { register as keys } from './commands/keys.ts';
export { register as promo } from './commands/promo.ts';
export { register as serve } from './commands/serve.ts';
export { register as worker } from './commands/worker.ts';
