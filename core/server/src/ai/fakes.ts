import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';

/**
 * Loopback fakes of the AI providers, for tests: each follows the provider's documented contract
 * (paths, Bearer auth, request bodies checked as the real API checks them, b64 or URL answers, its
 * error bodies and statuses), makes real images of the size asked, and can be told to misbehave the
 * ways the real ones do: rate limits with Retry-After, content-policy refusals, slow answers,
 * malformed answers.
 */
export interface FakeRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  json?: Record<string, unknown>;
  form?: FormData;
}

export interface FakeProvider {
  /** The API base, with its /v1 (OPENAI_BASE_URL, REPLICATE_BASE_URL). */
  url: string;
  requests: FakeRequest[];
  /** How the next answers go (until changed). */
  mode: string;
  close(): Promise<void>;
}

export type OpenAiFakeMode =
  | 'ok'
  | 'url'
  | 'rate-limit'
  | 'content-policy'
  | 'slow'
  | 'malformed'
  | 'not-json'
  | 'not-an-image'
  | 'unauthorized'
  | 'server-error';

export type ReplicateFakeMode =
  | 'ok'
  | 'rate-limit'
  | 'nsfw'
  | 'failed'
  | 'slow'
  | 'malformed'
  | 'unauthorized';

/** A real PNG of the given size: a diagonal gradient, so it compresses like a picture, not a flat fill. */
export async function gradientPng(width: number, height: number): Promise<Buffer> {
  const data = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      data[i] = (x * 255) / width;
      data[i + 1] = (y * 255) / height;
      data[i + 2] = 128;
    }
  return sharp(data, { raw: { width, height, channels: 3 } })
    .png()
    .toBuffer();
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

async function start(
  handler: (
    req: IncomingMessage,
    res: ServerResponse,
    fake: FakeProvider,
    held: Set<ServerResponse>,
  ) => Promise<void>,
  mode: string,
): Promise<FakeProvider> {
  const held = new Set<ServerResponse>();
  const fake: FakeProvider = {
    url: '',
    requests: [],
    mode,
    async close() {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer((req, res) => {
    handler(req, res, fake, held).catch((error: Error) =>
      json(res, 500, { error: { message: error.message } }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return fake;
}

/** `/v1/images/generations` sizes per model family, as the OpenAI Images API accepts them. */
const OPENAI_SIZES: Record<string, string[]> = {
  'gpt-image': ['1024x1024', '1536x1024', '1024x1536', 'auto'],
  'dall-e-3': ['1024x1024', '1792x1024', '1024x1792'],
  'dall-e-2': ['256x256', '512x512', '1024x1024'],
};
const familyOf = (model: string) =>
  model.startsWith('dall-e-3') ? 'dall-e-3' : model.startsWith('dall-e-2') ? 'dall-e-2' : 'gpt-image';

/** Scale the images the fake makes: a 1536×1024 answer at 1/8 is 192×128, same ratio, fast tests. */
const SHRINK = 8;

/** A fake of the OpenAI API: images (generations, edits) and chat completions with an image. */
export async function fakeOpenAi(options: { apiKey: string; mode?: OpenAiFakeMode }): Promise<FakeProvider> {
  const files = new Map<string, Buffer>();
  return start(async (req, res, fake, held) => {
    const path = (req.url ?? '').split('?')[0]!;
    if (req.method === 'GET' && path.startsWith('/files/')) {
      const file = files.get(path.slice('/files/'.length));
      if (!file) return json(res, 404, { error: { message: 'no such file' } });
      res.writeHead(200, { 'Content-Type': 'image/png' });
      res.end(file);
      return;
    }
    const raw = await readBody(req);
    const contentType = req.headers['content-type'];
    const record: FakeRequest = {
      method: req.method ?? '',
      path,
      authorization: req.headers.authorization,
      contentType,
    };
    if (contentType?.startsWith('application/json')) record.json = JSON.parse(raw.toString('utf8'));
    if (contentType?.startsWith('multipart/form-data'))
      record.form = await new Response(new Uint8Array(raw), {
        headers: { 'content-type': contentType },
      }).formData();
    fake.requests.push(record);

    if (req.headers.authorization !== `Bearer ${options.apiKey}` || fake.mode === 'unauthorized')
      return json(res, 401, {
        error: {
          message: 'Incorrect API key provided.',
          type: 'invalid_request_error',
          param: null,
          code: 'invalid_api_key',
        },
      });
    const mode = fake.mode as OpenAiFakeMode;
    if (mode === 'slow') {
      // Never answers: the adapter's timeout must end the call. Destroyed on close().
      held.add(res);
      return;
    }
    if (mode === 'rate-limit')
      return json(
        res,
        429,
        {
          error: {
            message: 'Rate limit reached for images per minute.',
            type: 'requests',
            param: null,
            code: 'rate_limit_exceeded',
          },
        },
        { 'retry-after': '7', 'x-ratelimit-reset-requests': '7s' },
      );
    if (mode === 'server-error')
      return json(res, 500, {
        error: { message: 'The server had an error.', type: 'server_error', param: null, code: null },
      });
    if (mode === 'not-json') {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end('<html>Bad gateway</html>');
      return;
    }

    if (req.method === 'POST' && (path === '/v1/images/generations' || path === '/v1/images/edits')) {
      const body = record.json ?? Object.fromEntries(record.form?.entries() ?? []);
      const model = String(body.model ?? 'dall-e-2');
      const prompt = body.prompt;
      if (typeof prompt !== 'string' || prompt.length === 0)
        return json(res, 400, {
          error: {
            message: "Missing required parameter: 'prompt'.",
            type: 'invalid_request_error',
            param: 'prompt',
            code: 'missing_required_parameter',
          },
        });
      if (mode === 'content-policy')
        return json(res, 400, {
          error: {
            message: 'Your request was rejected as a result of our safety system.',
            type: 'image_generation_user_error',
            param: null,
            code: familyOf(model) === 'gpt-image' ? 'moderation_blocked' : 'content_policy_violation',
          },
        });
      if (familyOf(model) === 'gpt-image' && body.response_format !== undefined)
        return json(res, 400, {
          error: {
            message: "Unknown parameter: 'response_format'.",
            type: 'invalid_request_error',
            param: 'response_format',
            code: 'unknown_parameter',
          },
        });
      let width: number;
      let height: number;
      if (path === '/v1/images/edits') {
        const image = record.form?.get('image');
        if (!(image instanceof Blob))
          return json(res, 400, {
            error: {
              message: "Missing required parameter: 'image'.",
              type: 'invalid_request_error',
              param: 'image',
              code: 'missing_required_parameter',
            },
          });
        const meta = await sharp(Buffer.from(await image.arrayBuffer())).metadata();
        width = meta.width!;
        height = meta.height!;
      } else {
        const size = String(body.size ?? '1024x1024');
        if (!OPENAI_SIZES[familyOf(model)]!.includes(size))
          return json(res, 400, {
            error: {
              message: `Invalid value: '${size}'. Supported values are: ${OPENAI_SIZES[familyOf(model)]!.join(', ')}.`,
              type: 'invalid_request_error',
              param: 'size',
              code: 'invalid_value',
            },
          });
        [width, height] = size.split('x').map((n) => Number(n) / SHRINK) as [number, number];
      }
      if (mode === 'malformed') return json(res, 200, { created: 1, data: [{}] });
      const png =
        mode === 'not-an-image' ? Buffer.from('this is not an image') : await gradientPng(width, height);
      const wantsUrl =
        mode === 'url' || (familyOf(model) !== 'gpt-image' && body.response_format !== 'b64_json');
      if (wantsUrl) {
        const id = `${randomUUID()}.png`;
        files.set(id, png);
        return json(res, 200, {
          created: 1,
          data: [{ url: `${fake.url.replace(/\/v1$/, '')}/files/${id}` }],
        });
      }
      return json(res, 200, {
        created: 1,
        data: [{ b64_json: png.toString('base64') }],
        usage: { total_tokens: 100 },
      });
    }

    if (req.method === 'POST' && path === '/v1/chat/completions') {
      const messages = (record.json?.messages ?? []) as { content: unknown }[];
      const parts = messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])) as {
        type: string;
        image_url?: { url: string };
      }[];
      if (!parts.some((p) => p.type === 'image_url' && p.image_url?.url.startsWith('data:image/')))
        return json(res, 400, {
          error: {
            message: 'Expected an image_url part.',
            type: 'invalid_request_error',
            param: 'messages',
            code: null,
          },
        });
      if (mode === 'content-policy')
        return json(res, 200, {
          id: 'chatcmpl-1',
          object: 'chat.completion',
          model: String(record.json?.model),
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: null, refusal: "I can't help with that." },
              finish_reason: 'stop',
            },
          ],
        });
      if (mode === 'malformed')
        return json(res, 200, { id: 'chatcmpl-1', object: 'chat.completion', choices: [] });
      return json(res, 200, {
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 1,
        model: `${String(record.json?.model)}-2024-07-18`,
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: '"A gradient from green to pink, with no other content."',
              refusal: null,
            },
            finish_reason: 'stop',
          },
        ],
        usage: { prompt_tokens: 100, completion_tokens: 12, total_tokens: 112 },
      });
    }
    return json(res, 404, {
      error: {
        message: `Invalid URL (${req.method} ${path})`,
        type: 'invalid_request_error',
        param: null,
        code: null,
      },
    });
  }, options.mode ?? 'ok');
}

/** aspect_ratio values each model's input schema on Replicate allows (the fake checks them like the real one). */
const REPLICATE_RATIOS: Record<string, string[]> = {
  'black-forest-labs/flux-schnell': [
    '1:1',
    '16:9',
    '21:9',
    '3:2',
    '2:3',
    '4:5',
    '5:4',
    '3:4',
    '4:3',
    '9:16',
    '9:21',
  ],
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

interface Prediction {
  id: string;
  model: string;
  input: Record<string, unknown>;
  polls: number;
}

/**
 * A fake of Replicate's HTTP API: `POST /v1/models/{owner}/{name}/predictions` creates a prediction
 * (`starting`), each `GET /v1/predictions/{id}` moves it on (`processing`, then `succeeded` with its
 * output URL — a list of URLs for flux-schnell, as that model answers — or `failed` with an error).
 */
export async function fakeReplicate(options: {
  token: string;
  mode?: ReplicateFakeMode;
}): Promise<FakeProvider> {
  const predictions = new Map<string, Prediction>();
  const files = new Map<string, Buffer>();
  return start(async (req, res, fake, held) => {
    const path = (req.url ?? '').split('?')[0]!;
    const base = fake.url.replace(/\/v1$/, '');
    if (req.method === 'GET' && path.startsWith('/files/')) {
      const file = files.get(path.slice('/files/'.length));
      if (!file) return json(res, 404, { detail: 'Not found.', status: 404 });
      res.writeHead(200, { 'Content-Type': 'image/png' });
      res.end(file);
      return;
    }
    const raw = await readBody(req);
    const record: FakeRequest = {
      method: req.method ?? '',
      path,
      authorization: req.headers.authorization,
      contentType: req.headers['content-type'],
    };
    if (raw.length) record.json = JSON.parse(raw.toString('utf8'));
    fake.requests.push(record);
    const mode = fake.mode as ReplicateFakeMode;
    if (req.headers.authorization !== `Bearer ${options.token}` || mode === 'unauthorized')
      return json(res, 401, {
        title: 'Unauthenticated',
        detail: 'You did not pass a valid authentication token',
        status: 401,
      });
    if (mode === 'rate-limit')
      return json(
        res,
        429,
        {
          title: 'Too Many Requests',
          detail: 'Request was throttled. Expected available in 3 seconds.',
          status: 429,
        },
        { 'retry-after': '3' },
      );

    const view = async (p: Prediction) => {
      const done = p.polls >= 2;
      let status = p.polls === 0 ? 'starting' : 'processing';
      let output: unknown = null;
      let error: string | null = null;
      if (mode === 'slow') status = 'processing';
      else if (done && mode === 'nsfw') {
        status = 'failed';
        error = 'NSFW content detected. Try running it again, or try a different prompt.';
      } else if (done && mode === 'failed') {
        status = 'failed';
        error = 'CUDA out of memory.';
      } else if (done && mode === 'malformed') {
        status = 'succeeded';
      } else if (done) {
        status = 'succeeded';
        let width = 128;
        let height = 128;
        const image = p.input.input_image;
        if (typeof image === 'string') {
          const meta = await sharp(Buffer.from(image.replace(/^data:[^,]*,/, ''), 'base64')).metadata();
          width = meta.width!;
          height = meta.height!;
        } else {
          const [w, h] = String(p.input.aspect_ratio ?? '1:1')
            .split(':')
            .map(Number) as [number, number];
          // 1 megapixel at the ratio, as flux makes it, shrunk 8× for the tests' speed.
          const scale = Math.sqrt((1024 * 1024) / (w * h)) / 8;
          width = Math.round(w * scale);
          height = Math.round(h * scale);
        }
        const id = `${p.id}.png`;
        files.set(id, await gradientPng(width, height));
        const url = `${base}/files/${id}`;
        output = p.model === 'black-forest-labs/flux-schnell' ? [url] : url;
      }
      return {
        id: p.id,
        model: p.model,
        version: 'hidden',
        input: p.input,
        logs: '',
        output,
        error,
        status,
        created_at: '2026-11-27T00:00:00.000Z',
        urls: { get: `${base}/v1/predictions/${p.id}`, cancel: `${base}/v1/predictions/${p.id}/cancel` },
      };
    };

    const created = /^\/v1\/models\/([^/]+\/[^/]+)\/predictions$/.exec(path);
    if (req.method === 'POST' && created) {
      const model = created[1]!;
      const input = (record.json?.input ?? {}) as Record<string, unknown>;
      const ratios = REPLICATE_RATIOS[model];
      if (ratios && input.aspect_ratio !== undefined && !ratios.includes(String(input.aspect_ratio)))
        return json(res, 422, {
          title: 'Input validation failed',
          detail: `- input.aspect_ratio: input.aspect_ratio must be one of the following: ${ratios.join(', ')}`,
          status: 422,
        });
      if (typeof input.prompt !== 'string')
        return json(res, 422, {
          title: 'Input validation failed',
          detail: '- input: prompt is required',
          status: 422,
        });
      const p: Prediction = { id: randomUUID().replace(/-/g, '').slice(0, 26), model, input, polls: 0 };
      predictions.set(p.id, p);
      return json(res, 201, await view(p));
    }
    const polled = /^\/v1\/predictions\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && polled) {
      const p = predictions.get(polled[1]!);
      if (!p) return json(res, 404, { detail: 'Not found.', status: 404 });
      p.polls++;
      if (mode === 'slow' && p.polls > 50) {
        held.add(res);
        return;
      }
      return json(res, 200, await view(p));
    }
    return json(res, 404, { detail: 'Not found.', status: 404 });
  }, options.mode ?? 'ok');
}
