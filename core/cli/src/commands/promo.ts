import { createPromoCode, isPlanId, PLAN_IDS, promoExpiry } from '@compresso/runtime';
import { type Command, InvalidArgumentError } from 'commander';
import { contextOf } from '../context.ts';
import { dataDirOption, withDatabase, writeJson } from '../data.ts';

function parseUses(value: string): number {
  if (!/^\s*\d+\s*$/.test(value) || Number(value) < 1)
    throw new InvalidArgumentError('Expected a whole number ≥ 1.');
  return Number(value);
}

function parsePlan(value: string): string {
  if (!isPlanId(value)) throw new InvalidArgumentError(`Expected one of ${PLAN_IDS.join(', ')}.`);
  return value;
}

function parseDate(value: string): string {
  if (promoExpiry(value) === undefined) {
    throw new InvalidArgumentError('Expected a date such as 2027-01-31 or 2027-01-31T12:00:00Z.');
  }
  return value;
}

/** `compresso promo create CODE [--plan pro] [--uses N] [--expires DATE]`. */
export function register(program: Command): void {
  const promo = program.command('promo').description('manage promo codes that activate plans (operator)');
  dataDirOption(
    promo
      .command('create')
      .description('create a promo code')
      .argument('<code>', '3–64 letters, digits, - or _')
      .option('--plan <plan>', `plan it activates: ${PLAN_IDS.join(', ')}`, parsePlan, 'pro')
      .option('--uses <n>', 'how many accounts may redeem it', parseUses, 1)
      .option(
        '--expires <date>',
        'last day it works (YYYY-MM-DD: through the end of that UTC day), or an exact ISO time',
        parseDate,
      )
      .option('--json', 'print the promo code as JSON'),
  ).action(
    async (
      code: string,
      flags: { plan: 'free' | 'pro'; uses: number; expires?: string; json?: boolean },
      command: Command,
    ) => {
      await withDatabase(command, async (db) => {
        const created = await createPromoCode(db, {
          code,
          plan: flags.plan,
          uses: flags.uses,
          expiresAt: flags.expires ?? null,
        });
        if (flags.json) writeJson(command, created);
        else {
          const until = created.expiresAt ? `, until ${created.expiresAt}` : '';
          contextOf(command).io.stdout.write(
            `Created promo code ${created.code}: ${created.plan} plan, ${created.maxUses} use(s)${until}.\n`,
          );
        }
      });
    },
  );
}
