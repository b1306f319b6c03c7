import type { AiModel } from '@compresso/schema';
import { nearestAspectRatio } from './aspect.ts';
import type { AiProvider, EditInput, GenerateInput } from './provider.ts';
import {
  contentRefused,
  fetchImage,
  type ProviderCall,
  providerError,
  providerFetch,
  rateLimited,
  readJson,
  str,
  timedOut,
} from './provider-http.ts';

export const REPLICATE_DEFAULT_MODELS: Record<AiModel, string> = {
  fast: 'black-forest-labs/flux-schnell',
  photo: 'black-forest-labs/flux-1.1-pro',
  design: 'ideogram-ai/ideogram-v3-turbo',
  icon: 'recraft-ai/recraft-v3',
};
export const REPLICATE_DEFAULT_EDIT_MODEL = 'black-forest-labs/flux-kontext-pro';

/** The aspect_ratio values each known model's input schema accepts (its page on replicate.com). */
const FLUX_RATIOS = ['1:1', '16:9', '21:9', '3:2', '2:3', '4:5', '5:4', '3:4', '4:3', '9:16', '9:21'];
const RATIOS: Record<string, readonly string[]> = {
  'black-forest-labs/flux-schnell': FLUX_RATIOS,
  'black-forest-labs/flux-dev': FLUX_RATIOS,
  'black-forest-labs/flux-1.1-pro': ['1:1', '16:9', '3:2', '2:3', '4:5', '5:4', '9:16', '3:4', '4:3'],
  'ideogram-ai/ideogram-v3-turbo': [
    '1:1',
    '16:9',
    '9:16',
    '3:2',
    '2:3',
    '4:3',
    '3:4',
    '5:4',
    '4:5',
    '16:10',
    '10:16',
    '2:1',
    '1:2',
    '3:1',
    '1:3',
  ],
  'recraft-ai/recraft-v3': [
    '1:1',
    '4:3',
    '3:4',
    '3:2',
    '2:3',
    '16:9',
    '9:16',
    '1:2',
    '2:1',
    '7:5',
    '5:7',
    '4:5',
    '5:4',
    '3:5',
    '5:3',
  ],
};

/** Error words Replicate's models use when their safety checker refuses an output or a prompt. */
const REFUSAL = /nsfw|safety|sensitive|flagged|content policy|inappropriate/i;

export interface ReplicateOptions {
  token: string;
  /** With the /v1, e.g. https://api.replicate.com/v1. */
  baseUrl: string;
  timeoutMs: number;
  models?: Partial<Record<AiModel, string | undefined>>;
  editModel?: string | undefined;
  /** First pause between polls; doubled up to 2 s. */
  pollMs?: number;
}

const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'aborted']);

/**
 * Replicate: a prediction is created (`POST /models/{owner}/{name}/predictions`, or `POST
 * /predictions` with a `version` for `owner/name:version` ids), then polled at its `urls.get` until
 * it succeeds, fails or is canceled; the output is a URL (or a list of them) to download. No vision
 * model is wired for alt text: with Replicate alone, alt text is written offline.
 */
export function replicateProvider(options: ReplicateOptions): AiProvider {
  const models = { ...REPLICATE_DEFAULT_MODELS } as Record<AiModel, string>;
  for (const [name, id] of Object.entries(options.models ?? {})) if (id) models[name as AiModel] = id;
  const editModel = options.editModel ?? REPLICATE_DEFAULT_EDIT_MODEL;
  const headers = { Authorization: `Bearer ${options.token}`, 'Content-Type': 'application/json' };
  const firstPause = options.pollMs ?? 500;
  const ratiosOf = (model: string) => RATIOS[model.split(':')[0]!] ?? FLUX_RATIOS;

  async function failure(c: ProviderCall, res: Response): Promise<never> {
    const body = await readJson(c, res).catch(() => undefined);
    if (res.status === 429) throw rateLimited('replicate', res.headers.get('retry-after'));
    const detail = str(body, 'detail') ?? str(body, 'title');
    if (detail && REFUSAL.test(detail)) throw contentRefused('replicate', detail);
    if (res.status === 401 || res.status === 403)
      throw providerError(
        'replicate',
        'status',
        `refused the server's credentials (HTTP ${res.status}); the operator must check REPLICATE_API_TOKEN.`,
        {
          status: res.status,
        },
      );
    throw providerError('replicate', 'status', `answered HTTP ${res.status}.`, { status: res.status });
  }

  const pause = (ms: number, signal: AbortSignal) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });

  async function run(c: ProviderCall, model: string, input: Record<string, unknown>): Promise<Buffer> {
    const [name, version] = model.split(':');
    const created = await providerFetch(
      c,
      version ? `${options.baseUrl}/predictions` : `${options.baseUrl}/models/${name}/predictions`,
      {
        method: 'POST',
        // Let Replicate hold the answer up to 10 s: fast models then finish without a poll.
        headers: { ...headers, Prefer: 'wait=10' },
        body: JSON.stringify(version ? { version, input } : { input }),
      },
    );
    if (!created.ok) return failure(c, created);
    let prediction = await readJson(c, created);
    for (let wait = firstPause; ; wait = Math.min(wait * 2, 2000)) {
      const status = str(prediction, 'status');
      if (!status) throw providerError('replicate', 'malformed', 'answered a prediction without a status.');
      if (TERMINAL.has(status)) break;
      const get = str(prediction, 'urls', 'get');
      if (!get || !/^https?:\/\//.test(get))
        throw providerError('replicate', 'malformed', 'answered a running prediction without urls.get.');
      await pause(wait, c.signal);
      if (c.signal.aborted) throw timedOut('replicate', c.timeoutMs);
      const polled = await providerFetch(c, get, { headers });
      if (!polled.ok) return failure(c, polled);
      prediction = await readJson(c, polled);
    }
    const status = str(prediction, 'status');
    if (status !== 'succeeded') {
      const error = str(prediction, 'error');
      if (error && REFUSAL.test(error)) throw contentRefused('replicate', error);
      throw providerError(
        'replicate',
        'failed',
        `prediction ${status}${error ? `: ${error.slice(0, 200)}` : '.'}`,
        {
          status,
        },
      );
    }
    const output = (prediction as { output?: unknown }).output;
    const url =
      typeof output === 'string'
        ? output
        : Array.isArray(output)
          ? output.find((o) => typeof o === 'string')
          : undefined;
    if (!url)
      throw providerError('replicate', 'malformed', 'answered a finished prediction without an output URL.');
    return fetchImage(c, url);
  }

  const call = (signal: AbortSignal): ProviderCall => ({
    provider: 'replicate',
    signal,
    timeoutMs: options.timeoutMs,
  });

  return {
    name: 'replicate',
    models,
    supportedRatios: ratiosOf,
    async generate(input: GenerateInput) {
      const model = models[input.model];
      const aspectRatio = nearestAspectRatio(input.aspectRatio, ratiosOf(model));
      const modelInput: Record<string, unknown> = { prompt: input.prompt, aspect_ratio: aspectRatio };
      if (model.startsWith('black-forest-labs/')) modelInput.output_format = 'png';
      const bytes = await run(call(input.signal), model, modelInput);
      return { bytes, model, aspectRatio };
    },
    async edit(input: EditInput) {
      const bytes = await run(call(input.signal), editModel, {
        prompt: input.prompt,
        input_image: `data:image/png;base64,${Buffer.from(input.image).toString('base64')}`,
        output_format: 'png',
      });
      return { bytes, model: editModel };
    },
  };
}
