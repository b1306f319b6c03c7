import type { JobQueue, Logger } from '@compresso/runtime';
import type { HttpWebhookHandlerWithCallback } from '@shopify/shopify-api';
import type { ShopStore } from './shop-store.ts';
import { shopifyApiLib } from './shopify-lib.ts';

/** The queue job a product webhook becomes: the worker reads the product's media itself. */
export interface WebhookJob {
  shop: string;
  topic: string;
  webhookId: string;
  productId: string;
  /** MediaImage gids named in the payload (the worker still reads their current state). */
  mediaIds: string[];
}

/** Queue job names of the app. */
export const JOBS = {
  product: 'shopify.product',
  eraseShop: 'shopify.erase-shop',
  restore: 'shopify.restore',
} as const;

const QUEUE_ID = /[^A-Za-z0-9_-]/g;

/** The queue job id of a webhook: Shopify's delivery id, so a redelivery is the same job. */
export function webhookJobId(webhookId: string): string {
  return `shopify-wh-${webhookId.replace(QUEUE_ID, '_')}`;
}

interface ProductPayload {
  admin_graphql_api_id?: unknown;
  media?: { admin_graphql_api_id?: unknown; media_content_type?: unknown }[];
}

/**
 * The handlers @shopify/shopify-api calls once a delivery's HMAC is verified (a bad one never gets
 * here: the library answers 401). Each is short — a read, a queue add, a write — so the answer
 * goes back well within Shopify's 5 s; a handler that throws makes the library answer 500, and
 * Shopify delivers again. A redelivery (same webhook id) is recognised and does nothing new; a
 * verified delivery for a shop that is not (or no longer) installed is answered 200 and ignored.
 */
export function webhookHandlers(deps: {
  shops: ShopStore;
  queue: JobQueue;
  logger: Logger;
  path: string;
}): Record<string, HttpWebhookHandlerWithCallback> {
  const { shops, queue, logger, path } = deps;
  const Http = shopifyApiLib.DeliveryMethod.Http;
  const handler = (
    callback: (shop: string, body: string, webhookId: string, topic: string) => Promise<void>,
  ): HttpWebhookHandlerWithCallback => ({
    deliveryMethod: Http,
    callbackUrl: path,
    callback: async (topic, shop, body, webhookId) => callback(shop, body, webhookId, topic),
  });

  const product = handler(async (shop, body, webhookId, topic) => {
    if (!(await shops.isActive(shop))) {
      logger.info(
        { shop, topic, webhook_id: webhookId },
        'webhook for a shop that is not installed: ignored',
      );
      return;
    }
    let payload: ProductPayload;
    try {
      payload = JSON.parse(body) as ProductPayload;
    } catch {
      // Signed by Shopify but not JSON: nothing to act on, and a redelivery would not change that.
      logger.warn({ shop, topic, webhook_id: webhookId }, 'webhook body is not JSON: ignored');
      return;
    }
    const productId =
      typeof payload.admin_graphql_api_id === 'string' ? payload.admin_graphql_api_id : undefined;
    if (!productId) {
      logger.warn(
        { shop, topic, webhook_id: webhookId },
        'product webhook without admin_graphql_api_id: ignored',
      );
      return;
    }
    const mediaIds = (payload.media ?? [])
      .filter((m) => m.media_content_type === 'IMAGE' && typeof m.admin_graphql_api_id === 'string')
      .map((m) => m.admin_graphql_api_id as string);
    if (await shops.seenWebhook(webhookId)) {
      logger.info({ shop, topic, webhook_id: webhookId }, 'webhook delivered again: already queued');
      return;
    }
    // Queue first, then remember the id: the queue's job id makes a second add a no-op, so a crash
    // between the two only means a redelivery adds nothing new; the other order could lose the work.
    const job: WebhookJob = { shop, topic, webhookId, productId, mediaIds };
    await queue.add(JOBS.product, job, { jobId: webhookJobId(webhookId) });
    await shops.claimWebhook({ id: webhookId, shop, topic, outcome: 'queued' });
    logger.info(
      { shop, topic, webhook_id: webhookId, product: productId, media: mediaIds.length },
      'product webhook queued',
    );
  });

  const uninstalled = handler(async (shop, _body, webhookId, topic) => {
    await shops.markUninstalled(shop);
    await shops.claimWebhook({ id: webhookId, shop, topic, outcome: 'done' });
    logger.info({ shop, webhook_id: webhookId }, 'shop uninstalled: its work stops');
  });

  // Compliance. The app keeps no customer data (images and product ids only), so a customer's data
  // request and redaction have nothing to return or erase; they are verified, recorded and answered.
  const customerData = handler(async (shop, _body, webhookId, topic) => {
    logger.info({ shop, topic, webhook_id: webhookId }, 'compliance webhook: the app holds no customer data');
  });
  const shopRedact = handler(async (shop, _body, webhookId, topic) => {
    // Sent 48 hours after uninstall: everything about the shop goes, backups included (in the worker:
    // blobs can be many).
    await queue.add(JOBS.eraseShop, { shop }, { jobId: webhookJobId(webhookId) });
    logger.info({ shop, topic, webhook_id: webhookId }, 'shop/redact: erasure queued');
  });

  return {
    PRODUCTS_CREATE: product,
    PRODUCTS_UPDATE: product,
    APP_UNINSTALLED: uninstalled,
    CUSTOMERS_DATA_REQUEST: customerData,
    CUSTOMERS_REDACT: customerData,
    SHOP_REDACT: shopRedact,
  };
}
