import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  form,
  proAccount,
  smallJpeg,
  startTestServer,
  type TestServer,
  tempDir,
} from '../testing.ts';
import { type FakeProvider, fakeOpenAi, fakeReplicate, gradientPng } from './fakes.ts';
import { replicateProvider } from './replicate.ts';

const OPENAI_KEY = 'sk-test-0123456789abcdefSECRET';
const REPLICATE_TOKEN = 'r8_test_0123456789SECRET';
const tmp = tempDir();

const json = (key: string, body: unknown, extra: Record<string, string> = {}) => ({
  method: 'POST',
  headers: { ...bearer(key), 'content-type': 'application/json', ...extra },
  body: JSON.stringify(body),
});

async function errorOf(res: Response): Promise<{ code: string; message: string; details?: unknown }> {
  return ((await res.json()) as { error: { code: string; message: string; details?: unknown } }).error;
}

const FORMATS = [
  ['webp', 'webp'],
  ['avif', 'heif'],
  ['png', 'png'],
  ['jpeg', 'jpeg'],
] as const;

// PNG answers run the engine's palette check (a SSIMULACRA2 score): seconds on a busy 2-core machine.
describe('no provider configured', { timeout: 60_000 }, () => {
  let srv: TestServer;
  let key: string;
  beforeAll(async () => {
    srv = await startTestServer({ dbPath: join(tmp.dir, 'none.sqlite') });
    ({ key } = await proAccount(srv.db, 'none@example.com'));
  });
  afterAll(() => srv.close());

  it('generation answers 501 PROVIDER_NOT_CONFIGURED naming the settings, never an image, and is not counted', async () => {
    const before = Number(
      (await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(key) })).headers.get('ratelimit-remaining'),
    );
    const res = await fetch(`${srv.url}/api/v1/generate`, json(key, { prompt: 'a red bicycle' }));
    expect(res.status).toBe(501);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    const error = await errorOf(res);
    expect(error.code).toBe('PROVIDER_NOT_CONFIGURED');
    expect(error.message).toMatch(/OPENAI_API_KEY/);
    expect(error.message).toMatch(/REPLICATE_API_TOKEN/);
    const after = Number(
      (await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(key) })).headers.get('ratelimit-remaining'),
    );
    // The usage call itself counts one; the 501 was given back.
    expect(after).toBe(before - 1);
  });

  it('validates the body before anything else: each bad field named', async () => {
    const res = await fetch(
      `${srv.url}/api/v1/generate`,
      json(key, { prompt: '', model: 'turbo', aspect_ratio: '10:1' }),
    );
    expect(res.status).toBe(400);
    const fields = ((await errorOf(res)).details as { field: string }[]).map((d) => d.field).sort();
    expect(fields).toEqual(['aspect_ratio', 'model', 'prompt']);
    const long = await fetch(`${srv.url}/api/v1/generate`, json(key, { prompt: 'x'.repeat(4001) }));
    expect(((await errorOf(long)).details as { field: string }[])[0]!.field).toBe('prompt');
  });

  it('edits with sharp alone; a generative phrase is refused with PROVIDER_NOT_CONFIGURED', async () => {
    const jpeg = await smallJpeg();
    const res = await fetch(`${srv.url}/api/v1/edit`, {
      method: 'POST',
      headers: bearer(key),
      body: form(jpeg, { instruction: 'make it 128 wide and black and white, groovy' }),
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.headers.get('x-edit-operations')!)).toEqual([
      { op: 'resize', width: 128 },
      { op: 'grayscale' },
    ]);
    expect(JSON.parse(res.headers.get('x-edit-unrecognized')!)).toEqual(['groovy']);
    expect(res.headers.get('x-ai-provider')).toBeNull();
    const out = Buffer.from(await res.arrayBuffer());
    const meta = await sharp(out).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['jpeg', 128, 128]);
    const stats = await sharp(out).stats();
    expect(stats.isOpaque).toBe(true);
    expect(meta.channels === 1 || Math.abs(stats.channels[0]!.mean - stats.channels[1]!.mean) < 1).toBe(true);

    const generative = await fetch(`${srv.url}/api/v1/edit`, {
      method: 'POST',
      headers: bearer(key),
      body: form(jpeg, { instruction: 'blur the background' }),
    });
    expect(generative.status).toBe(501);
    const error = await errorOf(generative);
    expect(error.code).toBe('PROVIDER_NOT_CONFIGURED');
    expect(error.message).toContain('"blur the background"');
    expect(error.details).toEqual({ generative: ['blur the background'] });
  });

  it('refuses instructions it cannot use: nothing understood (422), out of range (400 naming the phrase)', async () => {
    const jpeg = await smallJpeg();
    const pop = await fetch(`${srv.url}/api/v1/edit`, {
      method: 'POST',
      headers: bearer(key),
      body: form(jpeg, { instruction: 'make it pop' }),
    });
    expect(pop.status).toBe(422);
    expect(await errorOf(pop)).toMatchObject({
      code: 'INSTRUCTION_NOT_UNDERSTOOD',
      details: { unrecognized: ['pop'] },
    });
    const zero = await fetch(`${srv.url}/api/v1/edit`, {
      method: 'POST',
      headers: bearer(key),
      body: form(jpeg, { instruction: 'quality 150' }),
    });
    expect(zero.status).toBe(400);
    expect((await errorOf(zero)).details).toEqual([
      { field: 'instruction', expected: expect.stringContaining('quality'), received: 'quality 150' },
    ]);
    const missing = await fetch(`${srv.url}/api/v1/edit`, {
      method: 'POST',
      headers: bearer(key),
      body: form(jpeg, {}),
    });
    expect(missing.status).toBe(400);
    expect((await errorOf(missing)).details).toEqual([
      { field: 'instruction', expected: expect.any(String), received: 'nothing' },
    ]);
  });

  it('writes alt text offline from the context and the measured facts, marked as such', async () => {
    const png = await gradientPng(300, 200);
    const res = await fetch(`${srv.url}/api/v1/alt-text`, {
      method: 'POST',
      headers: bearer(key),
      body: form(png, { product_title: 'Sunset Poster', vendor: 'Acme Prints' }, 'poster.png'),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      source: 'offline',
      language: 'en',
      basis: ['product_title', 'vendor', 'orientation', 'dominant_color'],
      facts: { width: 300, height: 200, orientation: 'landscape', transparent: false },
    });
    expect(body.alt).toMatch(/^Sunset Poster by Acme Prints — landscape image, mostly /);
    const bad = await fetch(`${srv.url}/api/v1/alt-text`, {
      method: 'POST',
      headers: bearer(key),
      body: form(png, { colour: 'red' }),
    });
    expect(bad.status).toBe(400);
  });
});

describe('through the OpenAI-compatible adapter (a loopback fake of the API)', { timeout: 60_000 }, () => {
  let srv: TestServer;
  let fake: FakeProvider;
  let key: string;
  beforeAll(async () => {
    fake = await fakeOpenAi({ apiKey: OPENAI_KEY });
    srv = await startTestServer({
      dbPath: join(tmp.dir, 'openai.sqlite'),
      overrides: {
        openaiApiKey: OPENAI_KEY,
        openaiBaseUrl: fake.url,
        aiTimeoutMs: 1500,
        aiModelDesign: 'dall-e-3',
      },
    });
    ({ key } = await proAccount(srv.db, 'openai@example.com'));
  });
  afterAll(async () => {
    await srv.close();
    await fake.close();
  });

  it.each(FORMATS)(
    'generates %s at each aspect ratio, the nearest supported said in a header',
    async (format, sharpFormat) => {
      fake.mode = 'ok';
      for (const [asked, made, size] of [
        ['1:1', '1:1', '1024x1024'],
        ['3:2', '3:2', '1536x1024'],
        ['16:9', '3:2', '1536x1024'],
        ['9:16', '2:3', '1024x1536'],
      ] as const) {
        const res = await fetch(
          `${srv.url}/api/v1/generate`,
          json(key, {
            prompt: 'a lighthouse at dusk',
            aspect_ratio: asked,
            output_format: format,
            quality: 70,
          }),
        );
        expect(res.status, await res.clone().text()).toBe(200);
        expect(res.headers.get('x-ai-provider')).toBe('openai');
        expect(res.headers.get('x-ai-model')).toBe('gpt-image-1-mini');
        expect(res.headers.get('x-aspect-ratio')).toBe(made);
        expect(res.headers.get('x-aspect-ratio-requested')).toBe(asked === made ? null : asked);
        expect(res.headers.get('x-output-format')).toBe(format);
        expect(res.headers.get('x-quality')).toBe('70');
        const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
        expect(meta.format).toBe(sharpFormat);
        const [w, h] = made.split(':').map(Number) as [number, number];
        expect(meta.width! / meta.height!).toBeCloseTo(w / h, 2);
        const sent = fake.requests.at(-1)!;
        expect(sent.path).toBe('/v1/images/generations');
        expect(sent.authorization).toBe(`Bearer ${OPENAI_KEY}`);
        expect(sent.json).toEqual({ model: 'gpt-image-1-mini', prompt: 'a lighthouse at dusk', n: 1, size });
      }
    },
  );

  it("maps our models to the provider's, with configuration overriding one (design → dall-e-3, answered by URL)", async () => {
    fake.mode = 'ok';
    const photo = await fetch(`${srv.url}/api/v1/generate`, json(key, { prompt: 'a cat', model: 'photo' }));
    expect(photo.headers.get('x-ai-model')).toBe('gpt-image-1');
    const icon = await fetch(
      `${srv.url}/api/v1/generate`,
      json(key, { prompt: 'a cat', model: 'icon', output_format: 'png' }),
    );
    expect(icon.status).toBe(200);
    expect(fake.requests.at(-1)!.json).toMatchObject({
      model: 'gpt-image-1-mini',
      background: 'transparent',
    });
    const design = await fetch(
      `${srv.url}/api/v1/generate`,
      json(key, { prompt: 'a poster', model: 'design', aspect_ratio: '16:9' }),
    );
    expect(design.status, await design.clone().text()).toBe(200);
    expect(design.headers.get('x-ai-model')).toBe('dall-e-3');
    expect(design.headers.get('x-aspect-ratio')).toBe('7:4');
    expect(fake.requests.at(-1)!.json).toMatchObject({
      model: 'dall-e-3',
      size: '1792x1024',
      response_format: 'b64_json',
    });
    fake.mode = 'url';
    const byUrl = await fetch(
      `${srv.url}/api/v1/generate`,
      json(key, { prompt: 'a cat', output_format: 'webp' }),
    );
    expect(byUrl.status).toBe(200);
    expect(fake.requests.at(-1)!.path).toBe('/v1/images/generations');
    expect((await sharp(Buffer.from(await byUrl.arrayBuffer())).metadata()).format).toBe('webp');
  });

  it('turns every provider failure into its code', async () => {
    const cases = [
      ['rate-limit', 503, 'PROVIDER_RATE_LIMITED'],
      ['content-policy', 422, 'CONTENT_POLICY_VIOLATION'],
      ['slow', 504, 'PROVIDER_TIMEOUT'],
      ['malformed', 502, 'PROVIDER_ERROR'],
      ['not-json', 502, 'PROVIDER_ERROR'],
      ['not-an-image', 502, 'PROVIDER_ERROR'],
      ['unauthorized', 502, 'PROVIDER_ERROR'],
      ['server-error', 502, 'PROVIDER_ERROR'],
    ] as const;
    for (const [mode, status, code] of cases) {
      fake.mode = mode;
      const res = await fetch(`${srv.url}/api/v1/generate`, json(key, { prompt: 'a boat' }));
      expect([mode, res.status]).toEqual([mode, status]);
      const error = await errorOf(res);
      expect([mode, error.code]).toEqual([mode, code]);
      expect(error.message).not.toContain(OPENAI_KEY);
      if (mode === 'rate-limit') expect(res.headers.get('retry-after')).toBe('7');
      if (mode === 'content-policy') expect(error.message).toMatch(/safety system/);
      if (mode === 'unauthorized') expect(error.message).toMatch(/OPENAI_API_KEY/);
    }
    fake.mode = 'ok';
    expect(srv.rawLog.join('')).not.toContain(OPENAI_KEY);
  });

  it('replays a generation for a repeated Idempotency-Key without asking the provider again', async () => {
    fake.mode = 'ok';
    const before = fake.requests.length;
    const body = json(key, { prompt: 'a red kite', output_format: 'webp' }, { 'idempotency-key': 'gen-1' });
    const first = await fetch(`${srv.url}/api/v1/generate`, body);
    const again = await fetch(`${srv.url}/api/v1/generate`, body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(Buffer.from(await again.arrayBuffer())).toEqual(Buffer.from(await first.arrayBuffer()));
    expect(fake.requests.length).toBe(before + 1);
  });

  it('sends the generative phrases of an edit to /images/edits, then applies the rest', async () => {
    fake.mode = 'ok';
    const jpeg = await smallJpeg();
    const res = await fetch(`${srv.url}/api/v1/edit`, {
      method: 'POST',
      headers: bearer(key),
      body: form(jpeg, { instruction: 'remove the background and convert to png' }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get('x-ai-provider')).toBe('openai');
    expect(res.headers.get('x-ai-model')).toBe('gpt-image-1');
    expect(JSON.parse(res.headers.get('x-edit-generated')!)).toEqual(['remove the background']);
    expect(JSON.parse(res.headers.get('x-edit-operations')!)).toEqual([{ op: 'format', format: 'png' }]);
    expect(res.headers.get('x-input-format')).toBe('jpeg');
    const sent = fake.requests.at(-1)!;
    expect(sent.path).toBe('/v1/images/edits');
    expect(sent.form?.get('prompt')).toBe('remove the background');
    expect(sent.form?.get('model')).toBe('gpt-image-1');
    const image = sent.form?.get('image') as Blob;
    expect((await sharp(Buffer.from(await image.arrayBuffer())).metadata()).format).toBe('png');
    expect((await sharp(Buffer.from(await res.arrayBuffer())).metadata()).format).toBe('png');
  });

  it("writes alt text through the vision model, marked as the provider's, in the language asked", async () => {
    fake.mode = 'ok';
    const res = await fetch(`${srv.url}/api/v1/alt-text`, {
      method: 'POST',
      headers: bearer(key),
      body: form(
        await gradientPng(200, 200),
        { product_title: 'Gradient Print', language: 'de' },
        'print.png',
      ),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toMatchObject({
      alt: 'A gradient from green to pink, with no other content.',
      source: 'provider',
      language: 'de',
      basis: ['image', 'product_title'],
      provider: 'openai',
      model: 'gpt-4o-mini-2024-07-18',
      facts: { orientation: 'square' },
    });
    const sent = fake.requests.at(-1)!;
    expect(sent.path).toBe('/v1/chat/completions');
    expect(JSON.stringify(sent.json)).toContain('Language: de.');
    expect(JSON.stringify(sent.json)).toContain('data:image/jpeg;base64,');
    fake.mode = 'content-policy';
    const refused = await fetch(`${srv.url}/api/v1/alt-text`, {
      method: 'POST',
      headers: bearer(key),
      body: form(await smallJpeg()),
    });
    expect((await errorOf(refused)).code).toBe('CONTENT_POLICY_VIOLATION');
    fake.mode = 'ok';
  });
});

describe('through the Replicate adapter (a loopback fake: predictions, polling, output URLs)', {
  timeout: 60_000,
}, () => {
  let srv: TestServer;
  let fake: FakeProvider;
  let key: string;
  beforeAll(async () => {
    fake = await fakeReplicate({ token: REPLICATE_TOKEN });
    srv = await startTestServer({
      dbPath: join(tmp.dir, 'replicate.sqlite'),
      overrides: { aiTimeoutMs: 1500 },
      // The adapter's own poll pacing, shortened: the fake finishes on the second poll.
      ai: replicateProvider({ token: REPLICATE_TOKEN, baseUrl: fake.url, timeoutMs: 1500, pollMs: 5 }),
    });
    ({ key } = await proAccount(srv.db, 'replicate@example.com'));
  });
  afterAll(async () => {
    await srv.close();
    await fake.close();
  });

  it.each(FORMATS)(
    'generates %s with each model, polling to the end, the nearest ratio said',
    async (format, sharpFormat) => {
      fake.mode = 'ok';
      for (const [model, providerModel, asked, made] of [
        ['fast', 'black-forest-labs/flux-schnell', '16:9', '16:9'],
        ['photo', 'black-forest-labs/flux-1.1-pro', '21:9', '16:9'],
        ['design', 'ideogram-ai/ideogram-v3-turbo', '3:1', '3:1'],
        ['icon', 'recraft-ai/recraft-v3', '1:1', '1:1'],
      ] as const) {
        const res = await fetch(
          `${srv.url}/api/v1/generate`,
          json(key, { prompt: 'a paper boat', model, aspect_ratio: asked, output_format: format }),
        );
        expect(res.status, await res.clone().text()).toBe(200);
        expect([
          res.headers.get('x-ai-provider'),
          res.headers.get('x-ai-model'),
          res.headers.get('x-aspect-ratio'),
        ]).toEqual(['replicate', providerModel, made]);
        const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
        expect(meta.format).toBe(sharpFormat);
        const [w, h] = made.split(':').map(Number) as [number, number];
        expect(meta.width! / meta.height!).toBeCloseTo(w / h, 1);
        const create = fake.requests.filter((r) => r.method === 'POST').at(-1)!;
        expect(create.path).toBe(`/v1/models/${providerModel}/predictions`);
        expect(create.authorization).toBe(`Bearer ${REPLICATE_TOKEN}`);
        expect(create.json).toMatchObject({ input: { prompt: 'a paper boat', aspect_ratio: made } });
      }
    },
  );

  it('turns every provider failure into its code', async () => {
    for (const [mode, status, code] of [
      ['rate-limit', 503, 'PROVIDER_RATE_LIMITED'],
      ['nsfw', 422, 'CONTENT_POLICY_VIOLATION'],
      ['failed', 502, 'PROVIDER_ERROR'],
      ['malformed', 502, 'PROVIDER_ERROR'],
      ['unauthorized', 502, 'PROVIDER_ERROR'],
      ['slow', 504, 'PROVIDER_TIMEOUT'],
    ] as const) {
      fake.mode = mode;
      const res = await fetch(`${srv.url}/api/v1/generate`, json(key, { prompt: 'a boat' }));
      expect([mode, res.status]).toEqual([mode, status]);
      const error = await errorOf(res);
      expect([mode, error.code]).toEqual([mode, code]);
      expect(error.message).not.toContain(REPLICATE_TOKEN);
      if (mode === 'rate-limit') expect(res.headers.get('retry-after')).toBe('3');
      if (mode === 'nsfw') expect(error.message).toMatch(/NSFW/);
    }
    fake.mode = 'ok';
  });

  it('edits generatively through a prediction with the image as input_image; alt text stays offline', async () => {
    fake.mode = 'ok';
    const res = await fetch(`${srv.url}/api/v1/edit`, {
      method: 'POST',
      headers: bearer(key),
      body: form(await smallJpeg(), { instruction: 'blur the background then rotate right' }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get('x-ai-model')).toBe('black-forest-labs/flux-kontext-pro');
    const create = fake.requests.filter((r) => r.method === 'POST').at(-1)!;
    expect(create.path).toBe('/v1/models/black-forest-labs/flux-kontext-pro/predictions');
    expect(String((create.json!.input as { input_image: string }).input_image)).toMatch(
      /^data:image\/png;base64,/,
    );
    const alt = await fetch(`${srv.url}/api/v1/alt-text`, {
      method: 'POST',
      headers: bearer(key),
      body: form(await smallJpeg()),
    });
    expect(((await alt.json()) as { source: string }).source).toBe('offline');
  });
});

afterAll(() => tmp.cleanup());
