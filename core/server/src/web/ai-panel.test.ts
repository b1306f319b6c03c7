import { applyPromo, createPromoCode, quotaDay } from '@compresso/runtime';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type FakeProvider,
  fakeOpenAi,
  form,
  signupTokenFromLog,
  smallJpeg,
  startTestServer,
  type TestServer,
} from '../testing.ts';
import { Browser } from './test-browser.ts';

type ErrorBody = { error: { code: string; message: string; details?: unknown } };
const OPENAI_KEY = 'sk-panel-test-key';

function cookiesOf(res: Response): string {
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
}

/** The compressor page as a browser with this cookie gets it, and the headers of a request from it. */
async function pageOf(url: string, cookie = ''): Promise<{ html: string; headers: Record<string, string> }> {
  const res = await fetch(`${url}/`, { headers: cookie ? { cookie } : {} });
  const html = await res.text();
  const token = /<meta name="csrf-token" content="([^"]+)">/.exec(html)?.[1];
  if (!token) throw new Error('the compressor page carries no CSRF token');
  return {
    html,
    headers: {
      'x-csrf-token': token,
      cookie: [cookie, cookiesOf(res)].filter(Boolean).join('; '),
      'sec-fetch-site': 'same-origin',
      accept: 'image/*, application/json',
    },
  };
}

/** Sign up through the real form and its (logged) link; the session cookie, on the Pro plan if asked. */
async function signUp(server: TestServer, email: string, pro: boolean): Promise<string> {
  const browser = new Browser(server.url);
  const res = await browser.submit('/signup', '/signup', { email, password: 'correct horse battery staple' });
  expect(res.status).toBe(200);
  const token = signupTokenFromLog(server.rawLog);
  const done = await browser.submit(`/signup/${token}`, `/signup/${token}`, {});
  expect(done.status).toBe(303);
  const session = browser.cookies.get('cmp_session');
  if (!session) throw new Error('sign-up set no session cookie');
  if (pro) {
    const code = `PANEL-${email.replace(/[^A-Za-z0-9]/g, '-')}`;
    await createPromoCode(server.db, { code, plan: 'pro', uses: 1 });
    await applyPromo(server.db, email, code);
  }
  return `cmp_session=${session}`;
}

const edit = (url: string, headers: Record<string, string>, jpeg: Buffer, instruction: string) =>
  fetch(`${url}/web/edit`, { method: 'POST', headers, body: form(jpeg, { instruction }) });

const generate = (url: string, headers: Record<string, string>, body: unknown) =>
  fetch(`${url}/web/generate`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('the Pro panel without an AI provider', () => {
  let server: TestServer;
  const at = new Date();
  beforeAll(async () => {
    server = await startTestServer({ dbPath: ':memory:', overrides: { proDailyLimit: 5 }, now: () => at });
  });
  afterAll(async () => {
    await server.close();
  });

  it('is neither shown nor served to visitors and free accounts', async () => {
    const jpeg = await smallJpeg();
    const visitor = await pageOf(server.url);
    expect(visitor.html).not.toContain('ai-panel');
    expect(visitor.html).not.toContain('edit-form');
    const refused = await edit(server.url, visitor.headers, jpeg, 'rotate left');
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as ErrorBody).error).toMatchObject({
      code: 'PLAN_REQUIRED',
      message: expect.stringContaining('sign in with a Pro account'),
    });
    const genRefused = await generate(server.url, visitor.headers, { prompt: 'a cat' });
    expect(genRefused.status).toBe(403);

    const free = await pageOf(server.url, await signUp(server, 'free@example.com', false));
    expect(free.html).not.toContain('ai-panel');
    const freeRefused = await edit(server.url, free.headers, jpeg, 'rotate left');
    expect(freeRefused.status).toBe(403);
    expect(((await freeRefused.json()) as ErrorBody).error.message).toContain('activate Pro');
  });

  it('edits a Pro account’s image by instruction through the API’s edit path, counting once, with its CSRF token only', async () => {
    const jpeg = await smallJpeg();
    const cookie = await signUp(server, 'pro@example.com', true);
    const account = (await server.db.findAccountByEmail('pro@example.com'))!;
    const pro = await pageOf(server.url, cookie);
    expect(pro.html).toContain('id="ai-panel"');
    expect(pro.html).toContain('id="edit-form"');
    expect(pro.html).toContain('/static/ai-panel.js');
    // No provider: a note instead of a form that would always fail.
    expect(pro.html).not.toContain('id="generate-form"');
    expect(pro.html).toContain('Image generation is not set up on this server');

    const noToken = await edit(server.url, { ...pro.headers, 'x-csrf-token': 'forged' }, jpeg, 'rotate left');
    expect(noToken.status).toBe(403);
    const crossSite = await edit(
      server.url,
      { ...pro.headers, 'sec-fetch-site': 'cross-site' },
      jpeg,
      'rotate left',
    );
    expect(crossSite.status).toBe(403);
    expect(await server.db.usageOn(account.id, quotaDay(at))).toBe(0);

    const res = await edit(
      server.url,
      pro.headers,
      jpeg,
      'make it 32 wide and black and white, groovy, convert to webp',
    );
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get('x-allowance')).toBe('account');
    expect(res.headers.get('content-type')).toBe('image/webp');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="photo.webp"');
    expect(JSON.parse(res.headers.get('x-edit-operations')!)).toEqual([
      { op: 'resize', width: 32 },
      { op: 'grayscale' },
      { op: 'format', format: 'webp' },
    ]);
    expect(JSON.parse(res.headers.get('x-edit-unrecognized')!)).toEqual(['groovy']);
    const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', 32, 32]);
    expect(await server.db.usageOn(account.id, quotaDay(at))).toBe(1);

    // The API's refusals, in its words: nothing understood is a 422 naming what was not.
    const pop = await edit(server.url, pro.headers, jpeg, 'make it pop');
    expect(pop.status).toBe(422);
    expect(((await pop.json()) as ErrorBody).error).toMatchObject({
      code: 'INSTRUCTION_NOT_UNDERSTOOD',
      details: { unrecognized: ['pop'] },
    });

    const get = await fetch(`${server.url}/web/edit`, { headers: { cookie } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');

    const gen = await generate(server.url, pro.headers, { prompt: 'a lighthouse at dusk' });
    expect(gen.status).toBe(501);
    expect(((await gen.json()) as ErrorBody).error.code).toBe('PROVIDER_NOT_CONFIGURED');
  });
});

describe('the Pro panel with an AI provider (a loopback fake of the OpenAI API)', { timeout: 30_000 }, () => {
  let server: TestServer;
  let fake: FakeProvider;
  const at = new Date();
  beforeAll(async () => {
    fake = await fakeOpenAi({ apiKey: OPENAI_KEY });
    server = await startTestServer({
      dbPath: ':memory:',
      overrides: { proDailyLimit: 5, openaiApiKey: OPENAI_KEY, openaiBaseUrl: fake.url, aiTimeoutMs: 5000 },
      now: () => at,
    });
  });
  afterAll(async () => {
    await server.close();
    await fake.close();
  });

  it('offers the generate form, and generates the image in the format asked, counted once', async () => {
    const cookie = await signUp(server, 'maker@example.com', true);
    const account = (await server.db.findAccountByEmail('maker@example.com'))!;
    const pro = await pageOf(server.url, cookie);
    expect(pro.html).toContain('id="generate-form"');
    expect(pro.html).not.toContain('generate-note');
    for (const model of ['fast', 'photo', 'design', 'icon']) expect(pro.html).toContain(`value="${model}"`);

    const noToken = await generate(
      server.url,
      { ...pro.headers, 'x-csrf-token': 'forged' },
      { prompt: 'a lighthouse at dusk' },
    );
    expect(noToken.status).toBe(403);
    expect(fake.requests).toHaveLength(0);

    const res = await generate(server.url, pro.headers, {
      prompt: 'a lighthouse at dusk',
      model: 'fast',
      output_format: 'png',
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get('x-ai-provider')).toBe('openai');
    expect(res.headers.get('content-type')).toBe('image/png');
    const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
    expect(meta.format).toBe('png');
    expect(fake.requests).toHaveLength(1);
    expect(await server.db.usageOn(account.id, quotaDay(at))).toBe(1);

    const bad = await generate(server.url, pro.headers, { prompt: '' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as ErrorBody).error.details).toEqual([
      expect.objectContaining({ field: 'prompt' }),
    ]);
  });
});
