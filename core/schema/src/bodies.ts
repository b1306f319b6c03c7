import { z } from 'zod';
import { ErrorCodeSchema } from './errors.ts';
import { OutputFormatSchema } from './format-schemas.ts';

/** Longest key name `POST /api/v1/key` accepts (the runtime stores at most this). */
export const KEY_NAME_MAX = 100;
/** Longest URL a URL batch accepts. */
export const BATCH_URL_MAX = 2048;

export const CreateKeyRequestSchema = z
  .object({ name: z.string().max(KEY_NAME_MAX).optional().describe('A label for the key.') })
  .strict()
  .describe('The optional body of POST /api/v1/key.');
export type CreateKeyRequest = z.infer<typeof CreateKeyRequestSchema>;

export const ApiKeySchema = z
  .object({
    id: z.string().meta({ examples: ['key_Ab3dEf9hIj2k'] }),
    name: z.string(),
    prefix: z
      .string()
      .describe('The visible, non-secret start of the key.')
      .meta({ examples: ['cmp_live_Q2x9LmPa'] }),
    created_at: z.iso.datetime({ offset: true }),
    last_used_at: z.iso.datetime({ offset: true }).nullable().describe('Updated at most once a minute.'),
    revoked_at: z.iso.datetime({ offset: true }).nullable(),
  })
  .describe('An API key, never its secret.');
export type ApiKey = z.infer<typeof ApiKeySchema>;

export const CreatedApiKeySchema = ApiKeySchema.extend({
  key: z.string().describe('The secret: `cmp_live_` and 43 characters. In this answer only.'),
}).describe('A new key, with its secret.');
export type CreatedApiKey = z.infer<typeof CreatedApiKeySchema>;

export const OperatorAccountRequestSchema = z
  .object({
    email: z.string().max(254).describe("The account's address; an account with it already is reused."),
    key_name: z.string().max(KEY_NAME_MAX).optional().describe('A label for the new key.'),
    plan: z
      .enum(['free', 'pro'])
      .optional()
      .describe('Set the account to this plan (the API needs `pro`); unchanged when absent.'),
  })
  .strict()
  .describe('The body of POST /api/v1/operator/accounts.');
export type OperatorAccountRequest = z.infer<typeof OperatorAccountRequestSchema>;

export const ProvisionedAccountSchema = z
  .object({
    account: z.object({
      id: z.string().meta({ examples: ['acc_Ab3dEf9hIj2k'] }),
      email: z.string(),
      plan: z.string(),
      created_at: z.iso.datetime({ offset: true }),
    }),
    account_created: z.boolean().describe('False when an account with this address existed and was reused.'),
    key: CreatedApiKeySchema,
  })
  .describe('An account (made or reused) with a new key for it, secret included.');
export type ProvisionedAccount = z.infer<typeof ProvisionedAccountSchema>;

export const ApiKeyListSchema = z
  .object({ keys: z.array(ApiKeySchema).describe('Active keys, oldest first.') })
  .describe("The account's active keys.");
export type ApiKeyList = z.infer<typeof ApiKeyListSchema>;

export const RevokedApiKeySchema = z
  .object({ id: z.string(), revoked: z.literal(true) })
  .describe('A revoked key.');
export type RevokedApiKey = z.infer<typeof RevokedApiKeySchema>;

export const UsageSchema = z
  .object({
    plan: z.string(),
    day: z.iso.date().describe('The UTC day counted.'),
    used: z.int().nonnegative(),
    limit: z.int().nonnegative(),
    remaining: z.int().nonnegative(),
    resets_at: z.iso.datetime({ offset: true }),
    resets_in_seconds: z.int().nonnegative(),
  })
  .describe("Today's usage of the account's quota (the request that asks included).");
export type Usage = z.infer<typeof UsageSchema>;

export const UrlBatchRequestSchema = z
  .object({
    urls: z
      .array(z.string().max(BATCH_URL_MAX))
      .min(1)
      .describe(
        'Public http(s) URLs. Addresses that are private, loopback, link-local or reserved are refused (URL_NOT_ALLOWED), also after redirects and DNS resolution.',
      ),
    options: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('The compress options (CompressOptions), applied to every item.'),
  })
  .strict()
  .describe('A batch of images the server fetches.');
export type UrlBatchRequest = z.infer<typeof UrlBatchRequestSchema>;

export const BATCH_STATUSES = ['queued', 'running', 'completed'] as const;
export const BATCH_ITEM_STATUSES = ['queued', 'done', 'failed'] as const;

export const BatchItemSchema = z.object({
  index: z.int().nonnegative(),
  name: z.string().describe('The upload file name, or the last segment of the URL.'),
  url: z.string().optional().describe('The URL fetched (URL batches only).'),
  status: z.enum(BATCH_ITEM_STATUSES),
  input_size: z.int().nonnegative().nullable(),
  output_size: z.int().nonnegative().nullable(),
  savings_percent: z.number().nullable(),
  output_format: OutputFormatSchema.nullable(),
  output_name: z.string().nullable().describe('The download name: the input name with the new extension.'),
  width: z.int().positive().nullable(),
  height: z.int().positive().nullable(),
  error: z
    .object({
      code: ErrorCodeSchema,
      message: z.string(),
      status: z.int().optional().describe('The status a single request would answer with.'),
    })
    .nullable()
    .describe('Why the item failed (an error code of the table, e.g. CORRUPT_IMAGE, URL_FETCH_FAILED).'),
  download_url: z.string().nullable().describe('The result, once the item is done.'),
  finished_at: z.iso.datetime({ offset: true }).nullable(),
});
export type BatchItem = z.infer<typeof BatchItemSchema>;

export const BatchJobSchema = z
  .object({
    id: z.string().meta({ examples: ['job_Ab3dEf9hIj2k'] }),
    status: z
      .enum(BATCH_STATUSES)
      .describe('`completed` once every item is done or failed; see `progress.failed`.'),
    created_at: z.iso.datetime({ offset: true }),
    status_url: z.string().describe('This job, to poll.'),
    options: z
      .record(z.string(), z.unknown())
      .describe('The compress options applied to every item, as validated.'),
    progress: z.object({
      total: z.int().nonnegative(),
      done: z.int().nonnegative(),
      failed: z.int().nonnegative(),
      queued: z.int().nonnegative().describe('Waiting or being worked on.'),
      percent: z.int().min(0).max(100).describe('Finished items (done or failed), in percent.'),
    }),
    items: z.array(BatchItemSchema).describe('One entry per file or URL, in the order sent.'),
  })
  .describe('A batch job: progress and one entry per item.');
export type BatchJob = z.infer<typeof BatchJobSchema>;

export const HealthSchema = z.object({ status: z.literal('ok') }).describe('The process is alive.');
export const ReadySchema = z
  .object({ status: z.literal('ready'), database: z.string().describe('The database kind.') })
  .describe('The database answers.');
