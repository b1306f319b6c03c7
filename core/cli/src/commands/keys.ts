import { createApiKey, listApiKeys, planOf, requireAccount, revokeApiKey } from '@compresso/runtime';
import type { Command } from 'commander';
import { contextOf } from '../context.ts';
import { cliConfig, dataDirOption, withDatabase, writeJson } from '../data.ts';

/** `compresso keys create|list|revoke`: the same keys as POST /api/v1/key, made by the operator. */
export function register(program: Command): void {
  const keys = program.command('keys').description('manage API keys of an account (operator)');

  dataDirOption(
    keys
      .command('create')
      .description('create an API key; the key is printed once, on stdout, and never stored')
      .requiredOption('--account <account>', 'the account’s email or id')
      .option('--name <name>', 'a label to tell keys apart', 'default')
      .option('--json', 'print the key record and the key as JSON'),
  ).action(async (flags: { account: string; name: string; json?: boolean }, command: Command) => {
    await withDatabase(command, async (db) => {
      const account = await requireAccount(db, flags.account);
      const { key, secret } = await createApiKey(db, account.id, flags.name);
      const { io } = contextOf(command);
      if (flags.json) {
        writeJson(command, { ...key, key: secret });
      } else {
        // The secret alone on stdout, so KEY=$(compresso keys create …) captures exactly the key.
        io.stdout.write(`${secret}\n`);
        io.stderr.write(
          `Created key ${key.id} ("${key.name}") for ${account.email}. Store it now: it cannot be shown again.\n`,
        );
      }
      // On stderr in both modes: a key that will only ever get 403 deserves a warning.
      if (!planOf(account.plan, cliConfig(command)).api) {
        io.stderr.write(
          `Note: ${account.email} is on the ${account.plan} plan; the API answers 403 PLAN_REQUIRED until a promo code activates Pro.\n`,
        );
      }
    });
  });

  dataDirOption(
    keys
      .command('list')
      .description('list an account’s keys (never their secrets)')
      .requiredOption('--account <account>', 'the account’s email or id')
      .option('--all', 'include revoked keys')
      .option('--json', 'print JSON'),
  ).action(async (flags: { account: string; all?: boolean; json?: boolean }, command: Command) => {
    await withDatabase(command, async (db) => {
      const account = await requireAccount(db, flags.account);
      const list = await listApiKeys(db, account.id, flags.all === true);
      if (flags.json) {
        writeJson(command, { keys: list });
        return;
      }
      const { io } = contextOf(command);
      if (list.length === 0) io.stdout.write(`No keys for ${account.email}.\n`);
      for (const k of list) {
        const state = k.revoked_at ? `revoked ${k.revoked_at}` : `last used ${k.last_used_at ?? 'never'}`;
        io.stdout.write(`${k.id}  ${k.prefix}…  ${k.name}  created ${k.created_at}  ${state}\n`);
      }
    });
  });

  dataDirOption(
    keys
      .command('revoke')
      .description('revoke a key; it stops working at once')
      .argument('<id>', 'the key id (key_…), as shown by keys list'),
  ).action(async (id: string, _flags: unknown, command: Command) => {
    await withDatabase(command, async (db) => {
      await revokeApiKey(db, id);
      contextOf(command).io.stdout.write(`Revoked key ${id}.\n`);
    });
  });
}
