import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { CompressoError } from '@compresso/schema';
import ipaddr from 'ipaddr.js';

/**
 * Fetching a URL a caller gave us is server-side request forgery waiting to happen: the server
 * stands inside a network the caller cannot see (cloud metadata at 169.254.169.254, the database,
 * the admin port of a sidecar). The guard, unless `allowPrivate`:
 * - only http: and https:, no credentials in the URL;
 * - every address a name resolves to (A and AAAA) must be public unicast; one private answer refuses
 *   the URL, so a name that resolves to both cannot be raced into the private one;
 * - the check runs inside the socket's own lookup, so the address checked is the address connected
 *   to (no DNS-rebinding window between a check and a second resolution);
 * - redirects are followed by hand, at most MAX_REDIRECTS, each target checked the same way;
 * - the body is cut off past maxBytes and the whole fetch, redirects included, past timeoutMs.
 * ipaddr.js classifies addresses (its range table covers the special-purpose registries), rather
 * than a hand-written list of prefixes.
 */
export interface FetchLimits {
  allowPrivate: boolean;
  timeoutMs: number;
  maxBytes: number;
  /**
   * The guard's policy, for tests that need a "public" host on loopback; never read from the
   * environment or config, so a deployment cannot loosen it. `resolve`: name → addresses
   * (default dns.lookup). `isPublicAddress`: which addresses may be connected to (default isPublic).
   */
  guard?: UrlGuardPolicy;
}

export interface UrlGuardPolicy {
  resolve?: (hostname: string, callback: (error: Error | null, addresses: LookupAddress[]) => void) => void;
  isPublicAddress?: (address: string) => boolean;
}

function systemResolve(
  hostname: string,
  callback: (error: Error | null, addresses: LookupAddress[]) => void,
): void {
  dnsLookup(hostname, { all: true }, (error, addresses) => callback(error, addresses ?? []));
}

export interface Fetched {
  bytes: Buffer;
  /** The final URL, after redirects. */
  url: string;
}

const MAX_REDIRECTS = 5;

/** Throws URL_NOT_ALLOWED unless `raw` is an http(s) URL without credentials (no network involved). */
export function checkUrlSyntax(raw: string, field: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw notAllowed(field, raw, 'an absolute http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw notAllowed(field, raw, 'an http:// or https:// URL');
  }
  if (url.username || url.password) throw notAllowed(field, raw, 'a URL without user name or password');
  return url;
}

/** A literal address in the URL can be judged before any network traffic. */
export function checkLiteralHost(
  url: URL,
  field: string,
  allowPrivate: boolean,
  allowed: (address: string) => boolean = isPublic,
): void {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!allowPrivate && isIP(host) && !allowed(host)) {
    throw notAllowed(field, url.href, 'a public address (not private, loopback, link-local or reserved)');
  }
}

export function isPublic(address: string): boolean {
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range() === 'unicast';
}

function notAllowed(field: string, received: string, expected: string): CompressoError {
  return new CompressoError('URL_NOT_ALLOWED', `${field}: expected ${expected}.`, {
    details: [{ field, expected, received: received.slice(0, 100) }],
  });
}

function fetchFailed(url: string, why: string): CompressoError {
  return new CompressoError('URL_FETCH_FAILED', `Fetching ${url.slice(0, 200)} failed: ${why}.`);
}

/** dns.lookup, but every answer must be public; the socket connects to one of the checked answers. */
function guardedLookup(field: string, url: string, policy: UrlGuardPolicy = {}): LookupFunction {
  const resolve = policy.resolve ?? systemResolve;
  const allowed = policy.isPublicAddress ?? isPublic;
  return (hostname, options, callback) => {
    // One resolution per connection, checked and handed to the socket as is: the address checked is
    // the address connected to, whatever the name answers the next time (DNS rebinding).
    resolve(hostname, (error, answers) => {
      if (error) {
        callback(error, '', 0);
        return;
      }
      const family = (options as { family?: number | string }).family;
      const wanted = family === 4 || family === 'IPv4' ? 4 : family === 6 || family === 'IPv6' ? 6 : 0;
      const list = wanted ? answers.filter((a) => a.family === wanted) : answers;
      const refused = list.find((a) => !allowed(a.address));
      if (refused || list.length === 0) {
        callback(
          notAllowed(
            field,
            url,
            `a host with only public addresses (${hostname} resolves to ${refused?.address ?? 'nothing'})`,
          ),
          '',
          0,
        );
        return;
      }
      if ((options as { all?: boolean }).all) callback(null, list);
      else callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

/** GET one URL within the limits, following redirects; the body as bytes. */
export async function fetchUrl(raw: string, limits: FetchLimits, field = 'url'): Promise<Fetched> {
  const signal = AbortSignal.timeout(limits.timeoutMs);
  let url = checkUrlSyntax(raw, field);
  for (let hop = 0; ; hop++) {
    checkLiteralHost(url, field, limits.allowPrivate, limits.guard?.isPublicAddress);
    const res = await get(url, limits, field, signal);
    const status = res.statusCode ?? 0;
    if (status >= 300 && status < 400 && res.headers.location) {
      res.resume();
      if (hop >= MAX_REDIRECTS) throw fetchFailed(raw, `more than ${MAX_REDIRECTS} redirects`);
      url = checkUrlSyntax(new URL(res.headers.location, url).href, field);
      continue;
    }
    if (status < 200 || status > 299) {
      res.resume();
      throw fetchFailed(url.href, `the server answered HTTP ${status}`);
    }
    const declared = Number(res.headers['content-length']);
    if (Number.isFinite(declared) && declared > limits.maxBytes) {
      res.destroy();
      throw tooLarge(url.href, limits.maxBytes);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > limits.maxBytes) {
          res.destroy();
          throw tooLarge(url.href, limits.maxBytes);
        }
        chunks.push(chunk);
      }
    } catch (error) {
      if (error instanceof CompressoError) throw error;
      throw fetchFailed(
        url.href,
        signal.aborted ? `no complete answer within ${limits.timeoutMs} ms` : (error as Error).message,
      );
    }
    return { bytes: Buffer.concat(chunks), url: url.href };
  }
}

function tooLarge(url: string, maxBytes: number): CompressoError {
  return new CompressoError(
    'FILE_TOO_LARGE',
    `${url.slice(0, 200)}: larger than the limit of ${maxBytes} bytes.`,
    {
      details: { limit_bytes: maxBytes },
    },
  );
}

function get(url: URL, limits: FetchLimits, field: string, signal: AbortSignal): Promise<IncomingMessage> {
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'GET',
        signal,
        headers: { 'user-agent': 'compresso-batch/1', accept: 'image/*' },
        // No agent: a pooled connection could have been opened to an address checked for another URL.
        agent: false,
        ...(limits.allowPrivate ? {} : { lookup: guardedLookup(field, url.href, limits.guard) }),
      },
      resolve,
    );
    req.on('error', (error) => {
      if (error instanceof CompressoError) reject(error);
      else if (signal.aborted) reject(fetchFailed(url.href, `no answer within ${limits.timeoutMs} ms`));
      else reject(fetchFailed(url.href, (error as NodeJS.ErrnoException).code ?? error.message));
    });
    req.end();
  });
}

/** A download name from the URL's last path segment. */
export function nameFromUrl(raw: string): string {
  try {
    const last = new URL(raw).pathname.split('/').filter(Boolean).pop();
    return last ? decodeURIComponent(last).slice(0, 200) : 'image';
  } catch {
    return 'image';
  }
}
