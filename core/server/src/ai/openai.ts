import type { AiModel } from '@compresso/schema';
import { nearestAspectRatio } from './aspect.ts';
import type { AiProvider, DescribeInput, EditInput, GenerateInput } from './provider.ts';
import {
  contentRefused,
  fetchImage,
  type ProviderCall,
  providerError,
  providerFetch,
  rateLimited,
  readJson,
  str,
} from './provider-http.ts';

/** Defaults for our four models; COMPRESSO_AI_MODEL_<NAME> replaces one. */
export const OPENAI_DEFAULT_MODELS: Record<AiModel, string> = {
  fast: 'gpt-image-1-mini',
  photo: 'gpt-image-1',
  design: 'gpt-image-1',
  icon: 'gpt-image-1-mini',
};
export const OPENAI_DEFAULT_EDIT_MODEL = 'gpt-image-1';
export const OPENAI_DEFAULT_VISION_MODEL = 'gpt-4o-mini';

/** The sizes each model family generates (OpenAI Images API reference), as ratio → size. */
const SIZES: Record<'gpt-image' | 'dall-e-3' | 'dall-e-2', Record<string, string>> = {
  'gpt-image': { '1:1': '1024x1024', '3:2': '1536x1024', '2:3': '1024x1536' },
  'dall-e-3': { '1:1': '1024x1024', '7:4': '1792x1024', '4:7': '1024x1792' },
  'dall-e-2': { '1:1': '1024x1024' },
};

function family(model: string): keyof typeof SIZES {
  if (model.startsWith('dall-e-3')) return 'dall-e-3';
  if (model.startsWith('dall-e-2')) return 'dall-e-2';
  // gpt-image-* and any model of an OpenAI-compatible service: the current API's three sizes.
  return 'gpt-image';
}

export interface OpenAiOptions {
  apiKey: string;
  /** With the /v1, e.g. https://api.openai.com/v1. */
  baseUrl: string;
  timeoutMs: number;
  models?: Partial<Record<AiModel, string | undefined>>;
  editModel?: string | undefined;
  visionModel?: string | undefined;
}

/** Codes OpenAI answers for a prompt or image its moderation refused. */
const REFUSAL_CODES = new Set(['content_policy_violation', 'moderation_blocked', 'content_filter']);

/**
 * Any OpenAI-compatible API: images from `POST /images/generations` and `/images/edits` (answers
 * `data[0].b64_json`, or `data[0].url` from services that host the file), alt text from
 * `POST /chat/completions` with the image as a data: URL.
 */
export function openAiProvider(options: OpenAiOptions): AiProvider {
  const models = { ...OPENAI_DEFAULT_MODELS } as Record<AiModel, string>;
  for (const [name, id] of Object.entries(options.models ?? {})) if (id) models[name as AiModel] = id;
  const editModel = options.editModel ?? OPENAI_DEFAULT_EDIT_MODEL;
  const visionModel = options.visionModel ?? OPENAI_DEFAULT_VISION_MODEL;
  const auth = { Authorization: `Bearer ${options.apiKey}` };

  const call = (signal: AbortSignal): ProviderCall => ({
    provider: 'openai',
    signal,
    timeoutMs: options.timeoutMs,
  });

  /** A non-2xx answer as our code (the body is OpenAI's `{error: {message, type, code}}`). */
  async function failure(c: ProviderCall, res: Response): Promise<never> {
    const body = await readJson(c, res).catch(() => undefined);
    const code = str(body, 'error', 'code') ?? str(body, 'error', 'type');
    const message = str(body, 'error', 'message');
    if (res.status === 429) throw rateLimited('openai', res.headers.get('retry-after'));
    if (code && REFUSAL_CODES.has(code)) throw contentRefused('openai', message);
    if (res.status === 401 || res.status === 403)
      throw providerError(
        'openai',
        'status',
        `refused the server's credentials (HTTP ${res.status}); the operator must check OPENAI_API_KEY.`,
        {
          status: res.status,
        },
      );
    throw providerError('openai', 'status', `answered HTTP ${res.status}${code ? ` (${code})` : ''}.`, {
      status: res.status,
      ...(code ? { provider_code: code } : {}),
    });
  }

  async function imageOf(c: ProviderCall, res: Response): Promise<Buffer> {
    if (!res.ok) return failure(c, res);
    const body = await readJson(c, res);
    const b64 = str(body, 'data', 0, 'b64_json');
    if (b64) {
      const bytes = Buffer.from(b64, 'base64');
      if (bytes.length === 0) throw providerError('openai', 'malformed', 'answered an empty image.');
      return bytes;
    }
    const url = str(body, 'data', 0, 'url');
    if (url) return fetchImage(c, url);
    throw providerError('openai', 'malformed', 'answered without data[0].b64_json or data[0].url.');
  }

  return {
    name: 'openai',
    models,
    supportedRatios: (model) => Object.keys(SIZES[family(model)]),

    async generate(input: GenerateInput) {
      const model = models[input.model];
      const sizes = SIZES[family(model)];
      const aspectRatio = nearestAspectRatio(input.aspectRatio, Object.keys(sizes));
      const c = call(input.signal);
      const body: Record<string, unknown> = { model, prompt: input.prompt, n: 1, size: sizes[aspectRatio] };
      // DALL·E answers a URL unless asked for base64; gpt-image models always answer base64 and
      // refuse the parameter.
      if (family(model) !== 'gpt-image') body.response_format = 'b64_json';
      if (input.model === 'icon' && family(model) === 'gpt-image') body.background = 'transparent';
      const res = await providerFetch(c, `${options.baseUrl}/images/generations`, {
        method: 'POST',
        headers: { ...auth, 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { bytes: await imageOf(c, res), model, aspectRatio };
    },

    async edit(input: EditInput) {
      const c = call(input.signal);
      const form = new FormData();
      form.append('model', editModel);
      form.append('prompt', input.prompt);
      form.append('n', '1');
      form.append('image', new Blob([new Uint8Array(input.image)], { type: 'image/png' }), 'image.png');
      const res = await providerFetch(c, `${options.baseUrl}/images/edits`, {
        method: 'POST',
        headers: auth,
        body: form,
      });
      return { bytes: await imageOf(c, res), model: editModel };
    },

    async describe(input: DescribeInput) {
      const c = call(input.signal);
      const known = Object.entries(input.context)
        .filter(([, v]) => v)
        .map(([k, v]) => `${k.replace('_', ' ')}: ${v}`);
      const res = await providerFetch(c, `${options.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { ...auth, 'Content-Type': 'application/json' },
        body: JSON.stringify({
          model: visionModel,
          max_tokens: 120,
          messages: [
            {
              role: 'system',
              content:
                'You write alt text for images on web pages and online stores: one sentence, at most 125 characters, ' +
                'saying what the image shows for someone who cannot see it. Describe only what is visible; use the ' +
                'context to name the product. No "image of" or "picture of". Answer with the alt text only.',
            },
            {
              role: 'user',
              content: [
                {
                  type: 'text',
                  text: `Language: ${input.language}.${known.length ? ` Context — ${known.join('; ')}.` : ''}`,
                },
                {
                  type: 'image_url',
                  image_url: { url: `data:image/jpeg;base64,${Buffer.from(input.image).toString('base64')}` },
                },
              ],
            },
          ],
        }),
      });
      if (!res.ok) return failure(c, res);
      const body = await readJson(c, res);
      const refusal = str(body, 'choices', 0, 'message', 'refusal');
      if (refusal) throw contentRefused('openai', refusal);
      if (str(body, 'choices', 0, 'finish_reason') === 'content_filter')
        throw contentRefused('openai', undefined);
      const alt = str(body, 'choices', 0, 'message', 'content')?.trim();
      if (!alt) throw providerError('openai', 'malformed', 'answered without choices[0].message.content.');
      return { alt, model: str(body, 'model') ?? visionModel };
    },
  };
}
