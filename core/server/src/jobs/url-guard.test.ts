import { lookup } from 'node:dns';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { InfoResult } from '@compresso/schema';
import { isCompressoError } from '@compresso/schema';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outputName } from '../compress-response.ts';
import { type FetchLimits, fetchUrl, isPublic, nameFromUrl, type UrlGuardPolicy } from './url-fetch.ts';

/**
 * The SSRF guard switched ON (allowPrivate: false), against real HTTP servers on loopback. One
 * loopback address, 127.0.0.2, stands in for "the public internet": the test's policy (an injected
 * resolver and address rule, which no configuration can set) counts it as public and nothing else.
 * Behind it, 127.0.0.1 on the SAME port is "the private network": a server that records every
 * request, so a fetch that reaches it is seen, not inferred from an error code.
 */

const PUBLIC_ADDRESS = '127.0.0.2';
const PRIVATE_ADDRESS = '127.0.0.1';
const image = Buffer.from('public image bytes');

let port: number;
let publicServer: Server;
let privateServer: Server;
const privateHits: string[] = [];

function listen(server: Server, host: string, wanted: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(wanted, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

beforeAll(async () => {
  publicServer = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const to = url.searchParams.get('to');
    if (to) {
      res.writeHead(302, { location: to });
      res.end();
    } else {
      res.setHeader('content-type', 'image/jpeg');
      res.end(image);
    }
  });
  privateServer = createServer((req, res) => {
    privateHits.push(req.url ?? '');
    res.setHeader('content-type', 'image/jpeg');
    res.end('internal secret');
  });
  // Port 0 for the public stand-in; the private one takes the same number on the other address, so
  // a connection steered to the private address lands on a listening server. Another process may
  // hold that number on 127.0.0.1: then both are chosen again.
  for (let attempt = 0; ; attempt++) {
    port = await listen(publicServer, PUBLIC_ADDRESS, 0);
    try {
      await listen(privateServer, PRIVATE_ADDRESS, port);
      break;
    } catch (error) {
      await new Promise<void>((resolve) => publicServer.close(() => resolve()));
      if (attempt >= 20) throw error;
    }
  }
});
afterAll(async () => {
  for (const server of [publicServer, privateServer]) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

/** A resolver that answers from a table (else as the system does), and counts what it was asked. */
function resolver(table: Record<string, () => string>) {
  const asked: string[] = [];
  const resolve: UrlGuardPolicy['resolve'] = (hostname, callback) => {
    asked.push(hostname);
    const answer = table[hostname];
    if (!answer) {
      // Any other name (localhost) as the system resolves it.
      lookup(hostname, { all: true }, (error, addresses) => callback(error, addresses ?? []));
      return;
    }
    const address = answer();
    setImmediate(() => callback(null, [{ address, family: 4 }]));
  };
  return { resolve, asked };
}

function guarded(policy: UrlGuardPolicy): FetchLimits {
  return {
    allowPrivate: false,
    timeoutMs: 10_000,
    maxBytes: 10_000,
    guard: { isPublicAddress: (a) => a === PUBLIC_ADDRESS || isPublic(a), ...policy },
  };
}

async function outcome(work: Promise<{ bytes: Buffer }>): Promise<string> {
  try {
    return `ok: ${(await work).bytes.toString()}`;
  } catch (error) {
    if (isCompressoError(error)) return `${error.code}: ${error.message}`;
    throw error;
  }
}

describe('the SSRF guard on, with a loopback stand-in for a public host', () => {
  it('the stand-in itself is fetched (the test policy is what lets it through)', async () => {
    const dns = resolver({ 'cdn.example': () => PUBLIC_ADDRESS });
    expect(await outcome(fetchUrl(`http://cdn.example:${port}/a.jpg`, guarded(dns)))).toBe(
      'ok: public image bytes',
    );
    // Without the test's address rule, the same name is refused: the production rule is unchanged.
    expect(
      await outcome(
        fetchUrl(`http://cdn.example:${port}/a.jpg`, {
          ...guarded(dns),
          guard: { resolve: dns.resolve },
        }),
      ),
    ).toMatch(/^URL_NOT_ALLOWED: .*cdn\.example resolves to 127\.0\.0\.2/);
  });

  it('a redirect from the public host to a private address is refused, and the private server sees nothing', async () => {
    const dns = resolver({
      'cdn.example': () => PUBLIC_ADDRESS,
      'intranet.example': () => PRIVATE_ADDRESS,
    });
    const before = privateHits.length;
    for (const target of [
      `http://${PRIVATE_ADDRESS}:${port}/literal`,
      `http://intranet.example:${port}/by-name`,
      `http://[::ffff:${PRIVATE_ADDRESS}]:${port}/mapped`,
      `http://localhost:${port}/localhost`,
    ]) {
      const start = `http://cdn.example:${port}/hop?to=${encodeURIComponent(target)}`;
      expect(await outcome(fetchUrl(start, guarded(dns))), target).toMatch(/^URL_NOT_ALLOWED/);
    }
    // Two redirects deep: public → public → private.
    const inner = `http://cdn.example:${port}/hop?to=${encodeURIComponent(`http://intranet.example:${port}/deep`)}`;
    expect(
      await outcome(fetchUrl(`http://cdn.example:${port}/hop?to=${encodeURIComponent(inner)}`, guarded(dns))),
    ).toMatch(/^URL_NOT_ALLOWED/);
    expect(privateHits.slice(before)).toEqual([]);
  });

  it('DNS rebinding: the address checked is the address connected to', async () => {
    // The name answers public once, private ever after (as a rebinding attacker's DNS server does).
    let lookups = 0;
    const dns = resolver({ 'rebind.example': () => (lookups++ === 0 ? PUBLIC_ADDRESS : PRIVATE_ADDRESS) });
    const before = privateHits.length;
    // One connection, one resolution: a guard that checked the name and then let the socket resolve
    // it again would connect to 127.0.0.1 and read "internal secret".
    expect(await outcome(fetchUrl(`http://rebind.example:${port}/a.jpg`, guarded(dns)))).toBe(
      'ok: public image bytes',
    );
    expect(dns.asked).toEqual(['rebind.example']);
    // The next connection to the name (a redirect back to itself) meets the private answer: refused.
    const again = `http://rebind.example:${port}/hop?to=${encodeURIComponent(`http://rebind.example:${port}/b.jpg`)}`;
    expect(await outcome(fetchUrl(again, guarded(dns)))).toMatch(
      /^URL_NOT_ALLOWED: .*rebind\.example resolves to 127\.0\.0\.1/,
    );
    expect(privateHits.slice(before)).toEqual([]);
  });

  it('a name with one public and one private answer is refused outright (no racing to the private one)', async () => {
    const both: UrlGuardPolicy['resolve'] = (_hostname, callback) =>
      callback(null, [
        { address: PUBLIC_ADDRESS, family: 4 },
        { address: PRIVATE_ADDRESS, family: 4 },
      ]);
    const before = privateHits.length;
    expect(await outcome(fetchUrl(`http://split.example:${port}/a.jpg`, guarded({ resolve: both })))).toMatch(
      /^URL_NOT_ALLOWED: .*resolves to 127\.0\.0\.1/,
    );
    expect(privateHits.slice(before)).toEqual([]);
  });

  it("a URL item's download name is one plain file name, whatever the URL spells", () => {
    const webp = { output_format: 'webp' } as InfoResult;
    for (const [url, name] of [
      ['https://cdn.example/..%2F..%2Fx.jpg', 'x.webp'],
      ['https://cdn.example/a/..%5C..%5Cy.jpg', 'y.webp'],
      ['https://cdn.example/%2Fetc%2Fpasswd', 'passwd.webp'],
      ['https://cdn.example/a%0Ab%1B.jpg', 'a_b_.webp'],
      ['https://cdn.example/..', 'image.webp'],
    ] as const) {
      expect(outputName(nameFromUrl(url), webp), url).toBe(name);
    }
  });
});
