import { join } from 'node:path';
import type { Config, Database, Logger } from '@compresso/runtime';
import express from 'express';
import { createSessions } from './session.ts';

export interface AccountDeps {
  db: Database;
  logger: Logger;
  config: Config;
}

/**
 * The account half of the web pages: the session middleware (first, for every router after it),
 * sign-up, log-in, log-out, password reset and the account area, and the shared static files.
 */
export function accountRouter(deps: AccountDeps): express.Router {
  const sessions = createSessions(deps);
  const router = express.Router();
  router.use(sessions.middleware);

  const staticDir = join(import.meta.dirname, 'static');
  for (const file of ['site.css']) {
    router.get(`/static/${file}`, (_req, res) => {
      res.setHeader('Cache-Control', 'no-cache');
      res.sendFile(join(staticDir, file));
    });
  }
  return router;
}
