import type { Response } from 'express';

/**
 * The site's page shell: one stylesheet, a skip link, the navigation, and the page's own content.
 * Pages are plain server-rendered HTML; scripts are separate static files (the CSP forbids inline
 * code), so the pages work without a build step and, except the copy button and the compressor,
 * without JavaScript at all.
 */

const HTML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Escape text for HTML content and quoted attribute values. */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] ?? c);
}

/** No inline scripts or styles anywhere; forms post only to this server; no framing. */
export const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

export interface PageOptions {
  title: string;
  /** The main content (already escaped HTML). */
  body: string;
  /** The signed-in session, for the navigation and the log-out form. */
  session?: { account: { email: string }; csrfToken: string } | undefined;
  /** Which navigation entry is the current page. */
  current?: 'compressor' | 'docs' | 'account' | 'login' | 'signup';
  /** Extra stylesheets and ES module scripts, served from this server (e.g. /static/compressor.js). */
  styles?: string[];
  scripts?: string[];
  /** A CSRF token for scripts that POST (read from <meta name="csrf-token">); default the session's. */
  csrfToken?: string;
}

function navLink(href: string, label: string, current: boolean): string {
  return `<li><a href="${href}"${current ? ' aria-current="page"' : ''}>${label}</a></li>`;
}

export function page(options: PageOptions): string {
  const { session, current } = options;
  const csrf = options.csrfToken ?? session?.csrfToken;
  const account = session
    ? `${navLink('/account', 'Account', current === 'account')}
      <li><form method="post" action="/logout" class="nav-form"><input type="hidden" name="_csrf" value="${escapeHtml(session.csrfToken)}"><button type="submit" class="link-button">Log out</button></form></li>`
    : `${navLink('/login', 'Log in', current === 'login')}
      ${navLink('/signup', 'Sign up', current === 'signup')}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(options.title)} · Compresso</title>
${csrf ? `<meta name="csrf-token" content="${escapeHtml(csrf)}">` : ''}
<link rel="stylesheet" href="/static/site.css">
${(options.styles ?? []).map((href) => `<link rel="stylesheet" href="${escapeHtml(href)}">`).join('\n')}
${(options.scripts ?? []).map((src) => `<script type="module" src="${escapeHtml(src)}"></script>`).join('\n')}
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="site-header">
  <nav aria-label="Main">
    <a class="brand" href="/">Compresso</a>
    <ul class="nav-links">
      ${navLink('/', 'Compressor', current === 'compressor')}
      ${navLink('/api/v1/docs', 'API reference', current === 'docs')}
      ${account}
    </ul>
  </nav>
  ${session ? `<p class="signed-in">Signed in as ${escapeHtml(session.account.email)}</p>` : ''}
</header>
<main id="main" tabindex="-1">
${options.body}
</main>
</body>
</html>`;
}

/** Send a page with the site's CSP; `no-store` because pages can hold account data or a one-time secret. */
export function sendPage(
  res: Response,
  html: string,
  status = 200,
  options: { formActionOrigins?: readonly string[] } = {},
): void {
  // A page whose form is answered with a redirect to another site (Stripe Checkout) must name that
  // site: browsers check form-action on every redirect of the submission.
  const origins = options.formActionOrigins ?? [];
  res.setHeader(
    'Content-Security-Policy',
    origins.length
      ? PAGE_CSP.replace("form-action 'self'", `form-action 'self' ${origins.join(' ')}`)
      : PAGE_CSP,
  );
  if (!res.getHeader('Referrer-Policy')) res.setHeader('Referrer-Policy', 'same-origin');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Frame-Options', 'DENY');
  res.status(status).type('html').send(html);
}
