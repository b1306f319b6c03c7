import type { Config } from '@compresso/runtime';
import {
  API_HEADERS,
  API_ROUTES,
  type ApiHeaderName,
  ERROR_STATUS,
  type ErrorCode,
  MIME_TYPES,
  OUTPUT_FORMATS,
  openApiComponents,
  RESULT_HEADERS,
  type ResultHeaderField,
  ROUTE_BODIES,
  ROUTE_IDS,
  type RouteBodies,
  type RouteId,
  type RouteSpec,
  resultHeaderName,
  schemaNameOf,
} from '@compresso/schema';

type Json = Record<string, unknown>;

const errorRef = { $ref: '#/components/schemas/ErrorBody' };

function codesWith(status: number): ErrorCode[] {
  return (Object.keys(ERROR_STATUS) as ErrorCode[]).filter((code) => ERROR_STATUS[code] === status);
}

/** Codes only the AI routes answer: the other operations do not list them under their statuses. */
const AI_ONLY_CODES = new Set<ErrorCode>([
  'CONTENT_POLICY_VIOLATION',
  'INSTRUCTION_NOT_UNDERSTOOD',
  'PROVIDER_NOT_CONFIGURED',
  'PROVIDER_ERROR',
  'PROVIDER_RATE_LIMITED',
  'PROVIDER_TIMEOUT',
]);

function errorResponse(status: number, when: string, ai = false): Json {
  const codes = codesWith(status).filter((code) => ai || !AI_ONLY_CODES.has(code));
  return {
    description: `${when} Codes: ${codes.join(', ')}.`,
    content: { 'application/json': { schema: errorRef } },
  };
}

/** An error answer of an AI route: its codes include the provider's. */
const aiError = (status: number, when: string): Json => errorResponse(status, when, true);

function apiHeader(name: ApiHeaderName, description?: string): Json {
  const spec = API_HEADERS[name];
  return { description: description ?? spec.description, schema: { type: spec.type } };
}

const requestIdHeader = (): Json => ({ 'X-Request-Id': apiHeader('X-Request-Id') });

/** Sent by the API-key check on every answer past it. */
const rateHeaders = (): Json => ({
  'RateLimit-Limit': apiHeader('RateLimit-Limit'),
  'RateLimit-Remaining': apiHeader('RateLimit-Remaining'),
  'RateLimit-Reset': apiHeader('RateLimit-Reset'),
});

const authErrors = (): Json => ({
  '401': errorResponse(401, 'Missing, malformed, unknown or revoked API key.'),
  '403': errorResponse(403, 'The account has no plan that includes the API.'),
  '429': {
    ...errorResponse(
      429,
      'The daily quota is used up. Retry-After gives the seconds to the reset; X-Should-Retry is false.',
    ),
    headers: {
      'Retry-After': apiHeader('Retry-After', 'Seconds until the quota resets.'),
      'X-Should-Retry': apiHeader('X-Should-Retry'),
    },
  },
  '500': errorResponse(
    500,
    'A bug on our side; the message is generic, the cause is logged under the request id.',
  ),
});

const imageErrors = (config: Config): Json => ({
  '400': errorResponse(
    400,
    'A missing file or an invalid option; `details` names each field, what it accepts and what was received.',
  ),
  '408': errorResponse(408, `The upload paused for more than ${config.idleTimeoutMs} ms.`),
  '413': errorResponse(413, `The file is larger than ${config.maxUploadBytes} bytes.`),
  '415': errorResponse(415, 'Not an image, or an image format Compresso does not read.'),
  '422': errorResponse(
    422,
    'An image that cannot be processed: empty, corrupt, too many pixels or frames, too slow.',
  ),
  '503': {
    ...errorResponse(
      503,
      `The server holds as many uploads as its memory budget allows (${config.uploadMemoryBytes} bytes); retry after Retry-After seconds. Not counted against the quota.`,
    ),
    headers: { 'Retry-After': apiHeader('Retry-After') },
  },
});

/**
 * Codes of the table no operation's responses name, and why. Every other code is listed under the
 * status of some operation; the OpenAPI test fails for a code that is in neither place, so a code
 * added to the table is documented where the API answers it.
 */
export const CODES_OUTSIDE_OPERATIONS: Partial<Record<ErrorCode, string>> = {
  METHOD_NOT_ALLOWED: 'any path of the table, for a method it does not answer (405 with Allow): see info',
};

/** What each route of the table means, in words; the rest of its operation comes from the table. */
interface RouteDoc {
  summary: string;
  description?: string;
  success: string;
  errors?: Json;
}

function routeDocs(config: Config): Record<RouteId, RouteDoc> {
  return {
    compress: {
      summary: 'Compress or convert one image',
      description: 'Answers the image bytes. The compression facts are in the X-* headers.',
      success: 'The compressed image, named after the upload with the new extension (Content-Disposition).',
      errors: { ...imageErrors(config), ...authErrors() },
    },
    info: {
      summary: 'What compression would do, without keeping anything',
      success: 'The compression facts (also in the X-* headers, as /compress sends them).',
      errors: { ...imageErrors(config), ...authErrors() },
    },
    createKey: {
      summary: "Create an API key for the caller's account",
      description: 'The secret is in this answer only; it is stored as a hash and cannot be shown again.',
      success: 'The new key, with its secret.',
      errors: {
        '400': errorResponse(400, 'The body is not {"name": string}; `details` names the field.'),
        '409': errorResponse(409, 'The account has the most active keys allowed.'),
        ...authErrors(),
      },
    },
    createOperatorAccount: {
      summary: 'Make or reuse an account by its address and issue it a key (operator token)',
      description:
        'For an operator’s own servers, such as the Shopify app giving each shop an account: authorized by ' +
        'COMPRESSO_ADMIN_TOKEN, never by an API key, and never to be called from a browser. The same address ' +
        'gives the same account (`account_created` false); each call issues a new key.',
      success: 'The account and its new key, with the secret (in this answer only).',
      errors: {
        '400': errorResponse(
          400,
          'The body is not {"email": string, "key_name"?: string}; `details` names the field.',
        ),
        '401': errorResponse(401, 'No operator token, or not this server’s.'),
        '404': errorResponse(
          404,
          'COMPRESSO_ADMIN_TOKEN is not set on this server: operator routes are off.',
        ),
        '409': errorResponse(409, 'The account has the most active keys allowed.'),
      },
    },
    listKeys: {
      summary: "The account's active keys (never their secrets)",
      success: 'Active keys, oldest first.',
      errors: authErrors(),
    },
    revokeKey: {
      summary: 'Revoke a key; it stops working at once',
      description: 'Answered even when the daily quota is used up, so a leaked key can always be revoked.',
      success: 'Revoked.',
      errors: {
        '404': errorResponse(404, "No active key with this id in the caller's account."),
        ...authErrors(),
      },
    },
    usage: {
      summary: "Today's usage of the account's quota (this request included)",
      success: 'Usage.',
      errors: authErrors(),
    },
    createJob: {
      summary: 'Compress many images in the background',
      description:
        `A batch of up to ${config.maxBatchItems} images, either uploaded (multipart, one \`file\` part per image, plus the compress options once) ` +
        'or fetched by the server from public http(s) URLs (JSON). Answers at once with the job; poll `status_url` and download each result ' +
        'as soon as it is done. A batch of n items counts n requests of the daily quota, reserved whole at submission (refused whole with ' +
        '429 when they do not fit); reading progress and downloading results are not counted. Items that fail through our fault are given back.',
      success: 'Queued. `Location` is the job.',
      errors: {
        ...imageErrors(config),
        '400': errorResponse(
          400,
          'No file, too many items, a bad option, or a URL that is not allowed: `details` names each field (`urls[i]`, `file`, an option).',
        ),
        ...authErrors(),
      },
    },
    getJob: {
      summary: 'Progress and per-item results of a batch job (not counted against the quota)',
      success: 'The job.',
      errors: { '404': errorResponse(404, "No job with this id in the caller's account."), ...authErrors() },
    },
    getJobItem: {
      summary: 'Download one finished result (not counted against the quota)',
      success: 'The compressed image, with Content-Disposition naming it.',
      errors: {
        '404': errorResponse(404, "No such job in the caller's account, or no such item."),
        '409': errorResponse(409, 'The item is not done: still queued, or failed (`details.status`).'),
        ...authErrors(),
      },
    },
    generate: {
      summary: 'Generate an image from a text prompt',
      description:
        'Asks the configured AI provider (an OpenAI-compatible images API or Replicate) for a picture, then compresses it like /compress: ' +
        'the answer is the image bytes in the requested format and quality, with the compression facts in the X-* headers and the provider, ' +
        'its model and the aspect ratio generated in X-Ai-Provider, X-Ai-Model and X-Aspect-Ratio (the nearest the model supports; ' +
        'X-Aspect-Ratio-Requested when it differs). Counted like any request; never a placeholder image.',
      success: 'The generated image (Content-Disposition names it generated.<ext>).',
      errors: {
        '400': aiError(
          400,
          'A missing or too long prompt, an unknown model or aspect ratio, a bad option: `details` names each field.',
        ),
        '422': aiError(
          422,
          'CONTENT_POLICY_VIOLATION: the provider refused the prompt under its content policy (its reason in the message).',
        ),
        '501': aiError(
          501,
          'PROVIDER_NOT_CONFIGURED: no AI provider is set up on this server; the message names the settings.',
        ),
        '502': aiError(
          502,
          'PROVIDER_ERROR: the provider failed, refused our credentials, or answered something that is not its contract.',
        ),
        '503': {
          ...aiError(
            503,
            'PROVIDER_RATE_LIMITED: the provider asked us to slow down; retry after Retry-After seconds.',
          ),
          headers: { 'Retry-After': apiHeader('Retry-After') },
        },
        '504': aiError(504, `PROVIDER_TIMEOUT: the provider did not finish within ${config.aiTimeoutMs} ms.`),
        ...authErrors(),
      },
    },
    edit: {
      summary: 'Edit an image by a plain-language instruction',
      description:
        'The instruction ("make it 800 wide and black and white", "rotate left and convert to webp", "crop to square") is parsed, the same ' +
        'words always the same way, into operations (resize, crop, rotate, flip, grayscale, blur, sharpen, brightness, contrast, saturation, ' +
        'format, quality) applied in order, then compressed like /compress. X-Edit-Operations lists the operations applied, ' +
        'X-Edit-Unrecognized the words not understood. Phrases that need a generative model ("blur the background", "remove the ' +
        'background") go to the configured provider (X-Edit-Generated, X-Ai-Provider, X-Ai-Model), or are refused with ' +
        'PROVIDER_NOT_CONFIGURED. The output carries no metadata.',
      success: 'The edited image, named after the upload with the new extension.',
      errors: {
        ...imageErrors(config),
        '400': aiError(
          400,
          'No file, no instruction, a bad option, or an instruction asking for something out of range (a width of 0, quality 150, two formats): `details` names the field and the phrase.',
        ),
        '422': aiError(
          422,
          'INSTRUCTION_NOT_UNDERSTOOD (no word of the instruction made an operation; `details.unrecognized` lists them), an image that cannot be processed, or CONTENT_POLICY_VIOLATION from the provider.',
        ),
        '501': aiError(
          501,
          'PROVIDER_NOT_CONFIGURED: the instruction needs a generative model and none is configured.',
        ),
        '502': aiError(
          502,
          'PROVIDER_ERROR: the provider failed or answered something that is not its contract.',
        ),
        '503': {
          ...aiError(
            503,
            'The server holds as many uploads as its memory budget allows, or PROVIDER_RATE_LIMITED: the provider asked us to slow down; retry after Retry-After seconds.',
          ),
          headers: { 'Retry-After': apiHeader('Retry-After') },
        },
        '504': aiError(504, 'PROVIDER_TIMEOUT: the provider did not finish in time.'),
        ...authErrors(),
      },
    },
    altText: {
      summary: 'Alt text for an image',
      description:
        'With a vision provider (an OpenAI-compatible chat API), a model that sees the image writes it (`source: provider`). Without one, ' +
        'it is composed offline from the context fields (product title, vendor, page title, a descriptive file name) and what the server ' +
        'measured (orientation, main colour, transparency) — `source: offline` — and never names content nobody saw. `basis` lists what it came from.',
      success: 'The alt text, its source and the measured facts.',
      errors: {
        ...imageErrors(config),
        '422': aiError(
          422,
          'An image that cannot be processed, or CONTENT_POLICY_VIOLATION from the provider.',
        ),
        '502': aiError(
          502,
          'PROVIDER_ERROR: the vision provider failed or answered something that is not its contract.',
        ),
        '503': {
          ...aiError(
            503,
            'The server holds as many uploads as its memory budget allows, or PROVIDER_RATE_LIMITED: the provider asked us to slow down; retry after Retry-After seconds.',
          ),
          headers: { 'Retry-After': apiHeader('Retry-After') },
        },
        '504': aiError(504, 'PROVIDER_TIMEOUT: the vision provider did not answer in time.'),
        ...authErrors(),
      },
    },
    openapi: { summary: 'This document', success: 'OpenAPI 3.1.' },
    docs: { summary: 'The API reference as HTML', success: 'HTML.' },
    healthz: { summary: 'The process is alive', success: 'Alive.' },
    readyz: {
      summary: 'The database answers',
      success: 'Ready.',
      errors: { '503': errorResponse(503, 'The database does not answer.') },
    },
  };
}

/**
 * Every answer carries X-Request-Id; an error answered after the key was checked (anything but 401
 * and 403) also carries the RateLimit-* headers of that check.
 */
function errorsWithHeaders(errors: Json, keyed: boolean): Json {
  return Object.fromEntries(
    Object.entries(errors).map(([status, response]) => {
      const { headers, ...rest } = response as { headers?: Json };
      const pastAuth = keyed && status !== '401' && status !== '403';
      return [
        status,
        { ...rest, headers: { ...requestIdHeader(), ...(pastAuth ? rateHeaders() : {}), ...headers } },
      ];
    }),
  );
}

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });

const imageContent = (): Json =>
  Object.fromEntries(
    OUTPUT_FORMATS.map((format) => [
      MIME_TYPES[format],
      { schema: { type: 'string', contentMediaType: MIME_TYPES[format] } },
    ]),
  );

/** Path parameters: an item index is an integer, every other parameter an id string. */
function parametersOf(path: string): Json[] {
  return [...path.matchAll(/\{([A-Za-z_]+)\}/g)].map(([, name]) => ({
    name,
    in: 'path',
    required: true,
    schema: name === 'index' ? { type: 'integer', minimum: 0 } : { type: 'string' },
  }));
}

/**
 * The OpenAPI 3.1 document of /api/v1, built from @compresso/schema's route table: every route of
 * the table and no other, its auth, bodies (component schemas from zod, so what is documented is
 * what the server validates with) and headers (the result facts through the table's codec).
 */
export function openApiDocument(config: Config): Json {
  return withIdempotency(document(config));
}

function document(config: Config): Json {
  const components = openApiComponents();
  const optionProperties = components.schemas.CompressOptions?.properties as Json | undefined;
  const resultDescriptions = (components.schemas.InfoResult?.properties ?? {}) as Record<
    string,
    { description?: string }
  >;
  const resultHeader = (field: ResultHeaderField): [string, Json] => {
    const spec = RESULT_HEADERS[field];
    return [
      resultHeaderName(field),
      {
        description: resultDescriptions[field]?.description ?? field,
        required: spec.required,
        schema: { type: spec.type },
      },
    ];
  };
  const multipart = (
    files: 'one' | 'many',
    fieldProperties: Json | undefined = optionProperties,
    required: string[] = [],
  ): Json => ({
    'multipart/form-data': {
      schema: {
        // The options' properties beside `file` in one object: an allOf with the strict
        // CompressOptions schema (additionalProperties: false) would forbid `file` itself.
        type: 'object',
        required: ['file', ...required],
        additionalProperties: false,
        properties: {
          file:
            files === 'one'
              ? { type: 'string', contentMediaType: 'application/octet-stream', description: 'The image.' }
              : {
                  type: 'array',
                  items: { type: 'string', contentMediaType: 'application/octet-stream' },
                  description: 'The images, one part each.',
                },
          ...fieldProperties,
        },
      },
    },
  });
  const urlBatch = components.schemas.UrlBatchRequest as { properties: Record<string, Json> };
  const docs = routeDocs(config);
  const paths: Record<string, Record<string, Json>> = {};
  for (const id of ROUTE_IDS) {
    const route: RouteSpec = API_ROUTES[id];
    const bodies: RouteBodies = ROUTE_BODIES[id];
    const doc = docs[id];
    let requestBody: Json | undefined;
    if (route.request === 'image-form') {
      const formName = schemaNameOf(bodies.form);
      const formSchema = formName
        ? (components.schemas[formName] as { properties?: Json; required?: string[] })
        : undefined;
      requestBody = {
        required: true,
        content: formSchema
          ? multipart('one', formSchema.properties, formSchema.required ?? [])
          : multipart('one'),
      };
    } else if (route.request === 'batch') {
      requestBody = {
        required: true,
        content: {
          ...multipart('many'),
          'application/json': {
            schema: {
              ...urlBatch,
              properties: {
                ...urlBatch.properties,
                urls: { ...urlBatch.properties.urls, maxItems: config.maxBatchItems },
                options: ref('CompressOptions'),
              },
            },
          },
        },
      };
    } else if (route.request === 'json') {
      const name = schemaNameOf(bodies.json) ?? 'CreateKeyRequest';
      const required = ((components.schemas[name] as { required?: string[] }).required ?? []).length > 0;
      requestBody = { required, content: { 'application/json': { schema: ref(name) } } };
    }
    const headers: Json = { ...requestIdHeader(), ...(route.auth === 'key' ? rateHeaders() : {}) };
    if (route.resultHeaders) {
      const fields = (
        route.resultHeaders === 'all' ? Object.keys(RESULT_HEADERS) : route.resultHeaders
      ) as ResultHeaderField[];
      Object.assign(headers, Object.fromEntries(fields.map(resultHeader)));
    }
    if (route.status === 202) headers.Location = apiHeader('Location', 'The job URL.');
    for (const [name, always] of Object.entries(route.headers ?? {}) as [ApiHeaderName, boolean][]) {
      headers[name] = { ...apiHeader(name), required: always };
    }
    const responseName = schemaNameOf(bodies.response);
    const content =
      route.response === 'image'
        ? imageContent()
        : route.response === 'html'
          ? { 'text/html': { schema: { type: 'string' } } }
          : { 'application/json': { schema: responseName ? ref(responseName) : { type: 'object' } } };
    const parameters = parametersOf(route.path);
    paths[route.path] = {
      ...paths[route.path],
      [route.method.toLowerCase()]: {
        operationId: id,
        summary: doc.summary,
        ...(doc.description ? { description: doc.description } : {}),
        ...(route.auth === 'none' ? { security: [] } : {}),
        ...(route.auth === 'optional' ? { security: [{}, { apiKey: [] }] } : {}),
        ...(route.auth === 'operator' ? { security: [{ operatorToken: [] }] } : {}),
        ...(parameters.length ? { parameters } : {}),
        ...(requestBody ? { requestBody } : {}),
        responses: {
          [String(route.status)]: { description: doc.success, headers, content },
          ...errorsWithHeaders(doc.errors ?? {}, route.auth === 'key'),
        },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Compresso API',
      version: '1.0.0',
      description:
        'Compress and convert images. Every /api/v1 request except the documentation carries `Authorization: Bearer <API key>`; ' +
        `the Pro plan includes ${config.proDailyLimit} requests a day per account (all keys together), reset at 00:00 UTC. ` +
        'Every authenticated request counts, 4xx answers included; 401, 403, 429 and 5xx answers do not. ' +
        'A method a path does not answer gets 405 METHOD_NOT_ALLOWED with `Allow`.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: '/' }],
    security: [{ apiKey: [] }],
    paths,
    components: {
      ...components,
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key, `cmp_live_…`.' },
        operatorToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'The server operator’s COMPRESSO_ADMIN_TOKEN (operator routes only).',
        },
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Idempotency-Key: applied to the table-made document above as one piece — the header on every
// idempotent submission, the replay marker on its success answers, and the two answers it adds.

/** The submissions that take an Idempotency-Key: `path` → method. */
export const IDEMPOTENT_OPERATIONS: Record<string, 'post'> = {
  '/api/v1/compress': 'post',
  '/api/v1/info': 'post',
  '/api/v1/jobs': 'post',
  '/api/v1/generate': 'post',
  '/api/v1/edit': 'post',
  '/api/v1/alt-text': 'post',
};

const idempotencyParameter: Json = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]+$' },
  description:
    'Makes a retry safe: within 24 h, a request with the same key (per API key) and the same content (route, ' +
    'option fields in any order, file names and bytes; for JSON, the same members) gets the first answer again — ' +
    'status, headers and body, the image bytes included — marked `Idempotent-Replayed: true`, and is not counted ' +
    'again. The first request is counted when it claims the key. 5xx and 429 answers are not kept: a retry after ' +
    'them runs afresh. The clients send one automatically.',
};

function withIdempotency(doc: Json): Json {
  const paths = doc.paths as Record<string, Record<string, Json>>;
  for (const [path, method] of Object.entries(IDEMPOTENT_OPERATIONS)) {
    const operation = paths[path]?.[method];
    if (!operation) continue;
    operation.parameters = [...((operation.parameters as Json[] | undefined) ?? []), idempotencyParameter];
    const responses = operation.responses as Record<string, Json>;
    for (const [status, response] of Object.entries(responses)) {
      if (!status.startsWith('2')) continue;
      response.headers = {
        ...(response.headers as Json | undefined),
        'Idempotent-Replayed': {
          description: '"true" on an answer replayed for a repeated Idempotency-Key.',
          schema: { type: 'string' },
        },
      };
    }
    responses['409'] = {
      ...errorResponse(
        409,
        'IDEMPOTENCY_KEY_IN_USE: the first request with this Idempotency-Key was still running after 60 s; retry after Retry-After seconds for its answer.',
      ),
      headers: {
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
      },
    };
    const reused =
      'IDEMPOTENCY_KEY_REUSED: the Idempotency-Key was used within 24 h for a different request (route, file or options).';
    const existing = responses['422'] as { description?: string } | undefined;
    responses['422'] = existing
      ? { ...existing, description: `${existing.description} Or ${reused}` }
      : errorResponse(422, reused);
  }
  return doc;
}
