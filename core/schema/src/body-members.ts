// Imports nothing: built into the Node client (see error-codes.ts).

/**
 * The members of the JSON bodies a client turns into its own objects (keys, usage, jobs), keyed by
 * the name of their schema in contract.ts; a nested body (a job's `progress`, each of its `items`)
 * has its own entry. Schema's test checks each list is exactly its zod object's members, so a member
 * added to a body reaches every client that maps through this table (the Node client's
 * `bodyFromWire`), and the clients' own drift tests fail until their types follow.
 */
export const BODY_MEMBERS = {
  Usage: ['plan', 'day', 'used', 'limit', 'remaining', 'resets_at', 'resets_in_seconds'],
  ApiKey: ['id', 'name', 'prefix', 'created_at', 'last_used_at', 'revoked_at'],
  CreatedApiKey: ['id', 'name', 'prefix', 'created_at', 'last_used_at', 'revoked_at', 'key'],
  RevokedApiKey: ['id', 'revoked'],
  BatchJob: ['id', 'status', 'created_at', 'status_url', 'options', 'progress', 'items'],
  BatchJobProgress: ['total', 'done', 'failed', 'queued', 'percent'],
  BatchItem: [
    'index',
    'name',
    'url',
    'status',
    'input_size',
    'output_size',
    'savings_percent',
    'output_format',
    'output_name',
    'width',
    'height',
    'error',
    'download_url',
    'finished_at',
  ],
} as const satisfies Record<string, readonly string[]>;

export type BodyName = keyof typeof BODY_MEMBERS;
