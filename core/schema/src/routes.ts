// Imports nothing: built into the Node client (see error-codes.ts).

export type HttpMethod = 'GET' | 'POST' | 'DELETE';

/**
 * `key`: `Authorization: Bearer <API key>` required (401 without); `none`: public; `optional`: a key
 * is read when sent and changes the answer, none is needed; `operator`: `Authorization: Bearer
 * <COMPRESSO_ADMIN_TOKEN>`, the server operator's token (for the integrations' own servers, never a
 * browser); the route answers 404 on a server without one.
 */
export type RouteAuth = 'key' | 'none' | 'optional' | 'operator';

/** How the request carries its input. */
export type RequestKind =
  | 'none'
  /** multipart/form-data: one `file` part and the compress options as fields. */
  | 'image-form'
  /** multipart/form-data with `file` parts and the options once, or JSON `{urls, options}`. */
  | 'batch'
  | 'json';

/** What a successful answer carries. */
export type ResponseKind = 'json' | 'image' | 'html';

export interface RouteSpec {
  method: HttpMethod;
  /** OpenAPI spelling: `{id}` for a path parameter. */
  path: string;
  auth: RouteAuth;
  request: RequestKind;
  response: ResponseKind;
  /** The status of a success. */
  status: number;
  /** The answer carries the InfoResult facts as `X-*` headers (RESULT_HEADERS). */
  resultHeaders?: 'all' | readonly string[];
  /** Counted against the daily quota. */
  counted?: boolean;
  /** API_HEADERS a success carries besides the rate and result headers: name → always sent. */
  headers?: Readonly<Partial<Record<ApiHeaderName, boolean>>>;
}

/**
 * Every route of the public API, declared once and keyed by its OpenAPI operationId. The server
 * registers exactly these (and answers 405 with `Allow` for other methods on their paths), its
 * OpenAPI document lists exactly these, and the clients build their requests from them. The
 * bodies of each route are in contract.ts (zod), which must name every route here.
 */
export const API_ROUTES = {
  compress: {
    method: 'POST',
    path: '/api/v1/compress',
    auth: 'key',
    request: 'image-form',
    response: 'image',
    status: 200,
    resultHeaders: 'all',
    counted: true,
  },
  info: {
    method: 'POST',
    path: '/api/v1/info',
    auth: 'key',
    request: 'image-form',
    response: 'json',
    status: 200,
    resultHeaders: 'all',
    counted: true,
  },
  createKey: {
    method: 'POST',
    path: '/api/v1/key',
    auth: 'key',
    request: 'json',
    response: 'json',
    status: 201,
    counted: true,
  },
  listKeys: {
    method: 'GET',
    path: '/api/v1/keys',
    auth: 'key',
    request: 'none',
    response: 'json',
    status: 200,
    counted: true,
  },
  revokeKey: {
    method: 'DELETE',
    path: '/api/v1/keys/{id}',
    auth: 'key',
    request: 'none',
    response: 'json',
    status: 200,
    counted: true,
  },
  usage: {
    method: 'GET',
    path: '/api/v1/usage',
    auth: 'key',
    request: 'none',
    response: 'json',
    status: 200,
    counted: true,
  },
  createJob: {
    method: 'POST',
    path: '/api/v1/jobs',
    auth: 'key',
    request: 'batch',
    response: 'json',
    status: 202,
    counted: true,
  },
  getJob: {
    method: 'GET',
    path: '/api/v1/jobs/{id}',
    auth: 'key',
    request: 'none',
    response: 'json',
    status: 200,
    counted: false,
  },
  getJobItem: {
    method: 'GET',
    path: '/api/v1/jobs/{id}/items/{index}',
    auth: 'key',
    request: 'none',
    response: 'image',
    status: 200,
    resultHeaders: 'all',
    counted: false,
  },
  createOperatorAccount: {
    method: 'POST',
    path: '/api/v1/operator/accounts',
    auth: 'operator',
    request: 'json',
    response: 'json',
    status: 201,
  },
  generate: {
    method: 'POST',
    path: '/api/v1/generate',
    auth: 'key',
    request: 'json',
    response: 'image',
    status: 200,
    resultHeaders: 'all',
    counted: true,
    headers: {
      'X-Ai-Provider': true,
      'X-Ai-Model': true,
      'X-Aspect-Ratio': true,
      'X-Aspect-Ratio-Requested': false,
    },
  },
  edit: {
    method: 'POST',
    path: '/api/v1/edit',
    auth: 'key',
    request: 'image-form',
    response: 'image',
    status: 200,
    resultHeaders: 'all',
    counted: true,
    headers: {
      'X-Edit-Operations': true,
      'X-Edit-Unrecognized': true,
      'X-Edit-Generated': false,
      'X-Ai-Provider': false,
      'X-Ai-Model': false,
    },
  },
  altText: {
    method: 'POST',
    path: '/api/v1/alt-text',
    auth: 'key',
    request: 'image-form',
    response: 'json',
    status: 200,
    counted: true,
    headers: { 'X-Ai-Provider': false, 'X-Ai-Model': false },
  },
  openapi: {
    method: 'GET',
    path: '/api/v1/openapi.json',
    auth: 'none',
    request: 'none',
    response: 'json',
    status: 200,
  },
  docs: { method: 'GET', path: '/api/v1/docs', auth: 'none', request: 'none', response: 'html', status: 200 },
  healthz: { method: 'GET', path: '/healthz', auth: 'none', request: 'none', response: 'json', status: 200 },
  readyz: { method: 'GET', path: '/readyz', auth: 'none', request: 'none', response: 'json', status: 200 },
} as const satisfies Record<string, RouteSpec>;

export type RouteId = keyof typeof API_ROUTES;

export const ROUTE_IDS = Object.keys(API_ROUTES) as RouteId[];

/** `/api/v1/keys/{id}` → `/api/v1/keys/:id` (express). */
export function expressPath(path: string): string {
  return path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ':$1');
}

/** The path with its parameters filled in, each URL-encoded. */
export function routePath(id: RouteId, params: Readonly<Record<string, string | number>> = {}): string {
  return API_ROUTES[id].path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`routePath(${id}): no value for {${name}}`);
    return encodeURIComponent(String(value));
  });
}

/**
 * Headers the API sends besides the result facts, with what they mean; the OpenAPI document
 * describes each from here.
 */
export const API_HEADERS = {
  'X-Request-Id': {
    type: 'string',
    description:
      'Identifies this request in the logs (an X-Request-Id sent by the client is kept when well-formed).',
  },
  'RateLimit-Limit': { type: 'integer', description: "The account's daily request limit." },
  'RateLimit-Remaining': { type: 'integer', description: 'Requests left today.' },
  'RateLimit-Reset': { type: 'integer', description: 'Seconds until the quota resets (00:00 UTC).' },
  'Retry-After': { type: 'integer', description: 'Seconds to wait before retrying.' },
  'X-Should-Retry': {
    type: 'string',
    description: 'Always "false" where sent: retrying before the quota or limit resets cannot succeed.',
  },
  Location: { type: 'string', description: 'The URL of the resource created.' },
  'X-Ai-Provider': {
    type: 'string',
    description: 'The provider that did the generative work: openai or replicate (absent when none did).',
  },
  'X-Ai-Model': { type: 'string', description: "The provider's model that did it, e.g. gpt-image-1." },
  'X-Aspect-Ratio': {
    type: 'string',
    description: "The aspect ratio generated: the model's supported ratio nearest to the one asked for.",
  },
  'X-Aspect-Ratio-Requested': {
    type: 'string',
    description: 'The aspect ratio asked for, sent when the model could not make it exactly.',
  },
  'X-Edit-Operations': {
    type: 'string',
    description:
      'JSON array of the operations applied, in order (EditOperation objects: {"op":"resize","width":800}, …); non-ASCII characters as \\u escapes.',
  },
  'X-Edit-Unrecognized': {
    type: 'string',
    description: 'JSON array of the words of the instruction that were not understood (and not applied).',
  },
  'X-Edit-Generated': {
    type: 'string',
    description:
      'JSON array of the phrases of the instruction a generative provider carried out (e.g. "remove the background"), when any.',
  },
} as const satisfies Record<string, { type: 'string' | 'integer'; description: string }>;

export type ApiHeaderName = keyof typeof API_HEADERS;
