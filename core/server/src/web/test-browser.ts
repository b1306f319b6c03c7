/** For tests of the web pages (not part of the server). */

/** A tiny browser: plain fetch with a cookie jar, no redirects followed (the tests look at each hop). */
export class Browser {
  readonly cookies = new Map<string, string>();
  readonly setCookieLines: string[] = [];
  readonly base: string;
  constructor(base: string) {
    this.base = base;
  }

  async request(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookies.size) headers.set('cookie', [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = await fetch(`${this.base}${path}`, { ...init, headers, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) {
      this.setCookieLines.push(line);
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (!value || /expires=Thu, 01 Jan 1970/i.test(line) || /max-age=0\b/i.test(line))
        this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return res;
  }

  get(path: string, headers: Record<string, string> = {}) {
    return this.request(path, { headers: { accept: 'text/html', ...headers } });
  }

  post(path: string, fields: Record<string, string>, headers: Record<string, string> = {}) {
    return this.request(path, {
      method: 'POST',
      headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(fields).toString(),
    });
  }

  /** The CSRF token of the first form on the page at `path`. */
  async token(path: string): Promise<string> {
    const html = await (await this.get(path)).text();
    const m = /name="_csrf" value="([^"]+)"/.exec(html);
    if (!m?.[1]) throw new Error(`no CSRF token on ${path}`);
    return m[1];
  }

  async submit(pagePath: string, action: string, fields: Record<string, string>) {
    return this.post(action, { _csrf: await this.token(pagePath), ...fields });
  }
}
