import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildSchema, execute, type GraphQLSchema, graphql, parse, validate } from 'graphql';
import sharp from 'sharp';
import { ADMIN_SDL } from './admin-schema.ts';
import { bulkLines, bulkQueryProblem, bulkView, type FakeBulkOperation } from './bulk.ts';
import { CostBucket, requestedCost } from './cost.ts';

/**
 * A loopback stand-in for Shopify, for tests and for running the app without a store: OAuth
 * (authorize with a signed callback, access_token), a part of the GraphQL Admin API (see
 * admin-schema.ts) with calculated cost and the leaky bucket, the staged-upload target, a CDN for
 * the files, and webhook deliveries signed as Shopify signs them. It follows Shopify's documented
 * contract; the app reaches it through the real @shopify/shopify-api library, whose requests to
 * `https://<shop>.myshopify.com/…` are rewritten to `<fake>/shops/<shop>/…` (see `rewrite`).
 *
 * What it does not model: the consent screen (authorize approves at once, as a merchant clicking
 * Install), refunds of unused query cost, and Shopify's retries of failed deliveries (tests call
 * `redeliver`).
 */

export interface FakeShopifyOptions {
  /** The app's client id and secret, as in the Partner dashboard. */
  apiKey: string;
  apiSecret: string;
  /** Scopes a token is granted (default: what authorize asked for). */
  grantedScopes?: string;
  /** The leaky bucket per shop (default 2000 points, 100 a second: Shopify Plus-like). */
  bucket?: { maximumAvailable: number; restoreRate: number };
  /** Where webhook deliveries go: maps a subscription's callback URL to one this machine reaches. */
  deliverTo?: (callbackUrl: string) => string;
  /** Compliance webhooks' endpoint (shopify.app.toml's compliance_topics uri), for `sendCompliance`. */
  complianceUrl?: string;
  /** Versions the API answers; others are 404 as on Shopify. */
  apiVersions?: readonly string[];
  /** The bucket's clock in ms (default performance.now): a test's virtual clock drives the refill. */
  now?: () => number;
}

/** See FakeShopify.onEvent. */
export type FakeEvent =
  | { kind: 'download'; shop: string; fileId: string }
  | { kind: 'upload'; shop: string; filename: string }
  | { kind: 'fileUpdate' | 'fileUpdated'; shop: string; fileIds: string[] };

export type FileStatus = 'UPLOADED' | 'PROCESSING' | 'READY' | 'FAILED';

export interface FakeFile {
  id: string;
  shop: string;
  filename: string;
  mimeType: string;
  bytes: Buffer;
  width: number;
  height: number;
  /** Bumped on each content change: the `?v=` of the CDN URL. */
  version: number;
  alt: string;
  status: FileStatus;
  errors: { code: string; message: string }[];
  createdAt: string;
  updatedAt: string;
  productIds: Set<string>;
}

export interface FakeProduct {
  id: string;
  shop: string;
  title: string;
  handle: string;
  vendor: string;
  productType: string;
  mediaIds: string[];
  createdAt: string;
  updatedAt: string;
  /** Its variants and the media each shows; none: Shopify's single "Default Title" variant. */
  variants?: { id: string; title: string; mediaIds: string[] }[];
}

interface Subscription {
  id: string;
  shop: string;
  topic: string;
  callbackUrl: string;
  format: 'JSON' | 'XML';
  createdAt: string;
}

interface StagedUpload {
  token: string;
  shop: string;
  filename: string;
  mimeType: string;
  bytes?: Buffer;
}

export interface Delivery {
  webhookId: string;
  shop: string;
  topic: string;
  url: string;
  body: string;
  status: number;
  /** How long the app took to answer, in ms. */
  answeredInMs: number;
  sentAt: number;
}

interface ShopState {
  domain: string;
  name: string;
  email: string;
  tokens: Map<string, string>;
  codes: Map<string, string>;
  bucket: CostBucket;
}

const DEFAULT_VERSIONS = [
  '2025-01',
  '2025-04',
  '2025-07',
  '2025-10',
  '2026-01',
  '2026-04',
  '2026-07',
  '2026-10',
];

const SHOP_DOMAIN = /^[a-z0-9][a-z0-9-]*\.myshopify\.com$/;

const gidNumber = (gid: string) => Number(gid.split('/').pop());

function hmacHex(secret: string, message: string): string {
  return createHmac('sha256', secret).update(message).digest('hex');
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    'content-type': typeof body === 'string' ? 'text/plain' : 'application/json',
    ...headers,
  });
  res.end(text);
}

export class FakeShopify {
  readonly deliveries: Delivery[] = [];
  /** While true, fileUpdate leaves files PROCESSING until `finishProcessing()` (to test the wait). */
  holdProcessing = false;
  /** Files whose next content change Shopify will reject (status FAILED), by file id. */
  readonly failNextUpdate = new Set<string>();
  /**
   * CDN faults by file id, until removed: `error` answers 500, `reset` drops the connection without
   * an answer (as a refused or broken connection looks to fetch), `not-image` serves an HTML page
   * with status 200 and the file's image content type (a misconfigured edge). An `error` or `reset`
   * fails the first download of the file; later downloads wait until the fault is removed and then
   * succeed, so a test can look at the state after the first failure before any retry gets through,
   * however slow the machine (no race with the queue's backoff).
   */
  readonly cdnFaults = new CdnFaults();
  /**
   * A test's hook at a moment of an image's replacement, awaited before the fake goes on: `download`
   * (the CDN is about to serve a file's bytes), `upload`
   * (the staged bytes are stored, the uploader not yet answered), `fileUpdate` (a fileUpdate with a new
   * originalSource arrived, not yet applied), `fileUpdated` (applied, not yet answered). Fault tests
   * stop Redis or the database, uninstall the shop or kill the worker exactly there.
   */
  onEvent: ((event: FakeEvent) => void | Promise<void>) | undefined;
  /** GraphQL requests answered, THROTTLED ones included. */
  graphqlRequests = 0;
  throttledRequests = 0;
  /**
   * Per shop, what the Admin API calls spent: the dearest single request and the lowest the bucket
   * fell to after a charged request (a THROTTLED answer charges nothing) — what a test checks a
   * paced client against.
   */
  readonly costStats = new Map<
    string,
    { maxRequestedCost: number; lowestAvailable: number; maximumAvailable: number }
  >();
  /** While true, bulk operations stay RUNNING after their result is ready, until `finishBulk()`. */
  holdBulk = false;
  private readonly bulkOps = new Map<string, FakeBulkOperation>();
  private readonly bulkHeld = new Set<() => void>();
  private readonly documents = new Map<string, ReturnType<typeof parse>>();

  private server: Server | undefined;
  private base = '';
  private readonly schema: GraphQLSchema;
  private readonly shops = new Map<string, ShopState>();
  private readonly products = new Map<string, FakeProduct>();
  private readonly files = new Map<string, FakeFile>();
  private readonly subscriptions = new Map<string, Subscription>();
  private readonly uploads = new Map<string, StagedUpload>();
  private readonly processing = new Map<string, { bytes: Buffer; filename?: string }>();
  private nextId = 1000;
  private readonly listeners = new Set<() => void>();

  readonly options: FakeShopifyOptions;

  constructor(options: FakeShopifyOptions) {
    this.options = options;
    this.schema = buildSchema(ADMIN_SDL);
  }

  /** Listen on 127.0.0.1, a free port. */
  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      this.route(req, res).catch((error: unknown) => {
        if (!res.headersSent) send(res, 500, { errors: String(error) });
        else res.destroy();
      });
    });
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
    this.server = undefined;
  }

  /** The fake's own address (for the CDN and upload URLs it hands out). */
  get url(): string {
    return this.base;
  }

  /**
   * Where a request the app makes to Shopify really goes: `https://<shop>.myshopify.com/<path>` →
   * `<fake>/shops/<shop>/<path>`; other URLs unchanged. Give it to the library as its fetch.
   */
  rewrite(url: string): string {
    const parsed = new URL(url);
    if (parsed.protocol === 'https:' && SHOP_DOMAIN.test(parsed.hostname)) {
      return `${this.base}/shops/${parsed.hostname}${parsed.pathname}${parsed.search}`;
    }
    return url;
  }

  /** A fetch that sends Shopify-bound requests here; what @shopify/shopify-api is given in tests. */
  readonly fetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (input instanceof Request) return fetch(new Request(this.rewrite(input.url), input), init);
    return fetch(this.rewrite(String(input)), init);
  };

  // ---------------------------------------------------------------- the store, as a merchant sees it

  /** A development store; its domain is `<name>.myshopify.com`. */
  addShop(name: string, email = `owner@${name}.example`): string {
    const domain = `${name}.myshopify.com`;
    const bucket = this.options.bucket ?? { maximumAvailable: 2000, restoreRate: 100 };
    this.shops.set(domain, {
      domain,
      name,
      email,
      tokens: new Map(),
      codes: new Map(),
      bucket: new CostBucket(bucket.maximumAvailable, bucket.restoreRate, this.options.now),
    });
    return domain;
  }

  /** A product with images, as the merchant uploads them; sends products/create to subscribers. */
  async createProduct(
    shop: string,
    input: {
      title: string;
      vendor?: string;
      productType?: string;
      images: { bytes: Buffer | Uint8Array; filename: string; alt?: string | null }[];
      /** Variants by title, each with the indexes (in `images`) of the images it shows. */
      variants?: { title: string; images: number[] }[];
    },
  ): Promise<FakeProduct> {
    this.shopState(shop);
    const now = new Date().toISOString();
    const product: FakeProduct = {
      id: `gid://shopify/Product/${this.nextId++}`,
      shop,
      title: input.title,
      handle: input.title.toLowerCase().replace(/[^a-z0-9]+/g, '-'),
      vendor: input.vendor ?? 'Fake Vendor',
      productType: input.productType ?? '',
      mediaIds: [],
      createdAt: now,
      updatedAt: now,
    };
    this.products.set(product.id, product);
    for (const image of input.images) {
      const meta = await sharp(image.bytes).metadata();
      const file: FakeFile = {
        id: `gid://shopify/MediaImage/${this.nextId++}`,
        shop,
        filename: image.filename,
        mimeType: `image/${meta.format === 'jpeg' ? 'jpeg' : meta.format}`,
        bytes: Buffer.from(image.bytes),
        width: meta.width ?? 0,
        height: meta.height ?? 0,
        version: 1,
        alt: image.alt ?? '',
        status: 'READY',
        errors: [],
        createdAt: now,
        updatedAt: now,
        productIds: new Set([product.id]),
      };
      this.files.set(file.id, file);
      product.mediaIds.push(file.id);
    }
    if (input.variants)
      product.variants = input.variants.map((v) => ({
        id: `gid://shopify/ProductVariant/${this.nextId++}`,
        title: v.title,
        mediaIds: v.images.map((i) => product.mediaIds[i]).filter((id): id is string => !!id),
      }));
    await this.emit(shop, 'PRODUCTS_CREATE', this.productPayload(product));
    return product;
  }

  /** A change the merchant makes (title), firing products/update. */
  async touchProduct(productId: string, title?: string): Promise<void> {
    const product = this.products.get(productId);
    if (!product) throw new Error(`no product ${productId}`);
    if (title) product.title = title;
    product.updatedAt = new Date().toISOString();
    await this.emit(product.shop, 'PRODUCTS_UPDATE', this.productPayload(product));
  }

  file(id: string): FakeFile | undefined {
    return this.files.get(id);
  }

  product(id: string): FakeProduct | undefined {
    return this.products.get(id);
  }

  /** The CDN URL a file is served at now. */
  fileUrl(file: FakeFile): string {
    return `${this.base}/cdn/${file.shop}/files/${gidNumber(file.id)}/${encodeURIComponent(file.filename)}?v=${file.version}`;
  }

  subscriptionsOf(shop: string): { topic: string; callbackUrl: string }[] {
    return [...this.subscriptions.values()]
      .filter((s) => s.shop === shop)
      .map((s) => ({ topic: s.topic, callbackUrl: s.callbackUrl }));
  }

  /**
   * An Admin API token for the shop without OAuth, as a store's own custom app gets one in the admin:
   * for tests of the API side alone (the port battery).
   */
  grantToken(shop: string, scopes = 'write_products,write_files'): string {
    const token = `shpat_${randomBytes(16).toString('hex')}`;
    this.shopState(shop).tokens.set(token, scopes);
    return token;
  }

  tokensOf(shop: string): string[] {
    return [...this.shopState(shop).tokens.keys()];
  }

  /** The merchant removes the app: tokens stop working, app/uninstalled is sent. */
  async uninstall(shop: string): Promise<Delivery[]> {
    const state = this.shopState(shop);
    state.tokens.clear();
    const sent = await this.emit(shop, 'APP_UNINSTALLED', {
      id: gidNumber(`gid://shopify/Shop/${this.shopNumber(shop)}`),
      name: state.name,
      email: state.email,
      domain: shop,
      myshopify_domain: shop,
    });
    for (const [id, sub] of this.subscriptions) if (sub.shop === shop) this.subscriptions.delete(id);
    return sent;
  }

  /** A compliance webhook (customers/data_request, customers/redact, shop/redact), as Shopify sends it. */
  async sendCompliance(shop: string, topic: string, payload: Record<string, unknown>): Promise<Delivery> {
    if (!this.options.complianceUrl) throw new Error('complianceUrl is not set');
    return this.deliver(shop, topic, this.options.complianceUrl, JSON.stringify(payload), randomUUID());
  }

  /** Send a delivery again, same webhook id and body (Shopify does on a timeout or a non-2xx). */
  async redeliver(delivery: Delivery): Promise<Delivery> {
    return this.deliver(delivery.shop, delivery.topic, delivery.url, delivery.body, delivery.webhookId, true);
  }

  /** Files still PROCESSING complete (when holdProcessing is on). */
  async finishProcessing(): Promise<void> {
    for (const id of [...this.processing.keys()]) await this.process(id);
  }

  /** Resolves on the next change of a file's status or a delivery (for tests that wait on events). */
  changed(): Promise<void> {
    return new Promise((resolve) => {
      const listener = () => {
        this.listeners.delete(listener);
        resolve();
      };
      this.listeners.add(listener);
    });
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  // ---------------------------------------------------------------- HTTP

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.base);
    const parts = url.pathname.split('/').filter(Boolean);
    if (parts[0] === 'shops' && parts[1]) {
      const shop = parts[1];
      const rest = `/${parts.slice(2).join('/')}`;
      if (!this.shops.has(shop)) return send(res, 404, 'Not Found');
      if (req.method === 'GET' && rest === '/admin/oauth/authorize') return this.authorize(shop, url, res);
      if (req.method === 'POST' && rest === '/admin/oauth/access_token')
        return this.accessToken(shop, req, res);
      const api = /^\/admin\/api\/([^/]+)\/graphql\.json$/.exec(rest);
      if (api && req.method === 'POST') return this.graphqlEndpoint(shop, api[1] as string, req, res);
      return send(res, 404, 'Not Found');
    }
    if (parts[0] === 'upload' && parts[1]) return this.upload(parts[1], req, res);
    if (parts[0] === 'bulk' && parts[1] && req.method === 'GET') return this.bulkResult(parts[1], res);
    if (parts[0] === 'cdn' && req.method === 'GET') return this.cdn(parts, res);
    send(res, 404, 'Not Found');
  }

  private authorize(shop: string, url: URL, res: ServerResponse): void {
    const q = url.searchParams;
    const redirectUri = q.get('redirect_uri');
    if (q.get('client_id') !== this.options.apiKey) {
      send(res, 400, 'Oauth error invalid_request: The client_id is invalid.');
      return;
    }
    if (!redirectUri || !q.get('state')) {
      send(res, 400, 'Oauth error invalid_request: missing parameters.');
      return;
    }
    const code = randomBytes(16).toString('hex');
    this.shopState(shop).codes.set(code, q.get('scope') ?? '');
    const store = shop.replace('.myshopify.com', '');
    const params: Record<string, string> = {
      code,
      host: Buffer.from(`admin.shopify.com/store/${store}`).toString('base64url'),
      shop,
      state: q.get('state') ?? '',
      timestamp: String(Math.floor(Date.now() / 1000)),
    };
    const message = Object.keys(params)
      .sort()
      .map((key) => `${key}=${params[key]}`)
      .join('&');
    const target = new URL(redirectUri);
    for (const [key, value] of Object.entries(params)) target.searchParams.set(key, value);
    target.searchParams.set('hmac', hmacHex(this.options.apiSecret, message));
    res.writeHead(302, { location: target.toString() });
    res.end();
  }

  private async accessToken(shop: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = (await readBody(req)).toString('utf8');
    const type = String(req.headers['content-type'] ?? '');
    const body: Record<string, string> = type.includes('json')
      ? (JSON.parse(raw) as Record<string, string>)
      : Object.fromEntries(new URLSearchParams(raw));
    if (body.client_id !== this.options.apiKey || body.client_secret !== this.options.apiSecret) {
      return send(res, 400, { error: 'invalid_client', error_description: 'Client credentials are invalid' });
    }
    const state = this.shopState(shop);
    const scope = body.code ? state.codes.get(body.code) : undefined;
    if (scope === undefined) {
      return send(res, 400, {
        error: 'invalid_request',
        error_description: 'The authorization code was not found or was already used',
      });
    }
    state.codes.delete(body.code as string);
    const token = `shpat_${randomBytes(16).toString('hex')}`;
    const granted = this.options.grantedScopes ?? scope;
    state.tokens.set(token, granted);
    send(res, 200, { access_token: token, scope: granted });
  }

  private async graphqlEndpoint(shop: string, version: string, req: IncomingMessage, res: ServerResponse) {
    const body = await readBody(req);
    if (!(this.options.apiVersions ?? DEFAULT_VERSIONS).includes(version)) return send(res, 404, 'Not Found');
    const state = this.shopState(shop);
    const token = req.headers['x-shopify-access-token'];
    if (typeof token !== 'string' || !state.tokens.has(token)) {
      return send(res, 401, {
        errors: '[API] Invalid API key or access token (unrecognized login or wrong password)',
      });
    }
    this.graphqlRequests += 1;
    let request: { query?: string; variables?: Record<string, unknown>; operationName?: string };
    try {
      request = JSON.parse(body.toString('utf8'));
    } catch {
      return send(res, 400, { errors: { query: 'Required parameter missing or invalid' } });
    }
    if (typeof request.query !== 'string') {
      return send(res, 400, { errors: { query: 'Required parameter missing or invalid' } });
    }
    let document: ReturnType<typeof parse>;
    const known = this.documents.get(request.query);
    try {
      document = known ?? parse(request.query);
    } catch (error) {
      return send(res, 200, { errors: [{ message: (error as Error).message }] });
    }
    // An app sends the same few documents over and over: parsed and validated once each.
    const problems = known ? [] : validate(this.schema, document);
    if (!known && problems.length === 0 && this.documents.size < 500)
      this.documents.set(request.query, document);
    if (problems.length > 0) {
      return send(res, 200, {
        errors: problems.map((p) => ({ message: p.message, locations: p.locations })),
      });
    }
    const cost = requestedCost(document, request.variables ?? {});
    const charged = state.bucket.take(cost);
    if (charged) this.recordCost(shop, cost, state.bucket.status());
    if (!charged) {
      this.throttledRequests += 1;
      return send(res, 200, {
        errors: [
          {
            message: 'Throttled',
            extensions: { code: 'THROTTLED', documentation: 'https://shopify.dev/api/usage/rate-limits' },
          },
        ],
        extensions: {
          cost: { requestedQueryCost: cost, actualQueryCost: null, throttleStatus: state.bucket.status() },
        },
      });
    }
    const replacing = (request.variables?.files as { id?: unknown; originalSource?: unknown }[] | undefined)
      ?.filter((f) => typeof f?.id === 'string' && f.originalSource !== undefined)
      .map((f) => f.id as string);
    const hooked =
      this.onEvent && /\bfileUpdate\s*\(/.test(request.query) && replacing?.length ? replacing : [];
    if (hooked.length) await this.onEvent?.({ kind: 'fileUpdate', shop, fileIds: hooked });
    const result = await execute({
      schema: this.schema,
      document,
      rootValue: this.resolvers(shop, state, token),
      variableValues: request.variables ?? {},
      ...(request.operationName ? { operationName: request.operationName } : {}),
    });
    if (hooked.length) await this.onEvent?.({ kind: 'fileUpdated', shop, fileIds: hooked });
    send(res, 200, {
      ...(result.errors ? { errors: result.errors.map((e) => ({ message: e.message, path: e.path })) } : {}),
      ...(result.data ? { data: result.data } : {}),
      extensions: {
        cost: { requestedQueryCost: cost, actualQueryCost: cost, throttleStatus: state.bucket.status() },
      },
    });
  }

  private async upload(token: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const staged = this.uploads.get(token);
    const body = await readBody(req);
    if (!staged) return send(res, 403, '<Error><Code>AccessDenied</Code></Error>');
    if (req.method === 'PUT') {
      staged.bytes = body;
      return send(res, 200, '');
    }
    if (req.method !== 'POST') return send(res, 405, '');
    // Google Cloud Storage's form upload: the target's parameters as fields, then the file.
    const form = await new Response(new Uint8Array(body), {
      headers: { 'content-type': String(req.headers['content-type'] ?? '') },
    }).formData();
    const key = form.get('key');
    if (key !== `tmp/${token}/${staged.filename}`) {
      return send(res, 400, '<Error><Code>InvalidArgument</Code><Message>key</Message></Error>');
    }
    const file = form.get('file');
    if (!(file instanceof Blob)) return send(res, 400, '<Error><Code>InvalidArgument</Code></Error>');
    staged.bytes = Buffer.from(await file.arrayBuffer());
    await this.onEvent?.({ kind: 'upload', shop: staged.shop, filename: staged.filename });
    send(res, 201, '<PostResponse></PostResponse>', { 'content-type': 'application/xml' });
  }

  private async cdn(parts: string[], res: ServerResponse): Promise<void> {
    // /cdn/<shop>/files/<n>/<filename>
    const file = this.files.get(`gid://shopify/MediaImage/${parts[3]}`);
    if (!file || file.shop !== parts[1]) {
      send(res, 404, 'Not Found');
      return;
    }
    let fault = this.cdnFaults.get(file.id);
    if ((fault === 'error' || fault === 'reset') && !this.cdnFaults.firstFailure(file.id)) {
      await this.cdnFaults.lifted(file.id);
      fault = this.cdnFaults.get(file.id);
    }
    if (fault === 'error') {
      send(res, 500, 'Internal Server Error');
      return;
    }
    if (fault === 'reset') {
      res.socket?.destroy();
      return;
    }
    await this.onEvent?.({ kind: 'download', shop: file.shop, fileId: file.id });
    const bytes =
      fault === 'not-image'
        ? Buffer.from('<!doctype html><title>Bad gateway</title><p>Try again.</p>\n')
        : file.bytes;
    res.writeHead(200, { 'content-type': file.mimeType, 'content-length': String(bytes.length) });
    res.end(bytes);
  }

  // ---------------------------------------------------------------- GraphQL resolvers

  /** `unpaged`: connections return every node (a bulk operation's run of the query). */
  private resolvers(shop: string, state: ShopState, token: string, unpaged = false) {
    const page = <T>(items: T[], args: { first?: number; after?: string }, cursorOf: (t: T) => string) => {
      const start = args.after && !unpaged ? items.findIndex((t) => cursorOf(t) === args.after) + 1 : 0;
      const size = unpaged ? items.length : Math.min(args.first ?? 50, 250);
      const slice = items.slice(start, start + size);
      return {
        edges: slice.map((node) => ({ cursor: cursorOf(node), node })),
        nodes: slice,
        pageInfo: {
          hasNextPage: start + size < items.length,
          hasPreviousPage: start > 0,
          startCursor: slice[0] ? cursorOf(slice[0]) : null,
          endCursor: slice.length ? cursorOf(slice[slice.length - 1] as T) : null,
        },
      };
    };
    const cursor = (id: string) => Buffer.from(id).toString('base64url');
    const mediaView = (file: FakeFile) => this.mediaView(file);
    const mediaPage = (mediaIds: string[], args: { first?: number; after?: string }) =>
      page(
        mediaIds
          .map((id) => this.files.get(id))
          .filter((f): f is FakeFile => !!f)
          .map(mediaView),
        args,
        (m) => cursor(m.id),
      );
    const productView = (product: FakeProduct) => ({
      __typename: 'Product',
      ...product,
      productType: product.productType,
      status: 'ACTIVE',
      mediaCount: { count: product.mediaIds.length, precision: 'EXACT' },
      media: (args: { first?: number; after?: string }) => mediaPage(product.mediaIds, args),
      variants: (args: { first?: number; after?: string }) =>
        page(
          (
            product.variants ?? [
              {
                id: `${product.id.replace('Product', 'ProductVariant')}0`,
                title: 'Default Title',
                mediaIds: [],
              },
            ]
          ).map((v) => ({
            __typename: 'ProductVariant',
            id: v.id,
            title: v.title,
            displayName: `${product.title} - ${v.title}`,
            media: (a: { first?: number; after?: string }) => mediaPage(v.mediaIds, a),
          })),
          args,
          (v) => cursor(v.id),
        ),
    });
    const subscriptionView = (s: Subscription) => ({
      __typename: 'WebhookSubscription',
      id: s.id,
      topic: s.topic,
      format: s.format,
      uri: s.callbackUrl,
      callbackUrl: s.callbackUrl,
      endpoint: { __typename: 'WebhookHttpEndpoint', callbackUrl: s.callbackUrl },
      includeFields: [],
      metafieldNamespaces: [],
      filter: null,
      createdAt: s.createdAt,
      updatedAt: s.createdAt,
    });
    const nodeOf = (id: string) => {
      const file = this.files.get(id);
      if (file?.shop === shop) return mediaView(file);
      const product = this.products.get(id);
      if (product?.shop === shop) return productView(product);
      const sub = this.subscriptions.get(id);
      if (sub?.shop === shop) return subscriptionView(sub);
      const op = this.bulkOps.get(id);
      if (op?.shop === shop) return this.bulkView(op);
      return null;
    };
    const ownProducts = () => [...this.products.values()].filter((p) => p.shop === shop);
    return {
      shop: () => ({
        __typename: 'Shop',
        id: `gid://shopify/Shop/${this.shopNumber(shop)}`,
        name: state.name,
        email: state.email,
        contactEmail: state.email,
        myshopifyDomain: shop,
        currencyCode: 'EUR',
      }),
      currentAppInstallation: () => ({
        id: `gid://shopify/AppInstallation/${this.shopNumber(shop)}`,
        accessScopes: (state.tokens.get(token) ?? '')
          .split(',')
          .filter(Boolean)
          .map((handle) => ({ handle, description: handle })),
      }),
      node: ({ id }: { id: string }) => nodeOf(id),
      currentBulkOperation: ({ type }: { type?: string }) => {
        if (type === 'MUTATION') return null;
        const mine = [...this.bulkOps.values()].filter((op) => op.shop === shop);
        const last = mine[mine.length - 1];
        return last ? this.bulkView(last) : null;
      },
      productsCount: () => ({ count: ownProducts().length, precision: 'EXACT' }),
      bulkOperationRunQuery: ({ query }: { query: string }) => this.runBulkQuery(shop, state, query),
      bulkOperationCancel: ({ id }: { id: string }) => {
        const op = this.bulkOps.get(id);
        if (!op || op.shop !== shop)
          return {
            bulkOperation: null,
            userErrors: [{ field: ['id'], message: 'Bulk operation does not exist' }],
          };
        if (op.status === 'CREATED' || op.status === 'RUNNING') op.status = 'CANCELING';
        return { bulkOperation: this.bulkView(op), userErrors: [] };
      },
      nodes: ({ ids }: { ids: string[] }) => ids.map(nodeOf),
      product: ({ id }: { id: string }) => {
        const product = this.products.get(id);
        return product?.shop === shop ? productView(product) : null;
      },
      products: (args: { first?: number; after?: string }) =>
        page(ownProducts().map(productView), args, (p) => cursor(p.id)),
      files: (args: { first?: number; after?: string }) =>
        page([...this.files.values()].filter((f) => f.shop === shop).map(mediaView), args, (f) =>
          cursor(f.id),
        ),
      webhookSubscriptions: (args: {
        first?: number;
        after?: string;
        topics?: string[];
        callbackUrl?: string;
      }) =>
        page(
          [...this.subscriptions.values()]
            .filter((s) => s.shop === shop)
            .filter((s) => !args.topics || args.topics.includes(s.topic))
            .filter((s) => !args.callbackUrl || s.callbackUrl === args.callbackUrl)
            .map(subscriptionView),
          args,
          (s) => cursor(s.id),
        ),
      stagedUploadsCreate: ({
        input,
      }: {
        input: { resource: string; filename: string; mimeType: string; httpMethod?: string }[];
      }) => ({
        stagedTargets: input.map((item) => {
          const token = randomBytes(12).toString('hex');
          this.uploads.set(token, { token, shop, filename: item.filename, mimeType: item.mimeType });
          const resourceUrl = `${this.base}/upload/${token}/${encodeURIComponent(item.filename)}`;
          if (item.httpMethod === 'POST') {
            return {
              url: `${this.base}/upload/${token}`,
              resourceUrl,
              parameters: [
                { name: 'Content-Type', value: item.mimeType },
                { name: 'success_action_status', value: '201' },
                { name: 'acl', value: 'private' },
                { name: 'key', value: `tmp/${token}/${item.filename}` },
                { name: 'policy', value: Buffer.from(token).toString('base64') },
              ],
            };
          }
          return {
            url: `${this.base}/upload/${token}?X-Goog-Signature=${hmacHex(this.options.apiSecret, token)}`,
            resourceUrl,
            parameters: [
              { name: 'content_type', value: item.mimeType },
              { name: 'acl', value: 'private' },
            ],
          };
        }),
        userErrors: [],
      }),
      fileUpdate: ({ files }: { files: { id: string; alt?: string; originalSource?: string }[] }) =>
        this.fileUpdate(shop, files),
      fileAcknowledgeUpdateFailed: ({ fileIds }: { fileIds: string[] }) => {
        const done: ReturnType<typeof mediaView>[] = [];
        const userErrors: { field: string[]; message: string; code: string }[] = [];
        fileIds.forEach((id, i) => {
          const file = this.files.get(id);
          if (!file || file.shop !== shop) {
            userErrors.push({
              field: ['fileIds', String(i)],
              message: 'File does not exist.',
              code: 'FILE_DOES_NOT_EXIST',
            });
          } else if (file.status !== 'FAILED') {
            userErrors.push({
              field: ['fileIds', String(i)],
              message: 'File is not in a failed state.',
              code: 'INVALID',
            });
          } else {
            file.status = 'READY';
            file.errors = [];
            done.push(mediaView(file));
          }
        });
        return { files: done, userErrors };
      },
      webhookSubscriptionCreate: ({
        topic,
        webhookSubscription,
      }: {
        topic: string;
        webhookSubscription: { callbackUrl?: string; uri?: string; format?: 'JSON' | 'XML' };
      }) => {
        const callbackUrl = webhookSubscription.uri ?? webhookSubscription.callbackUrl;
        if (!callbackUrl || !/^https:\/\//.test(callbackUrl)) {
          return {
            webhookSubscription: null,
            userErrors: [
              {
                field: ['webhookSubscription', 'callbackUrl'],
                message: 'Address protocol http:// is not supported',
              },
            ],
          };
        }
        const taken = [...this.subscriptions.values()].some(
          (s) => s.shop === shop && s.topic === topic && s.callbackUrl === callbackUrl,
        );
        if (taken) {
          return {
            webhookSubscription: null,
            userErrors: [
              {
                field: ['webhookSubscription', 'callbackUrl'],
                message: 'Address for this topic has already been taken',
              },
            ],
          };
        }
        const sub: Subscription = {
          id: `gid://shopify/WebhookSubscription/${this.nextId++}`,
          shop,
          topic,
          callbackUrl,
          format: webhookSubscription.format ?? 'JSON',
          createdAt: new Date().toISOString(),
        };
        this.subscriptions.set(sub.id, sub);
        return { webhookSubscription: subscriptionView(sub), userErrors: [] };
      },
      webhookSubscriptionUpdate: ({
        id,
        webhookSubscription,
      }: {
        id: string;
        webhookSubscription: { callbackUrl?: string; uri?: string };
      }) => {
        const sub = this.subscriptions.get(id);
        if (!sub || sub.shop !== shop) {
          return {
            webhookSubscription: null,
            userErrors: [{ field: ['id'], message: 'Webhook subscription does not exist' }],
          };
        }
        sub.callbackUrl = webhookSubscription.uri ?? webhookSubscription.callbackUrl ?? sub.callbackUrl;
        return { webhookSubscription: subscriptionView(sub), userErrors: [] };
      },
      webhookSubscriptionDelete: ({ id }: { id: string }) => {
        const sub = this.subscriptions.get(id);
        if (!sub || sub.shop !== shop) {
          return {
            deletedWebhookSubscriptionId: null,
            userErrors: [{ field: ['id'], message: 'Webhook subscription does not exist' }],
          };
        }
        this.subscriptions.delete(id);
        return { deletedWebhookSubscriptionId: id, userErrors: [] };
      },
    };
  }

  // ---------------------------------------------------------------- bulk operations (see bulk.ts)

  /** A bulk operation by id, as the fake holds it (tests look at status and counts). */
  bulkOperation(id: string): FakeBulkOperation | undefined {
    return this.bulkOps.get(id);
  }

  /** Bulk operations held by `holdBulk` complete. */
  finishBulk(): void {
    for (const release of [...this.bulkHeld]) release();
  }

  private bulkView(op: FakeBulkOperation) {
    return bulkView(op, `${this.base}/bulk/${op.token}/bulk-${gidNumber(op.id)}.jsonl`);
  }

  private recordCost(
    shop: string,
    cost: number,
    status: { currentlyAvailable: number; maximumAvailable: number },
  ) {
    const stats = this.costStats.get(shop) ?? {
      maxRequestedCost: 0,
      lowestAvailable: status.maximumAvailable,
      maximumAvailable: status.maximumAvailable,
    };
    stats.maxRequestedCost = Math.max(stats.maxRequestedCost, cost);
    stats.lowestAvailable = Math.min(stats.lowestAvailable, status.currentlyAvailable);
    this.costStats.set(shop, stats);
  }

  private runBulkQuery(shop: string, state: ShopState, query: string) {
    const problem = bulkQueryProblem(this.schema, query);
    if (problem)
      return { bulkOperation: null, userErrors: [{ code: 'INVALID', field: ['query'], message: problem }] };
    const running = [...this.bulkOps.values()].find(
      (op) =>
        op.shop === shop && (op.status === 'CREATED' || op.status === 'RUNNING' || op.status === 'CANCELING'),
    );
    if (running) {
      return {
        bulkOperation: null,
        userErrors: [
          {
            code: 'OPERATION_IN_PROGRESS',
            field: null,
            message: `A bulk query operation for this app and shop is already in progress: ${running.id}.`,
          },
        ],
      };
    }
    const op: FakeBulkOperation = {
      id: `gid://shopify/BulkOperation/${this.nextId++}`,
      shop,
      query,
      type: 'QUERY',
      status: 'CREATED',
      errorCode: null,
      objectCount: 0,
      rootObjectCount: 0,
      createdAt: new Date().toISOString(),
      completedAt: null,
      token: randomBytes(12).toString('hex'),
    };
    this.bulkOps.set(op.id, op);
    setImmediate(() => void this.executeBulk(op, state));
    return { bulkOperation: this.bulkView(op), userErrors: [] };
  }

  private async executeBulk(op: FakeBulkOperation, state: ShopState): Promise<void> {
    if (canceling(op)) {
      op.status = 'CANCELED';
      return;
    }
    op.status = 'RUNNING';
    const result = await graphql({
      schema: this.schema,
      source: op.query,
      rootValue: this.resolvers(op.shop, state, '', true),
    });
    if (result.errors || !result.data) {
      op.status = 'FAILED';
      op.errorCode = 'INTERNAL_SERVER_ERROR';
      return;
    }
    const counts = { objects: 0, roots: 0 };
    const chunks: Buffer[] = [];
    let n = 0;
    for (const line of bulkLines(result.data as Record<string, unknown>, counts)) {
      chunks.push(Buffer.from(`${line}\n`));
      op.objectCount = counts.objects;
      op.rootObjectCount = counts.roots;
      // Counts grow while it runs, as Shopify's do; a pollier sees RUNNING with a partial count.
      if (++n % 500 === 0) await new Promise((resolve) => setImmediate(resolve));
      if (canceling(op)) break;
    }
    if (this.holdBulk) {
      await new Promise<void>((resolve) => {
        const release = () => {
          this.bulkHeld.delete(release);
          resolve();
        };
        this.bulkHeld.add(release);
      });
    }
    if (canceling(op)) {
      op.status = 'CANCELED';
      return;
    }
    op.jsonl = Buffer.concat(chunks);
    op.status = 'COMPLETED';
    op.completedAt = new Date().toISOString();
    this.notify();
  }

  private bulkResult(token: string, res: ServerResponse): void {
    const op = [...this.bulkOps.values()].find((o) => o.token === token);
    if (!op?.jsonl || op.status !== 'COMPLETED') {
      send(res, 403, '<Error><Code>AccessDenied</Code></Error>');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/jsonl', 'content-length': String(op.jsonl.length) });
    // Written in pieces, as a large file arrives: a reader must not assume whole lines per chunk.
    const body = op.jsonl;
    let at = 0;
    const next = () => {
      while (at < body.length) {
        const piece = body.subarray(at, at + 16 * 1024 + 7);
        at += piece.length;
        if (!res.write(piece)) {
          res.once('drain', next);
          return;
        }
      }
      res.end();
    };
    next();
  }

  private mediaView(file: FakeFile) {
    const image = {
      id: `gid://shopify/ImageSource/${gidNumber(file.id)}`,
      altText: file.alt || null,
      url: this.fileUrl(file),
      width: file.width,
      height: file.height,
    };
    const errors = file.errors.map((e) => ({ ...e, details: null }));
    return {
      __typename: 'MediaImage',
      id: file.id,
      alt: file.alt,
      mediaContentType: 'IMAGE',
      status: file.status,
      fileStatus: file.status,
      preview: { image: file.status === 'READY' ? image : null, status: file.status },
      mediaErrors: errors,
      fileErrors: errors,
      image: file.status === 'READY' ? image : null,
      mimeType: file.mimeType,
      originalSource: { url: this.fileUrl(file), fileSize: file.bytes.length },
      createdAt: file.createdAt,
      updatedAt: file.updatedAt,
    };
  }

  private fileUpdate(shop: string, inputs: { id: string; alt?: string; originalSource?: string }[]) {
    const updated: ReturnType<FakeShopify['mediaView']>[] = [];
    const userErrors: { field: string[]; message: string; code: string }[] = [];
    inputs.forEach((input, i) => {
      const field = (name: string) => ['files', String(i), name];
      const file = this.files.get(input.id);
      if (!file || file.shop !== shop) {
        userErrors.push({ field: field('id'), message: 'File does not exist.', code: 'FILE_DOES_NOT_EXIST' });
        return;
      }
      if (file.status === 'PROCESSING') {
        userErrors.push({
          field: field('id'),
          message: 'File has a pending operation.',
          code: 'FILE_LOCKED',
        });
        return;
      }
      if (file.status === 'FAILED') {
        userErrors.push({
          field: field('id'),
          message: 'File cannot be updated in a failed state.',
          code: 'INVALID_FAILED_MEDIA_STATE',
        });
        return;
      }
      if (input.alt !== undefined && input.alt.length > 512) {
        userErrors.push({
          field: field('alt'),
          message: 'The alt value exceeds the maximum limit of 512 characters.',
          code: 'ALT_VALUE_LIMIT_EXCEEDED',
        });
        return;
      }
      let replacement: { bytes: Buffer; filename: string } | undefined;
      if (input.originalSource !== undefined) {
        const match = /\/upload\/([0-9a-f]+)\//.exec(input.originalSource);
        const staged = match ? this.uploads.get(match[1] as string) : undefined;
        if (!staged || staged.shop !== shop || !staged.bytes || !input.originalSource.startsWith(this.base)) {
          userErrors.push({
            field: field('originalSource'),
            message: 'Invalid image source url value provided.',
            code: 'INVALID_IMAGE_SOURCE_URL',
          });
          return;
        }
        const ext = (name: string) => name.split('.').pop()?.toLowerCase();
        if (ext(staged.filename) !== ext(file.filename)) {
          userErrors.push({
            field: field('originalSource'),
            message: 'Invalid filename extension.',
            code: 'INVALID_FILENAME_EXTENSION',
          });
          return;
        }
        replacement = { bytes: staged.bytes, filename: staged.filename };
      }
      if (input.alt !== undefined) file.alt = input.alt;
      file.updatedAt = new Date().toISOString();
      if (replacement) {
        file.status = 'PROCESSING';
        this.processing.set(file.id, replacement);
        if (!this.holdProcessing) setImmediate(() => void this.process(file.id));
      }
      updated.push(this.mediaView(file));
    });
    if (inputs.length > 0 && userErrors.length === 0) {
      // Shopify tells subscribers a product changed when one of its media did (the app's own
      // replacement included: the loop an app must recognise).
      const products = new Set(updated.flatMap((m) => [...(this.files.get(m.id)?.productIds ?? [])]));
      for (const id of products) {
        const product = this.products.get(id);
        if (!product) continue;
        product.updatedAt = new Date().toISOString();
        if (!this.holdProcessing && updated.some((m) => this.processing.has(m.id))) continue; // sent once processed
        void this.emit(shop, 'PRODUCTS_UPDATE', this.productPayload(product));
      }
    }
    return { files: userErrors.length ? null : updated, userErrors };
  }

  private async process(id: string): Promise<void> {
    const pending = this.processing.get(id);
    const file = this.files.get(id);
    if (!pending || !file) return;
    this.processing.delete(id);
    let meta: Awaited<ReturnType<ReturnType<typeof sharp>['metadata']>> | undefined;
    try {
      meta = await sharp(pending.bytes).metadata();
    } catch {
      meta = undefined;
    }
    if (!meta?.width || this.failNextUpdate.delete(id)) {
      // The upload stays unpublished; the file keeps its earlier content and reports the failure.
      file.status = 'FAILED';
      file.errors = [{ code: 'UNKNOWN', message: 'Image could not be processed' }];
    } else {
      file.bytes = pending.bytes;
      file.width = meta.width;
      file.height = meta.height ?? 0;
      file.version += 1;
      file.status = 'READY';
      file.errors = [];
    }
    file.updatedAt = new Date().toISOString();
    this.notify();
    for (const productId of file.productIds) {
      const product = this.products.get(productId);
      if (product) await this.emit(file.shop, 'PRODUCTS_UPDATE', this.productPayload(product));
    }
  }

  // ---------------------------------------------------------------- webhooks

  /** The REST-shaped product payload of products/create and products/update (API ≥ 2024-07: media[]). */
  productPayload(product: FakeProduct): Record<string, unknown> {
    const numeric = gidNumber(product.id);
    const media = product.mediaIds
      .map((id) => this.files.get(id))
      .filter((f): f is FakeFile => !!f)
      .map((file, position) => ({
        id: gidNumber(file.id),
        product_id: numeric,
        position: position + 1,
        created_at: file.createdAt,
        updated_at: file.updatedAt,
        alt: file.alt || null,
        status: file.status,
        media_content_type: 'IMAGE',
        preview_image: {
          width: file.width,
          height: file.height,
          src: this.fileUrl(file),
          status: file.status,
        },
        variant_ids: [],
        admin_graphql_api_id: file.id,
      }));
    return {
      admin_graphql_api_id: product.id,
      id: numeric,
      title: product.title,
      handle: product.handle,
      vendor: product.vendor,
      product_type: product.productType,
      status: 'active',
      created_at: product.createdAt,
      updated_at: product.updatedAt,
      body_html: '',
      tags: '',
      variants: [],
      options: [],
      images: media.map((m) => ({
        id: m.id,
        product_id: numeric,
        position: m.position,
        alt: m.alt,
        width: m.preview_image.width,
        height: m.preview_image.height,
        src: m.preview_image.src,
        admin_graphql_api_id: `gid://shopify/ProductImage/${m.id}`,
      })),
      image: null,
      media,
    };
  }

  private async emit(shop: string, topic: string, payload: Record<string, unknown>): Promise<Delivery[]> {
    const body = JSON.stringify(payload);
    const sent: Delivery[] = [];
    for (const sub of [...this.subscriptions.values()]) {
      if (sub.shop !== shop || sub.topic !== topic) continue;
      sent.push(
        await this.deliver(shop, topic.toLowerCase().replace('_', '/'), sub.callbackUrl, body, randomUUID()),
      );
    }
    return sent;
  }

  private async deliver(
    shop: string,
    topic: string,
    url: string,
    body: string,
    webhookId: string,
    again = false,
  ): Promise<Delivery> {
    const target = this.options.deliverTo ? this.options.deliverTo(url) : url;
    const started = performance.now();
    let status = 0;
    try {
      const response = await fetch(target, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-shopify-topic': topic,
          'x-shopify-hmac-sha256': createHmac('sha256', this.options.apiSecret).update(body).digest('base64'),
          'x-shopify-shop-domain': shop,
          'x-shopify-api-version': '2025-10',
          'x-shopify-webhook-id': webhookId,
          'x-shopify-event-id': createHash('sha256').update(webhookId).digest('hex').slice(0, 32),
          'x-shopify-triggered-at': new Date().toISOString(),
          'user-agent': 'Shopify-Captain-Hook',
        },
        body,
        signal: AbortSignal.timeout(5000),
      });
      status = response.status;
      await response.arrayBuffer();
    } catch {
      status = 0;
    }
    const delivery: Delivery = {
      webhookId,
      shop,
      topic,
      url,
      body,
      status,
      answeredInMs: performance.now() - started,
      sentAt: Date.now(),
    };
    if (!again) this.deliveries.push(delivery);
    this.notify();
    return delivery;
  }

  private shopState(shop: string): ShopState {
    const state = this.shops.get(shop);
    if (!state) throw new Error(`no shop ${shop} (addShop first)`);
    return state;
  }

  private shopNumber(shop: string): number {
    return [...this.shops.keys()].indexOf(shop) + 1;
  }
}

/** `https://` + host: the app URL the fake's webhook subscriptions must use (Shopify refuses http). */
export function isHttpsUrl(url: string): boolean {
  return url.startsWith('https://');
}

type CdnFault = 'error' | 'reset' | 'not-image';

/** The fake CDN's faults by file id (see FakeShopify.cdnFaults). */
export class CdnFaults extends Map<string, CdnFault> {
  readonly #failedOnce = new Set<string>();
  readonly #waiting = new Map<string, (() => void)[]>();

  /** True the first time a file's fault is met (that download fails); false afterwards. */
  firstFailure(id: string): boolean {
    if (this.#failedOnce.has(id)) return false;
    this.#failedOnce.add(id);
    return true;
  }

  /** Resolves once the file has no fault any more. */
  lifted(id: string): Promise<void> {
    if (!this.has(id)) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.#waiting.get(id) ?? [];
      list.push(resolve);
      this.#waiting.set(id, list);
    });
  }

  override set(id: string, fault: CdnFault): this {
    this.#failedOnce?.delete(id);
    return super.set(id, fault);
  }

  override delete(id: string): boolean {
    const had = super.delete(id);
    for (const wake of this.#waiting.get(id) ?? []) wake();
    this.#waiting.delete(id);
    return had;
  }

  override clear(): void {
    const ids = [...this.keys()];
    super.clear();
    for (const id of ids) this.delete(id);
  }
}

/** Read afresh each time: a cancel arrives from another request while the operation runs. */
function canceling(op: { status: string }): boolean {
  return op.status === 'CANCELING';
}
