import { copyFileSync, readFileSync } from 'node:fs';
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
import { type Connected, connect, errorOf, PHOTO, PNG, textOf, workDir } from './test-support.ts';

/**
 * generate_image, edit_image and alt_text through the SDK's real client, against a real server:
 * one with an OpenAI-compatible provider (a loopback fake of its API), one with none.
 */
const work = workDir('ai');
const OPENAI_KEY = 'sk-mcp-test';
let fake: FakeProvider;
let withAi: TestServer;
let without: TestServer;
let mcp: Connected;
let offline: Connected;
let offlineKey: string;

beforeAll(async () => {
  fake = await fakeOpenAi({ apiKey: OPENAI_KEY });
  withAi = await startTestServer({
    dbPath: join(work.dir, 'ai.sqlite'),
    overrides: { openaiApiKey: OPENAI_KEY, openaiBaseUrl: fake.url, aiTimeoutMs: 2000 },
  });
  without = await startTestServer({ dbPath: join(work.dir, 'none.sqlite') });
  mcp = await connect({
    apiKey: (await proAccount(withAi.db, 'ai@example.com')).key,
    baseUrl: withAi.url,
    env: {},
  });
  offlineKey = (await proAccount(without.db, 'none@example.com')).key;
  offline = await connect({ apiKey: offlineKey, baseUrl: without.url, env: {} });
});

afterAll(async () => {
  await mcp?.close();
  await offline?.close();
  await withAi?.close();
  await without?.close();
  await fake?.close();
  work.cleanup();
});

describe('generate_image', { timeout: 60_000 }, () => {
  it('writes the image at the nearest ratio and says who made it', async () => {
    const out = join(work.dir, 'boat.webp');
    const result = await mcp.call('generate_image', {
      prompt: 'a paper boat',
      model: 'photo',
      aspect_ratio: '9:16',
      output_format: 'webp',
      output_path: out,
    });
    expect(result.isError, textOf(result)).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      output_path: out,
      provider: 'openai',
      model: 'gpt-image-1',
      aspect_ratio: '2:3',
      aspect_ratio_requested: '9:16',
      output_format: 'webp',
    });
    const meta = await sharp(readFileSync(out)).metadata();
    expect([meta.format, meta.width! / meta.height!]).toEqual(['webp', 2 / 3]);
    expect(result.content.some((c) => c.type === 'image')).toBe(true);
  });

  it('without a provider: isError with PROVIDER_NOT_CONFIGURED, nothing written', async () => {
    const out = join(work.dir, 'none.png');
    const result = await offline.call('generate_image', { prompt: 'a paper boat', output_path: out });
    expect(result.isError).toBe(true);
    expect(errorOf(result).code).toBe('PROVIDER_NOT_CONFIGURED');
    expect(() => readFileSync(out)).toThrow();
  });
});

describe('edit_image', { timeout: 60_000 }, () => {
  it('applies the instruction, reports it, and writes the same bytes the API answers', async () => {
    const out = join(work.dir, 'bw.jpg');
    const instruction = 'make it 200 wide and black and white, groovy';
    const result = await offline.call('edit_image', { file_path: PHOTO, instruction, output_path: out });
    expect(result.isError, textOf(result)).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      output_path: out,
      operations: [{ op: 'resize', width: 200 }, { op: 'grayscale' }],
      unrecognized: ['groovy'],
      generated: [],
      width: 200,
    });
    expect(textOf(result)).toContain('Not understood: groovy');
    const form = new FormData();
    form.append('instruction', instruction);
    form.append('file', new Blob([readFileSync(PHOTO)]), 'photo-skimage-rocket.jpg');
    const raw = await fetch(`${without.url}/api/v1/edit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${offlineKey}` },
      body: form,
    });
    expect(Buffer.from(await raw.arrayBuffer())).toEqual(readFileSync(out));
  });

  it('writes <name>.edited.<ext> beside the source by default; refusals are isError with their code', async () => {
    const source = join(work.dir, 'text.png');
    copyFileSync(PNG, source);
    const result = await offline.call('edit_image', { file_path: source, instruction: 'rotate left' });
    expect(result.isError, textOf(result)).toBeFalsy();
    expect((result.structuredContent as { output_path: string }).output_path).toBe(
      join(work.dir, 'text.edited.png'),
    );
    const pop = await offline.call('edit_image', { file_path: source, instruction: 'make it pop' });
    expect(errorOf(pop).code).toBe('INSTRUCTION_NOT_UNDERSTOOD');
    const generative = await offline.call('edit_image', {
      file_path: source,
      instruction: 'remove the background',
    });
    expect(errorOf(generative).code).toBe('PROVIDER_NOT_CONFIGURED');
    const done = await mcp.call('edit_image', {
      file_path: source,
      instruction: 'remove the background',
      output_path: join(work.dir, 'cut.png'),
    });
    expect(done.structuredContent).toMatchObject({
      generated: ['remove the background'],
      provider: 'openai',
    });
  });
});

describe('alt_text', { timeout: 60_000 }, () => {
  it('offline and through the vision provider, each marked with its source', async () => {
    const off = await offline.call('alt_text', { file_path: PNG, product_title: 'Text sample' });
    expect(off.isError, textOf(off)).toBeFalsy();
    expect(off.structuredContent).toMatchObject({ source: 'offline', language: 'en', file_path: PNG });
    expect(textOf(off)).toContain('no model saw the image');
    const seen = await mcp.call('alt_text', { file_path: PHOTO, language: 'de' });
    expect(seen.structuredContent).toMatchObject({ source: 'provider', language: 'de', provider: 'openai' });
  });
});
