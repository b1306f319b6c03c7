import { readdirSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, relative } from 'node:path';

/**
 * Test support: a compress endpoint run by a hostile (or compromised) server, on loopback, port 0.
 * It answers every POST /api/v1/compress like a Compresso server — all the fact headers, real
 * bytes — but with the `Content-Disposition` and `X-Output-Format` the test queued, so a client can
 * be shown never to write outside the folder it was given.
 */
export interface HostileServer {
  url: string;
  /** Answers still to give, in order; when empty, an honest `image.webp`. */
  queue: { disposition?: string; format?: string }[];
  /** The Content-Disposition headers actually sent. */
  sent: string[];
  close(): Promise<void>;
}

/** Content-Disposition values a hostile server may send (control characters through RFC 8187). */
export const HOSTILE_DISPOSITIONS = [
  'attachment; filename="../escaped.webp"',
  'attachment; filename="../../escaped.webp"',
  'attachment; filename="/etc/x.webp"',
  'attachment; filename="..\\\\x.webp"',
  'attachment; filename="a/b.webp"',
  'attachment; filename=".."',
  'attachment; filename=""',
  'attachment; filename="C:x.webp"',
  'attachment; filename="a\tb.webp"',
  "attachment; filename*=UTF-8''..%2F..%2Fx.webp",
  "attachment; filename*=UTF-8''%2Fetc%2Fx.webp",
  "attachment; filename*=UTF-8''..%5Cx.webp",
  "attachment; filename*=UTF-8''x%0A.webp",
  "attachment; filename*=UTF-8''x%00.webp",
  "attachment; filename*=UTF-8''x%1B%5B2J.webp",
  'attachment; filename="ok.webp"; filename*=UTF-8\'\'..%2F..%2Fx.webp',
];

/** X-Output-Format values that would put a path into the extension. */
export const HOSTILE_FORMATS = ['../../escaped', '/../../../escaped', 'webp/../../../escaped', '..'];

/** A few bytes that are what the server says they are (the client never decodes them). */
const BODY = Buffer.from('RIFF\x24\x00\x00\x00WEBPVP8 not really an image', 'latin1');

export async function startHostileServer(): Promise<HostileServer> {
  const state: HostileServer = {
    url: '',
    queue: [],
    sent: [],
    close: async () => {},
  };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url?.startsWith('/api/v1/compress')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error":{"code":"NOT_FOUND","message":"no","request_id":"x"}}');
        return;
      }
      const next = state.queue.shift() ?? {};
      const disposition = next.disposition ?? 'attachment; filename="image.webp"';
      state.sent.push(disposition);
      res.writeHead(200, {
        'content-type': 'image/webp',
        'content-disposition': disposition,
        'content-length': String(BODY.length),
        'x-input-size': '1000',
        'x-output-size': String(BODY.length),
        'x-savings-percent': '96.4',
        'x-width': '8',
        'x-height': '8',
        'x-input-width': '8',
        'x-input-height': '8',
        'x-input-format': 'jpeg',
        'x-output-format': next.format ?? 'webp',
        'x-quality': '80',
        'x-auto-quality': 'false',
        'x-optimized': 'true',
        'x-metadata-stripped': 'true',
        'x-request-id': 'hostile',
      });
      res.end(BODY);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

/** Every file under `root`, as paths relative to it (`/` separated). */
export function filesUnder(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else found.push(relative(root, path).split('\\').join('/'));
    }
  };
  walk(root);
  return found.sort();
}
