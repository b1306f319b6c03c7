import type { Config } from '@compresso/runtime';
import { ERROR_STATUS, type ErrorCode, openApiComponents } from '@compresso/schema';

type Json = Record<string, unknown>;

const errorRef = { $ref: '#/components/schemas/ErrorBody' };

function codesWith(status: number): ErrorCode[] {
  return (Object.keys(ERROR_STATUS) as ErrorCode[]).filter((code) => ERROR_STATUS[code] === status);
}

function errorResponse(status: number, when: string): Json {
  return {
    description: `${when} Codes: ${codesWith(status).join(', ')}.`,
    content: { 'application/json': { schema: errorRef } },
  };
}

const rateHeaders: Json = {
  'RateLimit-Limit': { description: "The account's daily request limit.", schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left today.', schema: { type: 'integer' } },
  'RateLimit-Reset': {
    description: 'Seconds until the quota resets (00:00 UTC).',
    schema: { type: 'integer' },
  },
  'X-Request-Id': { description: 'Identifies this request in the logs.', schema: { type: 'string' } },
};

const authErrors = (): Json => ({
  '401': errorResponse(401, 'Missing, malformed, unknown or revoked API key.'),
  '403': errorResponse(403, 'The account has no plan that includes the API.'),
  '429': {
    ...errorResponse(
      429,
      'The daily quota is used up. Retry-After gives the seconds to the reset; X-Should-Retry is false.',
    ),
    headers: {
      'Retry-After': { description: 'Seconds until the quota resets.', schema: { type: 'integer' } },
      'X-Should-Retry': {
        description: 'Always "false": retrying before the reset cannot succeed.',
        schema: { type: 'string' },
      },
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
    headers: {
      'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
    },
  },
});

const infoHeaderNames = [
  ['X-Input-Size', 'Input bytes.'],
  ['X-Output-Size', 'Output bytes.'],
  ['X-Savings-Percent', 'Share of the input saved, in percent.'],
  ['X-Width', 'Output width in pixels.'],
  ['X-Height', 'Output height in pixels.'],
  ['X-Input-Format', 'Format of the input.'],
  ['X-Output-Format', 'Format of the output.'],
  ['X-Input-Width', 'Input width in pixels, after orientation.'],
  ['X-Input-Height', 'Input height in pixels, after orientation.'],
  ['X-Quality', 'Quality used (1–100; the one chosen when quality was "auto").'],
  ['X-Auto-Quality', 'true when quality "auto" chose the quality and settings.'],
  ['X-Optimized', 'false when the input was returned unchanged.'],
  ['X-Metadata-Stripped', 'true when EXIF, XMP and IPTC were removed.'],
  [
    'X-Score',
    'SSIMULACRA2 of the output against the resized input, when one was computed (always for quality "auto").',
  ],
  [
    'X-Chroma-Subsampling',
    'JPEG and lossy AVIF: 4:2:0 or 4:4:4 (quality "auto" picks 4:4:4 for text, sharp colour edges and small images).',
  ],
  [
    'X-Lossless',
    'WebP, AVIF, PNG: true for a lossless output (quality "auto" may choose lossless WebP for screenshots and graphics).',
  ],
  ['X-Near-Lossless', 'WebP: true when written near-lossless (quality "auto" on small images).'],
  ['X-Effort', 'Encoder effort (WebP method, AVIF effort, palette PNG effort), when the format has one.'],
  ['X-Auto-Steps', 'Quality "auto": candidate encodes scored to choose the output.'],
] as const;

const nullable = (type: string, description?: string): Json => ({
  type: [type, 'null'],
  ...(description ? { description } : {}),
});

/** GET /api/v1/jobs/{id} and the 202 of POST /api/v1/jobs (jobs/batch.ts batchView). */
const batchJobSchema: Json = {
  type: 'object',
  required: ['id', 'status', 'created_at', 'status_url', 'options', 'progress', 'items'],
  properties: {
    id: { type: 'string', examples: ['job_Ab3dEf9hIj2k'] },
    status: {
      enum: ['queued', 'running', 'completed'],
      description: '`completed` once every item is done or failed; see `progress.failed`.',
    },
    created_at: { type: 'string', format: 'date-time' },
    status_url: { type: 'string', description: 'This job, to poll.' },
    options: { type: 'object', description: 'The compress options applied to every item, as validated.' },
    progress: {
      type: 'object',
      required: ['total', 'done', 'failed', 'queued', 'percent'],
      properties: {
        total: { type: 'integer' },
        done: { type: 'integer' },
        failed: { type: 'integer' },
        queued: { type: 'integer', description: 'Waiting or being worked on.' },
        percent: { type: 'integer', description: 'Finished items (done or failed), in percent.' },
      },
    },
    items: {
      type: 'array',
      description: 'One entry per file or URL, in the order sent.',
      items: {
        type: 'object',
        required: ['index', 'name', 'status', 'error', 'download_url'],
        properties: {
          index: { type: 'integer' },
          name: { type: 'string', description: 'The upload file name, or the last segment of the URL.' },
          url: { type: 'string', description: 'The URL fetched (URL batches only).' },
          status: { enum: ['queued', 'done', 'failed'] },
          input_size: nullable('integer'),
          output_size: nullable('integer'),
          savings_percent: nullable('number'),
          output_format: nullable('string'),
          output_name: nullable('string', 'The download name: the input name with the new extension.'),
          width: nullable('integer'),
          height: nullable('integer'),
          error: {
            oneOf: [
              { type: 'null' },
              {
                type: 'object',
                required: ['code', 'message'],
                properties: {
                  code: { type: 'string' },
                  message: { type: 'string' },
                  status: { type: 'integer', description: 'The status a single request would answer with.' },
                },
              },
            ],
            description:
              'Why the item failed (an error code of the table, e.g. CORRUPT_IMAGE, URL_FETCH_FAILED).',
          },
          download_url: nullable('string', 'The result, once the item is done.'),
          finished_at: nullable('string'),
        },
      },
    },
  },
};

/**
 * The OpenAPI 3.1 document of /api/v1. Component schemas come from @compresso/schema, so the options
 * and results documented here are the ones the server validates with.
 */
export function openApiDocument(config: Config): Json {
  return withIdempotency(document(config));
}

function document(config: Config): Json {
  const components = openApiComponents();
  const multipart = {
    required: true,
    content: {
      'multipart/form-data': {
        schema: {
          // The options' properties beside `file` in one object: an allOf with the strict
          // CompressOptions schema (additionalProperties: false) would forbid `file` itself.
          type: 'object',
          required: ['file'],
          additionalProperties: false,
          properties: {
            file: { type: 'string', contentMediaType: 'application/octet-stream', description: 'The image.' },
            ...(components.schemas.CompressOptions?.properties as Json | undefined),
          },
        },
      },
    },
  };
  const infoHeaders = Object.fromEntries(
    infoHeaderNames.map(([name, description]) => [name, { description, schema: { type: 'string' } }]),
  );
  const keyView = {
    type: 'object',
    required: ['id', 'name', 'prefix', 'created_at', 'last_used_at', 'revoked_at'],
    properties: {
      id: { type: 'string', examples: ['key_Ab3dEf9hIj2k'] },
      name: { type: 'string' },
      prefix: {
        type: 'string',
        description: 'The visible, non-secret start of the key.',
        examples: ['cmp_live_Q2x9LmPa'],
      },
      created_at: { type: 'string', format: 'date-time' },
      last_used_at: {
        type: ['string', 'null'],
        format: 'date-time',
        description: 'Updated at most once a minute.',
      },
      revoked_at: { type: ['string', 'null'], format: 'date-time' },
    },
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Compresso API',
      version: '1.0.0',
      description:
        'Compress and convert images. Every /api/v1 request except the documentation carries `Authorization: Bearer <API key>`; ' +
        `the Pro plan includes ${config.proDailyLimit} requests a day per account (all keys together), reset at 00:00 UTC. ` +
        'Every authenticated request counts, 4xx answers included; 401, 403, 429 and 5xx answers do not.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: '/' }],
    security: [{ apiKey: [] }],
    paths: {
      '/api/v1/compress': {
        post: {
          operationId: 'compress',
          summary: 'Compress or convert one image',
          description: 'Answers the image bytes. The compression facts are in the X-* headers.',
          requestBody: multipart,
          responses: {
            '200': {
              description:
                'The compressed image, named after the upload with the new extension (Content-Disposition).',
              headers: { ...rateHeaders, ...infoHeaders },
              content: Object.fromEntries(
                ['image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/gif'].map((t) => [
                  t,
                  { schema: { type: 'string', contentMediaType: t } },
                ]),
              ),
            },
            ...imageErrors(config),
            ...authErrors(),
          },
        },
      },
      '/api/v1/info': {
        post: {
          operationId: 'info',
          summary: 'What compression would do, without keeping anything',
          requestBody: multipart,
          responses: {
            '200': {
              description: 'The compression facts.',
              headers: rateHeaders,
              content: { 'application/json': { schema: { $ref: '#/components/schemas/InfoResult' } } },
            },
            ...imageErrors(config),
            ...authErrors(),
          },
        },
      },
      '/api/v1/key': {
        post: {
          operationId: 'createKey',
          summary: "Create an API key for the caller's account",
          description: 'The secret is in this answer only; it is stored as a hash and cannot be shown again.',
          requestBody: {
            required: false,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  additionalProperties: false,
                  properties: { name: { type: 'string', maxLength: 100 } },
                },
              },
            },
          },
          responses: {
            '201': {
              description: 'The new key, with its secret.',
              headers: rateHeaders,
              content: {
                'application/json': {
                  schema: {
                    ...keyView,
                    required: [...keyView.required, 'key'],
                    properties: {
                      ...keyView.properties,
                      key: { type: 'string', description: 'The secret: `cmp_live_` and 43 characters.' },
                    },
                  },
                },
              },
            },
            '400': errorResponse(400, 'The body is not {"name": string}.'),
            '409': errorResponse(409, 'The account has the most active keys allowed.'),
            ...authErrors(),
          },
        },
      },
      '/api/v1/keys': {
        get: {
          operationId: 'listKeys',
          summary: "The account's active keys (never their secrets)",
          responses: {
            '200': {
              description: 'Active keys, oldest first.',
              headers: rateHeaders,
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    required: ['keys'],
                    properties: { keys: { type: 'array', items: keyView } },
                  },
                },
              },
            },
            ...authErrors(),
          },
        },
      },
      '/api/v1/keys/{id}': {
        delete: {
          operationId: 'revokeKey',
          summary: 'Revoke a key; it stops working at once',
          description:
            'Answered even when the daily quota is used up, so a leaked key can always be revoked.',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: {
            '200': {
              description: 'Revoked.',
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    properties: { id: { type: 'string' }, revoked: { const: true } },
                  },
                },
              },
            },
            '404': errorResponse(404, "No active key with this id in the caller's account."),
            ...authErrors(),
          },
        },
      },
      '/api/v1/usage': {
        get: {
          operationId: 'usage',
          summary: "Today's usage of the account's quota (this request included)",
          responses: {
            '200': {
              description: 'Usage.',
              headers: rateHeaders,
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    required: ['plan', 'day', 'used', 'limit', 'remaining', 'resets_at', 'resets_in_seconds'],
                    properties: {
                      plan: { type: 'string' },
                      day: { type: 'string', format: 'date', description: 'The UTC day counted.' },
                      used: { type: 'integer' },
                      limit: { type: 'integer' },
                      remaining: { type: 'integer' },
                      resets_at: { type: 'string', format: 'date-time' },
                      resets_in_seconds: { type: 'integer' },
                    },
                  },
                },
              },
            },
            ...authErrors(),
          },
        },
      },
      '/api/v1/jobs': {
        post: {
          operationId: 'createJob',
          summary: 'Compress many images in the background',
          description:
            `A batch of up to ${config.maxBatchItems} images, either uploaded (multipart, one \`file\` part per image, plus the compress options once) ` +
            'or fetched by the server from public http(s) URLs (JSON). Answers at once with the job; poll `status_url` and download each result ' +
            'as soon as it is done. A batch of n items counts n requests of the daily quota, reserved whole at submission (refused whole with ' +
            '429 when they do not fit); reading progress and downloading results are not counted. Items that fail through our fault are given back.',
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  required: ['file'],
                  properties: {
                    file: {
                      type: 'array',
                      items: { type: 'string', contentMediaType: 'application/octet-stream' },
                      description: 'The images, one part each.',
                    },
                    ...(components.schemas.CompressOptions?.properties as Json | undefined),
                  },
                },
              },
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['urls'],
                  additionalProperties: false,
                  properties: {
                    urls: {
                      type: 'array',
                      minItems: 1,
                      maxItems: config.maxBatchItems,
                      items: { type: 'string', format: 'uri', maxLength: 2048 },
                      description:
                        'Public http(s) URLs. Addresses that are private, loopback, link-local or reserved are refused (URL_NOT_ALLOWED), also after redirects and DNS resolution.',
                    },
                    options: { $ref: '#/components/schemas/CompressOptions' },
                  },
                },
              },
            },
          },
          responses: {
            '202': {
              description: 'Queued. `Location` is the job.',
              headers: {
                ...rateHeaders,
                Location: { description: 'The job URL.', schema: { type: 'string' } },
              },
              content: { 'application/json': { schema: batchJobSchema } },
            },
            ...imageErrors(config),
            '400': errorResponse(
              400,
              'No file, too many items, a bad option (`details` names the field), or a URL that is not allowed (`urls[i]`).',
            ),
            ...authErrors(),
          },
        },
      },
      '/api/v1/jobs/{id}': {
        get: {
          operationId: 'getJob',
          summary: 'Progress and per-item results of a batch job (not counted against the quota)',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: {
            '200': {
              description: 'The job.',
              headers: rateHeaders,
              content: { 'application/json': { schema: batchJobSchema } },
            },
            '404': errorResponse(404, "No job with this id in the caller's account."),
            ...authErrors(),
          },
        },
      },
      '/api/v1/jobs/{id}/items/{index}': {
        get: {
          operationId: 'getJobItem',
          summary: 'Download one finished result (not counted against the quota)',
          parameters: [
            { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
            { name: 'index', in: 'path', required: true, schema: { type: 'integer', minimum: 0 } },
          ],
          responses: {
            '200': {
              description:
                'The compressed image, with Content-Disposition naming it and the same X-* facts as a /compress answer.',
              headers: { ...rateHeaders, ...infoHeaders },
              content: Object.fromEntries(
                ['image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/gif'].map((t) => [
                  t,
                  { schema: { type: 'string', contentMediaType: t } },
                ]),
              ),
            },
            '404': errorResponse(404, "No such job in the caller's account, or no such item."),
            '409': errorResponse(409, 'The item is not done: still queued, or failed (`details.status`).'),
            ...authErrors(),
          },
        },
      },
      '/api/v1/openapi.json': {
        get: {
          operationId: 'openapi',
          summary: 'This document',
          security: [],
          responses: { '200': { description: 'OpenAPI 3.1.' } },
        },
      },
      '/api/v1/docs': {
        get: {
          operationId: 'docs',
          summary: 'The API reference as HTML',
          security: [],
          responses: { '200': { description: 'HTML.' } },
        },
      },
      '/healthz': {
        get: {
          operationId: 'healthz',
          summary: 'The process is alive',
          security: [],
          responses: { '200': { description: 'Alive.' } },
        },
      },
      '/readyz': {
        get: {
          operationId: 'readyz',
          summary: 'The database answers',
          security: [],
          responses: {
            '200': { description: 'Ready.' },
            '503': errorResponse(503, 'The database does not answer.'),
          },
        },
      },
    },
    components: {
      ...components,
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key, `cmp_live_…`.' },
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Idempotency-Key (issue 13). Kept apart from the document above, and applied to it, so the move of
// this document onto the contract table can take it over as one piece: the header on every
// idempotent submission, the replay marker on its success answers, and the two answers it adds.

/** The submissions that take an Idempotency-Key: `path` → method. */
export const IDEMPOTENT_OPERATIONS: Record<string, 'post'> = {
  '/api/v1/compress': 'post',
  '/api/v1/info': 'post',
  '/api/v1/jobs': 'post',
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
