import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Account, Config, Database, Logger } from '@compresso/runtime';
import { CompressoError } from '@compresso/schema';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { sendError } from '../errors.ts';
import { escapeHtml, page, sendPage } from './layout.ts';

/**
 * Browser sessions and CSRF protection for the web pages.
 *
 * The session cookie carries 256 random bits; the database keeps only their SHA-256, so a copy of
 * the database (a backup, a read-only SQL injection) does not hand out live sessions. Sessions expire
 * after SESSION_TTL_MS; log-out deletes the row, and log-in always makes a new id (rotation), so an id
 * planted before log-in is worth nothing after it.
 *
 * CSRF: every state-changing form carries a token. Signed in, the token is an HMAC of the session id
 * (a synchronizer token bound to the session, nothing extra stored), and ONLY that token is accepted:
 * a signed-out token is refused on a signed-in request. (Accepting both let someone who can plant a
 * cookie on the site, e.g. from a sibling subdomain or over plain http, fetch a matching signed-out
 * cookie/token pair for themselves, plant the cookie in the victim's browser and post as the victim.)
 * Signed out (log-in, sign-up, reset forms), the token is an HMAC of a random `cmp_csrf` cookie: a
 * signed double-submit. The HMAC key is one random server secret, kept in the database so every
 * process sharing it agrees.
 *
 * Over https both cookies carry the `__Host-` prefix (`__Host-cmp_session`, `__Host-cmp_csrf`):
 * browsers accept such a cookie only with Secure, Path=/ and no Domain, from a secure origin, so a
 * sibling subdomain or a plain-http man in the middle cannot set or overwrite them. Whether a request
 * is https comes from COMPRESSO_COOKIE_SECURE, an https COMPRESSO_PUBLIC_URL, or req.secure, which
 * behind a proxy follows X-Forwarded-Proto only when TRUST_PROXY trusts that proxy.
 */

export const SESSION_COOKIE = 'cmp_session';
export const CSRF_COOKIE = 'cmp_csrf';
/** Two weeks: long enough not to nag, short enough that a forgotten session on a shared computer dies. */
export const SESSION_TTL_MS = 14 * 24 * 3600 * 1000;
/** Form field and request header that carry the CSRF token. */
export const CSRF_FIELD = '_csrf';
export const CSRF_HEADER = 'x-csrf-token';

export interface WebSession {
  account: Account;
  /** The CSRF token to put in this session's forms (or the X-CSRF-Token header of a fetch). */
  csrfToken: string;
}

export interface SessionDeps {
  db: Database;
  config: Config;
  logger: Logger;
  /** The clock for session expiry; default: the system clock. */
  now?: () => Date;
}

interface Locals {
  session?: WebSession;
  /** SHA-256 of the current session id (for log-out). */
  sessionIdHash?: string;
  /** The raw session id, only in memory for this request (to derive the CSRF token). */
  sessionId?: string;
}

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/** The Cookie header's value for `name`, if any. Only our own simple base64url values are read. */
export function readCookie(req: Request, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      const value = part.slice(eq + 1).trim();
      return /^[A-Za-z0-9_-]{16,128}$/.test(value) ? value : undefined;
    }
  }
  return undefined;
}

/**
 * Secure cookies when the operator says so, when the public address is https, or when the request
 * came over https (req.secure: TLS here, or X-Forwarded-Proto from a proxy TRUST_PROXY trusts).
 */
function secureCookies(req: Request, config: Config): boolean {
  return config.cookieSecure ?? (config.publicUrl?.startsWith('https:') || req.secure);
}

/**
 * The cookie names for this request: `__Host-`-prefixed when cookies are Secure. Only those names
 * are read then, so a plain-named cookie planted by a sibling site is ignored.
 */
export function cookieNames(req: Request, config: Config): { session: string; csrf: string } {
  return secureCookies(req, config)
    ? { session: `__Host-${SESSION_COOKIE}`, csrf: `__Host-${CSRF_COOKIE}` }
    : { session: SESSION_COOKIE, csrf: CSRF_COOKIE };
}

export function sessionOf(res: Response): WebSession | undefined {
  return (res.locals as Locals).session;
}

/** The per-app session machinery; one per createApp, sharing the database's secret. */
export function createSessions(deps: SessionDeps): Sessions {
  const { db, config, logger } = deps;
  const clock = deps.now ?? (() => new Date());
  let secret: Promise<Buffer> | undefined;
  const hmacKey = () => {
    secret ??= db
      .webSecret('csrf-hmac', randomBytes(32).toString('base64url'))
      .then((value) => Buffer.from(value, 'base64url'))
      .catch((err) => {
        secret = undefined;
        throw err;
      });
    return secret;
  };
  const sign = async (kind: 'session' | 'anon', value: string) =>
    createHmac('sha256', await hmacKey())
      .update(`${kind}\0${value}`)
      .digest('base64url');

  const cookieOptions = (req: Request, maxAge: number) => ({
    httpOnly: true,
    sameSite: 'lax' as const,
    secure: secureCookies(req, config),
    path: '/',
    maxAge,
  });

  /**
   * Sets res.locals.session when the request carries a live session cookie, and res.locals.sessions
   * (this machinery) so the module-level helpers below work in any router mounted after it.
   */
  const middleware: RequestHandler = async (req, res, next) => {
    try {
      res.locals.sessions = sessions;
      const id = readCookie(req, cookieNames(req, config).session);
      if (id) {
        const idHash = sha256(id);
        const found = await db.findWebSession(idHash, clock().toISOString());
        if (found) {
          const locals = res.locals as Locals;
          locals.sessionId = id;
          locals.sessionIdHash = idHash;
          locals.session = { account: found.account, csrfToken: await sign('session', id) };
        }
      }
      next();
    } catch (err) {
      next(err);
    }
  };

  /** Start a session for `account` (after log-in, sign-up or a reset): always a fresh id. */
  const start = async (req: Request, res: Response, account: Account): Promise<WebSession> => {
    const locals = res.locals as Locals;
    if (locals.sessionIdHash) await db.deleteWebSession(locals.sessionIdHash);
    const now = clock();
    // Expired rows are dead weight only; clearing them at log-in keeps the table small without a timer.
    await db.pruneWebSessions(now.toISOString());
    const id = randomBytes(32).toString('base64url');
    const idHash = sha256(id);
    await db.insertWebSession({
      idHash,
      accountId: account.id,
      createdAt: now.toISOString(),
      expiresAt: new Date(now.getTime() + SESSION_TTL_MS).toISOString(),
    });
    res.cookie(cookieNames(req, config).session, id, cookieOptions(req, SESSION_TTL_MS));
    locals.sessionId = id;
    locals.sessionIdHash = idHash;
    locals.session = { account, csrfToken: await sign('session', id) };
    logger.info({ account_id: account.id }, 'web session started');
    return locals.session;
  };

  /** Log out: the row goes, so the id is dead even if the cookie survives somewhere. */
  const end = async (req: Request, res: Response): Promise<void> => {
    const locals = res.locals as Locals;
    if (locals.sessionIdHash) await db.deleteWebSession(locals.sessionIdHash);
    res.clearCookie(cookieNames(req, config).session, { ...cookieOptions(req, 0), maxAge: undefined });
    locals.session = undefined;
    locals.sessionId = undefined;
    locals.sessionIdHash = undefined;
  };

  /**
   * The CSRF token for a form on this response: the session's, or (signed out) one bound to the
   * `cmp_csrf` cookie, which is set here when missing.
   */
  const csrfToken = async (req: Request, res: Response): Promise<string> => {
    const session = sessionOf(res);
    if (session) return session.csrfToken;
    let anon =
      (res.locals as { anonCsrf?: string }).anonCsrf ?? readCookie(req, cookieNames(req, config).csrf);
    if (!anon) {
      anon = randomBytes(32).toString('base64url');
      res.cookie(cookieNames(req, config).csrf, anon, cookieOptions(req, 24 * 3600 * 1000));
    }
    (res.locals as { anonCsrf?: string }).anonCsrf = anon;
    return sign('anon', anon);
  };

  const matches = (given: string, expected: string) => {
    const a = Buffer.from(given);
    const b = Buffer.from(expected);
    return a.length === b.length && timingSafeEqual(a, b);
  };

  /**
   * Refuse a state-changing request without the right token (form field `_csrf`, or header
   * X-CSRF-Token for fetch). Mount after the body parser. HTML callers get a page, others JSON;
   * both 403 FORBIDDEN.
   */
  const verifyCsrf: RequestHandler = async (req: Request, res: Response, next: NextFunction) => {
    try {
      const body = req.body as Record<string, unknown> | undefined;
      const fromBody = typeof body?.[CSRF_FIELD] === 'string' ? (body[CSRF_FIELD] as string) : undefined;
      const fromHeader = req.get(CSRF_HEADER);
      const given = fromBody ?? fromHeader ?? '';
      const locals = res.locals as Locals;
      // Signed in: the session's token and nothing else. Signed out: the one bound to cmp_csrf.
      const anon = readCookie(req, cookieNames(req, config).csrf);
      const ok =
        given.length > 0 &&
        (locals.sessionId !== undefined
          ? matches(given, await sign('session', locals.sessionId))
          : anon !== undefined && matches(given, await sign('anon', anon)));
      if (ok) return next();
      const error = new CompressoError(
        'FORBIDDEN',
        'The form’s security token is missing or does not match (CSRF check): reload the page and submit it again.',
        { details: { reason: 'csrf' } },
      );
      if (req.accepts(['html', 'json']) === 'html') {
        sendPage(
          res,
          page({
            title: 'Form expired',
            session: sessionOf(res),
            body: `<h1>This form could not be accepted</h1>
<p class="error" role="alert">${escapeHtml(error.message)}</p>
<p>Forms on this site only work when sent from its own pages. If you came from another site, nothing was changed.</p>
<p><a href="${escapeHtml(req.path)}">Back to the form</a></p>`,
          }),
          403,
        );
        return;
      }
      sendError(res, req, error);
    } catch (err) {
      next(err);
    }
  };

  /** Redirect to /login when signed out. */
  const requireSession: RequestHandler = (req, res, next) => {
    if (sessionOf(res)) return next();
    if (req.method === 'GET') return res.redirect(303, '/login');
    sendError(res, req, new CompressoError('UNAUTHENTICATED', 'Log in first.'));
  };

  const sessions = { middleware, start, end, csrfToken, verifyCsrf, requireSession };
  return sessions;
}

export interface Sessions {
  middleware: RequestHandler;
  start(req: Request, res: Response, account: Account): Promise<WebSession>;
  end(req: Request, res: Response): Promise<void>;
  csrfToken(req: Request, res: Response): Promise<string>;
  verifyCsrf: RequestHandler;
  requireSession: RequestHandler;
}

function sessionsOf(res: Response): Sessions {
  const sessions = res.locals.sessions as Sessions | undefined;
  if (!sessions) throw new Error('web session middleware is not mounted before this route');
  return sessions;
}

/** The CSRF token for a form or fetch on this response (see Sessions.csrfToken). */
export function csrfToken(req: Request, res: Response): Promise<string> {
  return sessionsOf(res).csrfToken(req, res);
}

/** Refuse a state-changing request without a valid CSRF token; mount after a body parser (or use the header). */
export const verifyCsrf: RequestHandler = (req, res, next) => sessionsOf(res).verifyCsrf(req, res, next);

/** Signed-out GETs go to /login; other methods get 401 UNAUTHENTICATED. */
export const requireSession: RequestHandler = (req, res, next) =>
  sessionsOf(res).requireSession(req, res, next);

/**
 * The middleware that sets `res.locals.session` (`{ account, csrfToken }` or undefined) for every
 * router mounted after it. The account router (web/account.ts) mounts one first; use this for a
 * router on its own (tests).
 */
export function sessionMiddleware(deps: SessionDeps): RequestHandler {
  return createSessions(deps).middleware;
}
