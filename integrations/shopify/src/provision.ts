import type { Logger } from '@compresso/runtime';
import { API_ROUTES, ProvisionedAccountSchema, routePath } from '@compresso/schema';
import type { ShopStore } from './shop-store.ts';

export interface ProvisionOptions {
  /** The Compresso API (COMPRESSO_BASE_URL). */
  baseUrl: string;
  /** COMPRESSO_ADMIN_TOKEN; without it no account is made and the merchant connects a key. */
  adminToken: string | undefined;
  fetch: typeof fetch;
}

/**
 * The address the shop's Compresso account is made under. One account per shop, so the daily quota
 * is the shop's own; `.invalid` (RFC 2606) because no mail is ever meant to go there — the merchant
 * never types or sees it, and a merchant who already has a Compresso account connects its key instead.
 */
export function shopAccountEmail(shop: string): string {
  return `${shop}@shopify.invalid`;
}

/**
 * Give an installed shop a Compresso account and key, without the merchant typing anything: the
 * operator endpoint of the API (`createOperatorAccount`, behind COMPRESSO_ADMIN_TOKEN — a secret of
 * the app's server, never sent to a browser). A shop that has a key already (a reinstall, or a key
 * the merchant connected) keeps it. The endpoint answers the same account for the same address, so a
 * crash between its answer and the key being stored costs one spare key, not a second account.
 */
export async function provisionShop(
  shops: ShopStore,
  shop: string,
  options: ProvisionOptions,
  logger: Logger,
): Promise<'kept' | 'provisioned' | 'no-admin-token'> {
  const record = await shops.find(shop);
  if (record?.hasKey) return 'kept';
  if (!options.adminToken) {
    logger.warn({ shop }, 'COMPRESSO_ADMIN_TOKEN is not set: the merchant must connect a Compresso key');
    return 'no-admin-token';
  }
  const route = API_ROUTES.createOperatorAccount;
  const response = await options.fetch(`${options.baseUrl}${routePath('createOperatorAccount')}`, {
    method: route.method,
    headers: { authorization: `Bearer ${options.adminToken}`, 'content-type': 'application/json' },
    // Pro: the API is the plan's. Charging the merchant (Shopify's Billing API) is the next issue's;
    // until then whoever runs the app grants its shops the API through this token.
    body: JSON.stringify({ email: shopAccountEmail(shop), key_name: `Shopify ${shop}`, plan: 'pro' }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== route.status) {
    // The body is the API's error (code and message); it never holds a secret.
    throw new Error(`Compresso account for ${shop}: HTTP ${response.status} ${text.slice(0, 300)}`);
  }
  const created = ProvisionedAccountSchema.parse(JSON.parse(text));
  await shops.setKey(shop, { secret: created.key.key, accountId: created.account.id, source: 'provisioned' });
  logger.info({ shop, account_id: created.account.id, key_id: created.key.id }, 'Compresso account linked');
  return 'provisioned';
}
