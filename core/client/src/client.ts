import type {
  ApiKey,
  BatchItem,
  ClientOptions,
  CompressBatchOptions,
  CompressOptions,
  CompressResult,
  CreatedApiKey,
  CreateKeyOptions,
  ImageInput,
  InfoOptions,
  InfoResult,
  RequestOptions,
  RevokedApiKey,
  Usage,
} from './types.ts';

export const DEFAULT_BASE_URL = 'http://localhost:3000';

/** `client.keys`: the API keys of the caller's account. */
export class Keys {
  readonly #client: Compresso;
  constructor(client: Compresso) {
    this.#client = client;
  }
  /** POST /api/v1/key — a new key; its secret (`key`) is only in this answer. */
  create(_options: CreateKeyOptions = {}): Promise<CreatedApiKey> {
    throw new Error('not implemented yet');
  }
  /** GET /api/v1/keys — the account's active keys (never a secret). */
  list(_options: RequestOptions = {}): Promise<ApiKey[]> {
    throw new Error('not implemented yet');
  }
  /** DELETE /api/v1/keys/{id} — the key fails from the next request on. */
  revoke(_id: string, _options: RequestOptions = {}): Promise<RevokedApiKey> {
    throw new Error('not implemented yet');
  }
}

export class Compresso {
  readonly baseUrl: string;
  readonly keys: Keys;

  constructor(apiKey?: string, options: ClientOptions = {}) {
    this.baseUrl = options.baseUrl ?? DEFAULT_BASE_URL;
    this.keys = new Keys(this);
    void apiKey;
  }

  compress(_input: ImageInput, _options: CompressOptions = {}): Promise<CompressResult> {
    throw new Error('not implemented yet');
  }

  info(_input: ImageInput, _options: InfoOptions = {}): Promise<InfoResult> {
    throw new Error('not implemented yet');
  }

  compressBatch(_inputs: readonly ImageInput[], _options: CompressBatchOptions = {}): Promise<BatchItem[]> {
    throw new Error('not implemented yet');
  }

  usage(_options: RequestOptions = {}): Promise<Usage> {
    throw new Error('not implemented yet');
  }
}

/** Same as `new Compresso(apiKey, options)`. */
export function createClient(apiKey?: string, options: ClientOptions = {}): Compresso {
  return new Compresso(apiKey, options);
}
