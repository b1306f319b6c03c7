import { createHash, timingSafeEqual } from 'node:crypto';
import { createAccount, createApiKey, type Database, isEmailAddress, type Logger } from '@compresso/runtime';
import {
  CompressoError,
  fieldProblems,
  OperatorAccountRequestSchema,
  type ProvisionedAccount,
} from '@compresso/schema';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { RouteRegistrar } from './routes.ts';

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * The `operator` routes of the table, behind COMPRESSO_ADMIN_TOKEN: what an operator's own servers
 * (the Shopify app giving each shop an account) do over HTTP instead of the `compresso` command. No
 * token configured: the routes answer 404, so a forgotten setting never opens them. The token is
 * compared as a digest in constant time, as the metrics token is.
 */
export function requireOperator(token: string | undefined): RequestHandler {
  const expected = token === undefined ? undefined : digest(token);
  return (req: Request, res: Response, next: NextFunction) => {
    if (!expected) {
      throw new CompressoError(
        'NOT_FOUND',
        'Operator endpoints are off on this server: set COMPRESSO_ADMIN_TOKEN (at least 24 characters).',
      );
    }
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? '');
    if (!match || !timingSafeEqual(digest(match[1] as string), expected)) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="operator"');
      throw new CompressoError(
        'UNAUTHENTICATED',
        'Send the operator token as "Authorization: Bearer <token>".',
      );
    }
    next();
  };
}

export function registerOperatorRoutes(
  routes: RouteRegistrar,
  deps: { db: Database; logger: Logger; adminToken: string | undefined },
): void {
  const { db, logger } = deps;
  routes.add(
    'createOperatorAccount',
    requireOperator(deps.adminToken),
    express.json({ limit: '4kb', strict: true }),
    async (req, res) => {
      const parsed = OperatorAccountRequestSchema.safeParse(req.body ?? {});
      if (!parsed.success) {
        throw new CompressoError(
          'INVALID_REQUEST',
          'Expected a JSON body {"email": string, "key_name"?: string}.',
          {
            details: fieldProblems(parsed.error.issues, req.body ?? {}),
          },
        );
      }
      const email = parsed.data.email.trim();
      if (!isEmailAddress(email)) {
        throw new CompressoError(
          'INVALID_REQUEST',
          `email: expected an email address, received ${JSON.stringify(email)}`,
          {
            details: [{ field: 'email', expected: 'an email address', received: JSON.stringify(email) }],
          },
        );
      }
      // The same address gives the same account: a caller that lost an answer (a crash, a timeout)
      // asks again and gets a second key for it, never a second account.
      let account = await db.findAccountByEmail(email);
      const created = !account;
      if (!account) {
        try {
          account = await createAccount(db, email);
        } catch (error) {
          // Made by a concurrent call between the lookup and the insert: that one is the account.
          account = await db.findAccountByEmail(email);
          if (!account) throw error;
        }
      }
      if (parsed.data.plan && parsed.data.plan !== account.plan) {
        await db.setAccountPlan(account.id, parsed.data.plan);
        account = { ...account, plan: parsed.data.plan };
      }
      const { key, secret } = await createApiKey(db, account.id, parsed.data.key_name ?? 'operator');
      logger.info(
        { account_id: account.id, key_id: key.id, account_created: created },
        'operator: account key issued',
      );
      const body: ProvisionedAccount = {
        account: { id: account.id, email: account.email, plan: account.plan, created_at: account.createdAt },
        account_created: created,
        key: { ...key, key: secret },
      };
      res.status(201).json(body);
    },
  );
}
