import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type FakeProvider,
  fakeOpenAi,
  proAccount,
  startTestServer,
  type TestServer,
} from '@compresso/server/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BadRequestError, Compresso, ServerError } from './index.ts';
import { PHOTO, PNG, rejection, workDir } from './test-support.ts';

const work = workDir('ai');
const OPENAI_KEY = 'sk-client-test';
let fake: FakeProvider;
let withAi: TestServer;
let without: TestServer;
let client: Compresso;
let offline: Compresso;
let offlineKey: string;

beforeAll(async () => {
  fake = await fakeOpenAi({ apiKey: OPENAI_KEY });
  withAi = await startTestServer({
    dbPath: join(work.dir, 'ai.sqlite'),
    overrides: { openaiApiKey: OPENAI_KEY, openaiBaseUrl: fake.url, aiTimeoutMs: 2000 },
  });
  without = await startTestServer({ dbPath: join(work.dir, 'none.sqlite') });
  client = new Compresso((await proAccount(withAi.db, 'ai@example.com')).key, {
    baseUrl: withAi.url,
    maxRetries: 0,
  });
  offlineKey = (await proAccount(without.db, 'none@example.com')).key;
  offline = new Compresso(offlineKey, { baseUrl: without.url });
});

afterAll(async () => {
  await withAi.close();
  await without.close();
  await fake.close();
  work.cleanup();
});

describe('generate', { timeout: 60_000 }, () => {
  it('returns the image in the format and ratio asked, written to outputPath, with the provider facts', async () => {
    fake.mode = 'ok';
    const target = join(work.dir, 'kite.webp');
    const result = await client.generate('a red kite over the sea', {
      model: 'photo',
      aspectRatio: '16:9',
      format: 'webp',
      outputPath: target,
    });
    expect(result).toMatchObject({
      outputPath: target,
      format: 'webp',
      provider: 'openai',
      model: 'gpt-image-1',
      aspectRatio: '3:2',
      aspectRatioRequested: '16:9',
      filename: 'generated.webp',
    });
    expect(readFileSync(target)).toEqual(result.data);
    const meta = await sharp(result.data).metadata();
    expect(meta.format).toBe('webp');
    expect(meta.width! / meta.height!).toBeCloseTo(1.5, 2);
  });

  it('writes nothing without outputPath; a directory gets generated.<ext>', async () => {
    fake.mode = 'ok';
    expect((await client.generate('a cat', { format: 'png' })).outputPath).toBeNull();
    const into = await client.generate('a cat', { format: 'avif', outputPath: `${work.dir}/` });
    expect(into.outputPath).toBe(join(work.dir, 'generated.avif'));
  });

  it("reports the server's codes as typed errors: no provider, provider refusals, bad options", async () => {
    const none = await rejection(offline.generate('a cat'));
    expect(none).toBeInstanceOf(ServerError);
    expect([none.code, none.status]).toEqual(['PROVIDER_NOT_CONFIGURED', 501]);
    fake.mode = 'content-policy';
    const refused = await rejection(client.generate('something refused'));
    expect(refused).toBeInstanceOf(BadRequestError);
    expect(refused.code).toBe('CONTENT_POLICY_VIOLATION');
    fake.mode = 'ok';
    const bad = await rejection(client.generate('a cat', { aspectRatio: '10:1' }));
    expect([bad.code, (bad.details as { field: string }[])[0]!.field]).toEqual([
      'INVALID_REQUEST',
      'aspect_ratio',
    ]);
    const local = await rejection(client.generate('a cat', { aspect_ratio: '1:1' } as never));
    expect(local.code).toBe('INVALID_OPTION');
  });
});

describe('edit', { timeout: 60_000 }, () => {
  it('applies the instruction and says what it did, the same bytes as the API answers to a hand-made request', async () => {
    const result = await offline.edit(PHOTO, 'make it 256 wide and black and white, groovy', { quality: 70 });
    expect(result.operations).toEqual([{ op: 'resize', width: 256 }, { op: 'grayscale' }]);
    expect(result.unrecognized).toEqual(['groovy']);
    expect(result.generated).toEqual([]);
    const input = await sharp(PHOTO).metadata();
    expect([result.width, result.height, result.format, result.outputPath]).toEqual([
      256,
      Math.round((256 * input.height!) / input.width!),
      'jpeg',
      null,
    ]);
    // The same request sent by hand answers the same bytes: the client adds nothing.
    const form = new FormData();
    form.append('instruction', 'make it 256 wide and black and white, groovy');
    form.append('quality', '70');
    form.append('file', new Blob([readFileSync(PHOTO)]), 'photo-skimage-rocket.jpg');
    const raw = await fetch(`${without.url}/api/v1/edit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${offlineKey}` },
      body: form,
    });
    expect(raw.status).toBe(200);
    expect(Buffer.from(await raw.arrayBuffer())).toEqual(result.data);
  });

  it('rotates and converts, writing to output', async () => {
    const out = join(work.dir, 'rotated.webp');
    const result = await offline.edit(PNG, 'rotate left and convert to webp', { output: out });
    expect(result.outputPath).toBe(out);
    const meta = await sharp(readFileSync(out)).metadata();
    const input = await sharp(PNG).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', input.height, input.width]);
  });

  it('a generative phrase goes to the provider; without one it is PROVIDER_NOT_CONFIGURED', async () => {
    fake.mode = 'ok';
    const result = await client.edit(PHOTO, 'remove the background and convert to png');
    expect(result).toMatchObject({
      generated: ['remove the background'],
      provider: 'openai',
      model: 'gpt-image-1',
      format: 'png',
    });
    const none = await rejection(offline.edit(PHOTO, 'blur the background'));
    expect(none.code).toBe('PROVIDER_NOT_CONFIGURED');
    const pop = await rejection(offline.edit(PHOTO, 'make it pop'));
    expect(pop).toBeInstanceOf(BadRequestError);
    expect(pop.code).toBe('INSTRUCTION_NOT_UNDERSTOOD');
  });
});

describe('altText', { timeout: 60_000 }, () => {
  it('offline: from the context and facts, marked offline', async () => {
    const result = await offline.altText(PNG, { productTitle: 'Text sample', vendor: 'scikit-image' });
    expect(result).toMatchObject({
      source: 'offline',
      language: 'en',
      basis: expect.arrayContaining(['product_title', 'vendor']),
    });
    expect(result.alt).toMatch(/^Text sample by scikit-image — /);
    expect(result.facts).toMatchObject({
      orientation: expect.any(String),
      dominantColor: expect.stringMatching(/^#/),
      transparent: expect.any(Boolean),
    });
  });

  it("through the vision provider, marked as the provider's", async () => {
    fake.mode = 'ok';
    const result = await client.altText(PHOTO, { productTitle: 'Rocket', language: 'fr' });
    expect(result).toMatchObject({
      source: 'provider',
      language: 'fr',
      provider: 'openai',
      basis: ['image', 'product_title'],
    });
    expect(result.alt.length).toBeGreaterThan(0);
  });
});
