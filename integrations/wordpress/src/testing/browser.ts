import type { WordPress } from './wordpress.ts';

/**
 * A small cookie-keeping HTTP session against a booted WordPress: what a browser does for a logged-in
 * administrator (log in, load a screen, post its form), without the rendering.
 */
export interface Page {
  status: number;
  location: string | null;
  text: string;
  /** The URLs a GET was redirected through before this answer (a browser follows them). */
  redirects: string[];
}

export class WpSession {
  private readonly cookies = new Map<string, string>();
  private readonly base: string;

  constructor(base: string) {
    this.base = base;
  }

  private remember(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair?.indexOf('=') ?? -1;
      if (!pair || eq < 0) continue;
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (value === '' || value === 'deleted' || /expires=Thu, 01[- ]Jan[- ]1970/i.test(line))
        this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  private header(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  async request(path: string, init: { method?: string; form?: Record<string, string> } = {}): Promise<Page> {
    const redirects: string[] = [];
    let page = await this.once(path, init);
    // GETs follow redirects as a browser does; a form post's redirect is the answer under test.
    while (!init.form && page.location && page.status >= 300 && page.status < 400 && redirects.length < 5) {
      redirects.push(page.location);
      page = await this.once(page.location, {});
    }
    return { ...page, redirects };
  }

  private async once(path: string, init: { method?: string; form?: Record<string, string> }) {
    const response = await fetch(new URL(path, `${this.base}/`), {
      method: init.method ?? (init.form ? 'POST' : 'GET'),
      redirect: 'manual',
      headers: {
        cookie: this.header(),
        ...(init.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      ...(init.form ? { body: new URLSearchParams(init.form).toString() } : {}),
    });
    this.remember(response);
    return {
      status: response.status,
      location: response.headers.get('location'),
      text: await response.text(),
    };
  }

  /** Sets a cookie, as a browser keeps one WordPress sent earlier. */
  setCookie(name: string, value: string): void {
    this.cookies.set(name, value);
  }
}

/** The value of a form field (input/textarea name="...") in an HTML page. */
export function fieldValue(html: string, name: string): string | undefined {
  const escaped = name.replace(/[[\]]/g, '\\$&');
  const input = new RegExp(`<input[^>]*name="${escaped}"[^>]*>`).exec(html)?.[0];
  return input ? /value="([^"]*)"/.exec(input)?.[1] : undefined;
}

/**
 * A session logged in as a user: WordPress itself issues the auth and logged-in cookies
 * (wp_generate_auth_cookie, as wp_set_auth_cookie does after the login form), so the session holds what
 * a browser holds after logging in, without a password.
 */
export async function sessionFor(wp: WordPress, login: string): Promise<WpSession> {
  const { value } = await wp.php<Record<string, string>>(`
    $user = get_user_by( 'login', '${login}' );
    $expires = time() + DAY_IN_SECONDS;
    compresso_test_out( array(
      AUTH_COOKIE => wp_generate_auth_cookie( $user->ID, $expires, 'auth' ),
      LOGGED_IN_COOKIE => wp_generate_auth_cookie( $user->ID, $expires, 'logged_in' ),
    ) );`);
  const session = new WpSession(wp.url);
  for (const [name, cookie] of Object.entries(value)) session.setCookie(name, encodeURIComponent(cookie));
  return session;
}
