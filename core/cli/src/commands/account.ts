import {
  applyPromo,
  billingStore,
  createAccount,
  describeSubscription,
  listApiKeys,
  planOf,
  quotaDay,
  requireAccount,
} from '@compresso/runtime';
import type { Command } from 'commander';
import { contextOf } from '../context.ts';
import { cliConfig, dataDirOption, withDatabase, writeJson } from '../data.ts';

/** `compresso account create --email E`, `compresso account plan E --promo CODE`, `compresso account show E`. */
export function register(program: Command): void {
  const account = program.command('account').description('manage accounts of the API server (operator)');

  dataDirOption(
    account
      .command('create')
      .description('create an account (on the free plan until a promo code activates Pro)')
      .requiredOption('--email <email>', 'the account owner’s email address')
      .option('--json', 'print the account as JSON'),
  ).action(async (flags: { email: string; json?: boolean }, command: Command) => {
    await withDatabase(command, async (db) => {
      const created = await createAccount(db, flags.email);
      if (flags.json) writeJson(command, created);
      else
        contextOf(command).io.stdout.write(
          `Created account ${created.id} for ${created.email} (plan: ${created.plan}).\n`,
        );
    });
  });

  dataDirOption(
    account
      .command('plan')
      .description('activate a plan on an account by redeeming a promo code')
      .argument('<account>', 'the account’s email or id')
      .requiredOption('--promo <code>', 'the promo code to redeem')
      .option('--json', 'print the account as JSON'),
  ).action(async (who: string, flags: { promo: string; json?: boolean }, command: Command) => {
    await withDatabase(command, async (db) => {
      const updated = await applyPromo(db, who, flags.promo);
      if (flags.json) writeJson(command, updated);
      else
        contextOf(command).io.stdout.write(`Account ${updated.email} is now on the ${updated.plan} plan.\n`);
    });
  });

  dataDirOption(
    account
      .command('show')
      .description(
        'show an account: plan and where it comes from, subscription, today’s API usage, active keys',
      )
      .argument('<account>', 'the account’s email or id')
      .option('--json', 'print JSON'),
  ).action(async (who: string, flags: { json?: boolean }, command: Command) => {
    await withDatabase(command, async (db) => {
      const found = await requireAccount(db, who);
      const plan = planOf(found.plan, cliConfig(command));
      const day = quotaDay();
      const used = await db.usageOn(found.id, day);
      const keys = (await listApiKeys(db, found.id)).length;
      const now = new Date().toISOString();
      const billing = await billingStore(db).billingOf(found.id, now);
      const sub = billing.subscription;
      const view = {
        ...found,
        api: plan.api,
        day,
        used,
        limit: plan.dailyRequests,
        active_keys: keys,
        plan_sources: billing.sources,
        customer_id: billing.customerId,
        subscription: sub && {
          id: sub.id,
          status: sub.status,
          current_period_end: sub.currentPeriodEnd,
          cancel_at_period_end: sub.cancelAtPeriodEnd,
          grace_until: sub.graceUntil,
        },
      };
      if (flags.json) writeJson(command, view);
      else {
        const usage = plan.api
          ? `${used} of ${plan.dailyRequests} API requests today (UTC)`
          : 'no API access';
        contextOf(command).io.stdout.write(
          `${found.email} (${found.id}): ${found.plan} plan, ${usage}, ${keys} active key(s), created ${found.createdAt}.\n` +
            `  plan source: ${billing.sources.length ? billing.sources.map((s) => (s === 'promo' ? 'promo code' : s)).join(' and ') : 'none'}\n` +
            `  subscription: ${sub ? `${sub.id} ${sub.status}: ${describeSubscription(sub, now)}` : 'none'}\n` +
            `  customer: ${billing.customerId ?? 'none'}\n`,
        );
      }
    });
  });
}
