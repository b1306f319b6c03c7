import { afterAll, describe, expect, it } from 'vitest';
import { bearer, form, proAccount, smallJpeg, startTestServer, type TestServer } from './testing.ts';

const ADMIN = 'operator-token-0123456789abcdefghij';

const servers: TestServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

async function provision(srv: TestServer, body: unknown, token = ADMIN): Promise<Response> {
  return fetch(`${srv.url}/api/v1/operator/accounts`, {
    method: 'POST',
    headers: { ...bearer(token), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

describe('POST /api/v1/operator/accounts', () => {
  it('is off without COMPRESSO_ADMIN_TOKEN: 404 naming the setting', async () => {
    const srv = await startTestServer();
    servers.push(srv);
    const res = await provision(srv, { email: 'shop@example.com' });
    expect(res.status).toBe(404);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('NOT_FOUND');
    expect(body.error.message).toContain('COMPRESSO_ADMIN_TOKEN');
  });

  it('makes an account and a working key; the same address again reuses the account', async () => {
    const srv = await startTestServer({ dbPath: ':memory:', overrides: { adminToken: ADMIN } });
    servers.push(srv);
    const first = await provision(srv, {
      email: 'demo.myshopify.com@shopify.invalid',
      key_name: 'Shopify demo',
      plan: 'pro',
    });
    expect(first.status).toBe(201);
    const made = (await first.json()) as {
      account: { id: string; email: string; plan: string };
      account_created: boolean;
      key: { id: string; name: string; key: string };
    };
    expect(made.account_created).toBe(true);
    expect(made.account.plan).toBe('pro');
    expect(made.account.email).toBe('demo.myshopify.com@shopify.invalid');
    expect(made.key.name).toBe('Shopify demo');
    expect(made.key.key).toMatch(/^cmp_live_/);

    // The key is an ordinary API key of that account.
    const usage = await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(made.key.key) });
    expect(usage.status).toBe(200);

    const again = await provision(srv, { email: 'demo.myshopify.com@shopify.invalid' });
    expect(again.status).toBe(201);
    const reused = (await again.json()) as typeof made;
    expect(reused.account_created).toBe(false);
    expect(reused.account.plan).toBe('pro');
    expect(reused.account.id).toBe(made.account.id);
    expect(reused.key.id).not.toBe(made.key.id);
    expect(await srv.db.countAccounts()).toBe(1);
  });

  it('refuses API keys and wrong tokens (401), and bad bodies (400 naming the field)', async () => {
    const srv = await startTestServer({ dbPath: ':memory:', overrides: { adminToken: ADMIN } });
    servers.push(srv);
    const { key } = await proAccount(srv.db, 'pro@example.com');
    for (const token of [key, `${ADMIN}x`, 'short']) {
      const res = await provision(srv, { email: 'x@example.com' }, token);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toContain('operator');
    }
    const missing = await fetch(`${srv.url}/api/v1/operator/accounts`, { method: 'POST' });
    expect(missing.status).toBe(401);

    const notEmail = await provision(srv, { email: 'not-an-address' });
    expect(notEmail.status).toBe(400);
    const body = (await notEmail.json()) as { error: { code: string; details: { field: string }[] } };
    expect(body.error.code).toBe('INVALID_REQUEST');
    expect(body.error.details[0]?.field).toBe('email');

    for (const [bad, field] of [
      [{ email: 42 }, 'email'],
      [{ email: 'x@example.com', plan: 'gold' }, 'plan'],
    ] as const) {
      const res = await provision(srv, bad);
      expect(res.status).toBe(400);
      expect(
        ((await res.json()) as { error: { details: { field: string }[] } }).error.details[0]?.field,
      ).toBe(field);
    }

    // Nothing was made by the refused calls.
    expect(await srv.db.countAccounts()).toBe(1);
    // An API key does not become an operator token by being used on /compress either.
    const ok = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: bearer(key),
      body: form(await smallJpeg()),
    });
    expect(ok.status).toBe(200);
  });
});
