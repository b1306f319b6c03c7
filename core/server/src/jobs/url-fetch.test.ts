import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isCompressoError } from '@compresso/schema';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkUrlSyntax, fetchUrl, isPublic, nameFromUrl } from './url-fetch.ts';

async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    if (isCompressoError(error)) return `${error.code}: ${error.message}`;
    throw error;
  }
  return 'no error';
}

let server: Server;
let port: number;
const image = Buffer.alloc(5000, 7);

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/image.jpg') {
      res.setHeader('content-type', 'image/jpeg');
      res.end(image);
    } else if (url.pathname === '/hop') {
      res.writeHead(302, { location: `/image.jpg` });
      res.end();
    } else if (url.pathname === '/loop') {
      res.writeHead(301, { location: '/loop' });
      res.end();
    } else if (url.pathname === '/to-file') {
      res.writeHead(302, { location: 'file:///etc/passwd' });
      res.end();
    } else if (url.pathname === '/chunked-big') {
      // No Content-Length: the cap must cut the stream itself.
      for (let i = 0; i < 20; i++) res.write(Buffer.alloc(1000));
      res.end();
    } else if (url.pathname === '/slow') {
      res.write('x');
      setTimeout(() => res.end(), 3000).unref();
    } else {
      res.statusCode = 404;
      res.end('no');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

const open = { allowPrivate: true, timeoutMs: 2000, maxBytes: 10_000 };
const guarded = { ...open, allowPrivate: false };

describe('the SSRF guard', () => {
  it('only public unicast addresses pass', () => {
    for (const address of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '255.255.255.255',
      '224.0.0.1',
      '::1',
      '::',
      'fd00:ec2::254',
      'fe80::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
    ]) {
      expect(isPublic(address), address).toBe(false);
    }
    for (const address of ['8.8.8.8', '93.184.216.34', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      expect(isPublic(address), address).toBe(true);
    }
  });

  it('refuses loopback by literal address and by a name that resolves to it, before connecting', async () => {
    expect(await codeOf(fetchUrl(`http://127.0.0.1:${port}/image.jpg`, guarded))).toMatch(/^URL_NOT_ALLOWED/);
    expect(await codeOf(fetchUrl(`http://[::1]:${port}/image.jpg`, guarded))).toMatch(/^URL_NOT_ALLOWED/);
    // The WHATWG parser turns this spelling into 127.0.0.1 before the check sees it.
    expect(await codeOf(fetchUrl(`http://0x7f.1:${port}/image.jpg`, guarded))).toMatch(/^URL_NOT_ALLOWED/);
    expect(await codeOf(fetchUrl(`http://localhost:${port}/image.jpg`, guarded))).toMatch(
      /^URL_NOT_ALLOWED: url: expected a host with only public addresses \(localhost resolves to/,
    );
  });

  it('refuses schemes other than http(s) and credentials, with the field named', () => {
    for (const raw of [
      'file:///etc/passwd',
      'gopher://x/',
      'ftp://example.com/a.jpg',
      'not a url',
      'https://u:p@example.com/',
    ]) {
      try {
        checkUrlSyntax(raw, 'urls[3]');
        expect.unreachable(raw);
      } catch (error) {
        expect(isCompressoError(error) && error.code).toBe('URL_NOT_ALLOWED');
        expect((error as Error).message).toMatch(/^urls\[3\]: expected/);
      }
    }
  });
});

describe('fetching (private addresses allowed, as in tests and closed networks)', () => {
  it('gets the bytes, following a redirect', async () => {
    const got = await fetchUrl(`http://127.0.0.1:${port}/hop`, open);
    expect(got.bytes.equals(image)).toBe(true);
    expect(got.url).toBe(`http://127.0.0.1:${port}/image.jpg`);
  });

  it('re-checks every redirect target and bounds the number of redirects', async () => {
    expect(await codeOf(fetchUrl(`http://127.0.0.1:${port}/to-file`, open))).toMatch(/^URL_NOT_ALLOWED/);
    expect(await codeOf(fetchUrl(`http://127.0.0.1:${port}/loop`, open))).toMatch(
      /^URL_FETCH_FAILED: .*more than 5 redirects/,
    );
  });

  it('caps the size (declared or streamed), the time, and reports an origin error', async () => {
    expect(await codeOf(fetchUrl(`http://127.0.0.1:${port}/image.jpg`, { ...open, maxBytes: 100 }))).toMatch(
      /^FILE_TOO_LARGE/,
    );
    expect(await codeOf(fetchUrl(`http://127.0.0.1:${port}/chunked-big`, open))).toMatch(/^FILE_TOO_LARGE/);
    // The time cap is shown by the error it gives (/slow ends its body only after 3 s: without the cap
    // the fetch would succeed), not by a stopwatch.
    expect(await codeOf(fetchUrl(`http://127.0.0.1:${port}/slow`, { ...open, timeoutMs: 300 }))).toMatch(
      /^URL_FETCH_FAILED: .*within 300 ms/,
    );
    expect(await codeOf(fetchUrl(`http://127.0.0.1:${port}/missing.jpg`, open))).toMatch(
      /^URL_FETCH_FAILED: .*HTTP 404/,
    );
    expect(await codeOf(fetchUrl('http://127.0.0.1:1/x.jpg', open))).toMatch(
      /^URL_FETCH_FAILED: .*ECONNREFUSED/,
    );
  });

  it('names an item after the last path segment', () => {
    expect(nameFromUrl('https://cdn.example.com/a/b/photo%20one.jpg?x=1')).toBe('photo one.jpg');
    expect(nameFromUrl('https://cdn.example.com/')).toBe('image');
  });
});
