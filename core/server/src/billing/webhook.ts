import type { Logger } from '@compresso/runtime';
import { CompressoError } from '@compresso/schema';
import express from 'express';
import { requestIdOf, sendError } from '../errors.ts';
import type { Billing } from './billing.ts';

/**
 * POST /webhooks/stripe: the signature is checked on the raw body (parsed JSON would not hash the
 * same), so this route reads its own body and runs before any other body parser. A delivery that is
 * not Stripe's (no or wrong signature, or signed more than 5 minutes ago: a replay) is answered 400
 * and logged with the reason, the address and the request id — never the header, the body or the
 * secret. A verified event is kept in the inbox (billing_events) and answered 200 at once; it is
 * handled right after in this process, and a try that fails (Stripe's API or the database down) is
 * retried by the sweep. Only failing to keep it is a 5xx, and then Stripe delivers it again.
 */
export function stripeWebhookRouter(billing: Billing, logger: Logger): express.Router {
  const router = express.Router();
  router.post('/webhooks/stripe', express.raw({ type: () => true, limit: '1mb' }), async (req, res) => {
    const signature = req.headers['stripe-signature'];
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    let event: Awaited<ReturnType<Billing['verify']>>;
    try {
      if (typeof signature !== 'string' || signature.length === 0) throw new Error('missing');
      event = await billing.verify(body, signature);
    } catch (error) {
      const text = (error as Error).message ?? '';
      const reason =
        text === 'missing'
          ? 'no_signature'
          : /timestamp outside the tolerance/i.test(text)
            ? 'stale'
            : 'bad_signature';
      logger.warn({ request_id: requestIdOf(req), ip: req.ip, reason }, 'stripe webhook refused');
      sendError(
        res,
        req,
        new CompressoError(
          'INVALID_REQUEST',
          reason === 'no_signature'
            ? 'Stripe-Signature: expected the header Stripe signs every webhook with, received none.'
            : reason === 'stale'
              ? 'Stripe-Signature: the signature is older than the 5 minutes allowed.'
              : 'Stripe-Signature: the signature does not match this endpoint’s signing secret.',
        ),
      );
      return;
    }
    // Kept first (a redelivery stops here), answered, then handled: Stripe waits only for the insert.
    if (!(await billing.receive(event))) {
      res.json({ received: true, outcome: 'duplicate' });
      return;
    }
    res.json({ received: true, outcome: 'queued' });
    billing.enqueue(event, requestIdOf(req));
  });
  return router;
}
