import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { billingStore, hashKey, sqliteDatabase } from '@compresso/runtime';
import { afterAll, describe, expect, it } from 'vitest';
import type { CliIo } from './io.ts';
import { run } from './program.ts';

const dir = mkdtempSync(join(tmpdir(), 'compresso-cli-ops-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function cli(...argv: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    cwd: dir,
  };
  const status = await run([...argv, '--data-dir', 'data'], io);
  return { status, stdout, stderr };
}

describe('operator commands', () => {
  it('account, promo and keys: from a new account to a working Pro key', async () => {
    expect((await cli('account', 'create', '--email', 'op@example.com')).stdout).toMatch(
      /^Created account acc_\S+ for op@example.com \(plan: free\)\.\n$/,
    );
    const dup = await cli('account', 'create', '--email', 'op@example.com');
    expect(dup.status).toBe(1);
    expect(dup.stderr).toContain('(CONFLICT)');

    const promo = await cli('promo', 'create', 'WELCOME', '--uses', '1', '--expires', '2099-01-01', '--json');
    expect(promo.status).toBe(0);
    expect(JSON.parse(promo.stdout)).toMatchObject({ code: 'WELCOME', plan: 'pro', maxUses: 1, uses: 0 });
    expect((await cli('promo', 'create', 'BAD', '--uses', 'zero')).status).toBe(2);
    expect((await cli('promo', 'create', 'BAD', '--expires', '2027-02-30')).status).toBe(2);
    const through = JSON.parse(
      (await cli('promo', 'create', 'JAN', '--expires', '2099-01-31', '--json')).stdout,
    );
    expect(through.expiresAt).toBe('2099-02-01T00:00:00.000Z');

    const plan = await cli('account', 'plan', 'op@example.com', '--promo', 'WELCOME');
    expect(plan.stdout).toBe('Account op@example.com is now on the pro plan.\n');
    const again = await cli('account', 'plan', 'op@example.com', '--promo', 'WELCOME');
    expect(again.status).toBe(1);

    const created = await cli('keys', 'create', '--account', 'op@example.com', '--name', 'laptop');
    expect(created.status).toBe(0);
    const secret = created.stdout.trim();
    expect(secret).toMatch(/^cmp_live_[A-Za-z0-9_-]{43}$/);
    expect(created.stderr).toContain('cannot be shown again');

    const listed = await cli('keys', 'list', '--account', 'op@example.com', '--json');
    const { keys } = JSON.parse(listed.stdout) as { keys: { id: string; name: string; prefix: string }[] };
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ name: 'laptop', prefix: secret.slice(0, 17) });
    expect(listed.stdout).not.toContain(secret);

    // The key is in the database the server reads, as a hash.
    const db = sqliteDatabase({ path: join(dir, 'data', 'compresso.sqlite') });
    expect((await db.findActiveKeyByHash(hashKey(secret)))?.account.plan).toBe('pro');
    await db.close();

    const shown = JSON.parse((await cli('account', 'show', 'op@example.com', '--json')).stdout);
    expect(shown).toMatchObject({
      email: 'op@example.com',
      plan: 'pro',
      api: true,
      used: 0,
      limit: 500,
      active_keys: 1,
    });
    expect((await cli('account', 'show', 'op@example.com')).stdout).toContain(
      'pro plan, 0 of 500 API requests today',
    );

    expect((await cli('keys', 'revoke', keys[0]!.id)).stdout).toBe(`Revoked key ${keys[0]!.id}.\n`);
    expect((await cli('keys', 'revoke', keys[0]!.id)).status).toBe(1);
    expect(
      JSON.parse((await cli('keys', 'list', '--account', 'op@example.com', '--json')).stdout).keys,
    ).toEqual([]);
  });

  it('account show says where Pro comes from, the subscription state and the Stripe customer', async () => {
    await cli('account', 'create', '--email', 'payer@example.com');
    let shown = await cli('account', 'show', 'payer@example.com');
    expect(shown.stdout).toContain('free plan');
    expect(shown.stdout).toContain('  plan source: none\n  subscription: none\n  customer: none\n');
    // What the webhook records when Stripe reports a subscription (see the server's billing tests).
    const db = sqliteDatabase({ path: join(dir, 'data', 'compresso.sqlite') });
    try {
      await db.migrate();
      const account = await db.findAccountByEmail('payer@example.com');
      const billing = billingStore(db);
      await billing.linkCustomer(account!.id, 'cus_Op123', new Date().toISOString());
      await billing.applySubscription({
        eventId: 'evt_op1',
        eventType: 'customer.subscription.created',
        eventAt: Math.floor(Date.now() / 1000),
        now: new Date().toISOString(),
        graceMs: 0,
        snapshot: {
          id: 'sub_Op123',
          customerId: 'cus_Op123',
          accountId: account!.id,
          status: 'active',
          priceId: 'price_Pro',
          currentPeriodEnd: '2099-03-01T00:00:00.000Z',
          cancelAtPeriodEnd: true,
        },
      });
    } finally {
      await db.close();
    }
    shown = await cli('account', 'show', 'payer@example.com');
    expect(shown.stdout).toContain('pro plan, 0 of 500 API requests today');
    expect(shown.stdout).toContain(
      '  plan source: subscription\n  subscription: sub_Op123 active: Cancelled: Pro until 2099-03-01, then the free plan.\n  customer: cus_Op123\n',
    );
    expect(JSON.parse((await cli('account', 'show', 'payer@example.com', '--json')).stdout)).toMatchObject({
      plan: 'pro',
      plan_sources: ['subscription'],
      customer_id: 'cus_Op123',
      subscription: { id: 'sub_Op123', status: 'active', cancel_at_period_end: true, grace_until: null },
    });
  });

  it('keys create --json gives the record and the key once; keys list --all shows revoked keys', async () => {
    await cli('account', 'create', '--email', 'json@example.com');
    const made = await cli('keys', 'create', '--account', 'json@example.com', '--name', 'ci', '--json');
    const record = JSON.parse(made.stdout) as { id: string; key: string; prefix: string; name: string };
    expect(record).toMatchObject({ name: 'ci', revoked_at: null, last_used_at: null });
    expect(record.key.startsWith(record.prefix)).toBe(true);
    expect(made.stderr).toContain('free plan');
    await cli('keys', 'revoke', record.id);
    const all = await cli('keys', 'list', '--account', 'json@example.com', '--all');
    expect(all.stdout).toMatch(new RegExp(`^${record.id} .* ci .* revoked 20`));
    expect(all.stdout).not.toContain(record.key);
  });

  it('unknown accounts are errors with status 1', async () => {
    const res = await cli('keys', 'create', '--account', 'ghost@example.com');
    expect(res.status).toBe(1);
    expect(res.stderr).toContain('(NOT_FOUND)');
    expect(res.stdout).toBe('');
  });
});
