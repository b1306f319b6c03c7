import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileBlobStore, inlineQueue, type QueueWorker } from '@compresso/runtime';
import { InfoResultSchema, jsonSchemaOf } from '@compresso/schema';
import { proAccount, startBatchWorker, startTestServer, type TestServer } from '@compresso/server/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOB_THRESHOLD } from './server.ts';
import {
  BIG_PHOTO,
  CORPUS,
  type Connected,
  connect,
  errorOf,
  HEIC,
  PHOTO,
  PNG,
  textOf,
  workDir,
} from './test-support.ts';

const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

let srv: TestServer;
let key: string;
let mcp: Connected;
const work = workDir('server');
// A job queue, blob store and worker, as `compresso serve` has them: large batches run as jobs.
const queue = inlineQueue();
const blobs = fileBlobStore({ root: join(work.dir, 'blobs') });
let worker: QueueWorker | undefined;

beforeAll(async () => {
  srv = await startTestServer({ dbPath: ':memory:', queue, blobs });
  worker = startBatchWorker({
    queue,
    db: srv.db,
    blobs,
    engine: srv.engine,
    logger: srv.logger,
    config: srv.config,
    concurrency: 2,
  });
  ({ key } = await proAccount(srv.db, 'mcp@example.com'));
  mcp = await connect({ apiKey: key, baseUrl: srv.url, env: {} });
});

afterAll(async () => {
  await mcp?.close();
  await worker?.close({ timeoutMs: 1000 });
  await queue.close();
  await srv?.close();
  await blobs.close();
  work.cleanup();
});

/** How many requests the server answered on a path with a status, from its request log lines. */
function answered(path: string, status: number): number {
  return srv.logLines.filter((l) => l['msg'] === 'request' && l['path'] === path && l['status'] === status)
    .length;
}

async function used(): Promise<number> {
  const result = await mcp.call('get_usage');
  expect(result.isError).toBeFalsy();
  return (result.structuredContent as { used: number }).used;
}

describe('tools/list', () => {
  it('lists the seven tools with input and output schemas taken from @compresso/schema', async () => {
    const { tools } = await mcp.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'alt_text',
      'compress_batch',
      'compress_image',
      'edit_image',
      'generate_image',
      'get_usage',
      'image_info',
    ]);
    const options = jsonSchemaOf('CompressOptions', 'input') as { properties: Record<string, unknown> };
    const compress = tools.find((t) => t.name === 'compress_image')!;
    const input = compress.inputSchema.properties as Record<string, unknown>;
    const imageTools = ['compress_image', 'image_info', 'compress_batch', 'edit_image'];
    for (const tool of tools.filter((t) => imageTools.includes(t.name))) {
      const properties = tool.inputSchema.properties as Record<string, unknown>;
      for (const field of ['quality', 'max_dimension', 'output_format', 'strip_exif', 'png_to_jpeg']) {
        expect(properties[field], `${tool.name} ${field}`).toEqual(options.properties[field]);
      }
    }
    expect(compress.inputSchema.required).toEqual(['file_path']);
    expect(Object.keys(input)).toEqual(
      expect.arrayContaining(['file_path', 'output_path', 'overwrite', 'quality', 'max_dimension']),
    );
    const out = compress.outputSchema?.properties as Record<string, unknown>;
    const infoFields = Object.keys(InfoResultSchema.shape).filter((f) => f !== 'frames');
    expect(Object.keys(out)).toEqual(expect.arrayContaining(['file_path', 'output_path', ...infoFields]));
    const info = tools.find((t) => t.name === 'image_info')!;
    expect(Object.keys(info.inputSchema.properties ?? {})).not.toContain('output_path');
    expect(Object.keys(info.outputSchema?.properties ?? {})).toEqual(
      expect.arrayContaining(Object.keys(InfoResultSchema.shape)),
    );
    expect(tools.find((t) => t.name === 'image_info')!.annotations?.readOnlyHint).toBe(true);
  });
});

describe('compress_image', () => {
  it('writes <name>.min.<ext> beside the source, returns the numbers and the image, leaves the source alone', async () => {
    const source = work.copy(PHOTO, 'rocket.jpg');
    const before = sha(source);
    const result = await mcp.call('compress_image', { file_path: source, output_format: 'webp' });
    expect(result.isError).toBeFalsy();
    const s = result.structuredContent as Record<string, number | string | boolean>;
    expect(s['output_path']).toBe(join(work.dir, 'rocket.min.webp'));
    expect(s['file_path']).toBe(source);
    expect(s['input_size']).toBe(statSync(source).size);
    expect(s['output_size']).toBe(statSync(String(s['output_path'])).size);
    expect(s['output_size']).toBeLessThan(Number(s['input_size']));
    expect(s['savings_percent']).toBeCloseTo(
      100 * (1 - Number(s['output_size']) / Number(s['input_size'])),
      0,
    );
    expect(s).toMatchObject({
      input_format: 'jpeg',
      output_format: 'webp',
      width: 640,
      height: 427,
      quality: 80,
    });
    const meta = await sharp(String(s['output_path'])).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', 640, 427]);
    expect(sha(source)).toBe(before);
    const image = result.content.find((c) => c.type === 'image');
    expect(image?.type === 'image' && image.mimeType).toBe('image/webp');
    expect(
      image?.type === 'image' &&
        Buffer.from(image.data, 'base64').equals(readFileSync(String(s['output_path']))),
    ).toBe(true);
    expect(textOf(result)).toContain('% smaller');
  });

  it('gives the same bytes as the HTTP API for the same options', async () => {
    const source = work.copy(PHOTO, 'same.jpg');
    const out = join(work.dir, 'same-mcp.avif');
    const result = await mcp.call('compress_image', {
      file_path: source,
      output_path: out,
      output_format: 'AVIF',
      quality: 60,
      max_dimension: 256,
    });
    expect(result.isError).toBeFalsy();
    const form = new FormData();
    form.append('output_format', 'avif');
    form.append('quality', '60');
    form.append('max_dimension', '256');
    form.append('file', new Blob([readFileSync(source)], { type: 'image/jpeg' }), 'same.jpg');
    const http = await fetch(`${srv.url}/api/v1/compress`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    expect(http.status).toBe(200);
    expect(Buffer.from(await http.arrayBuffer()).equals(readFileSync(out))).toBe(true);
    // AVIF is not an image type assistants' model APIs take, so it is not returned as image content.
    expect(result.content.some((c) => c.type === 'image')).toBe(false);
    expect(result.structuredContent).toMatchObject({ width: 256, height: 171, output_format: 'avif' });
  });

  it('writes into an existing directory, reads HEIC and PNG, and quality "auto" reports the quality it chose', async () => {
    const outDir = join(work.dir, 'out-dir');
    mkdirSync(outDir);
    const heic = await mcp.call('compress_image', {
      file_path: HEIC,
      output_path: outDir,
      include_image: false,
    });
    expect(heic.isError).toBeFalsy();
    expect(heic.structuredContent).toMatchObject({
      output_path: join(outDir, 'photo-heic-rocket.jpg'),
      input_format: 'heif',
      output_format: 'jpeg',
    });
    expect(heic.content.some((c) => c.type === 'image')).toBe(false);
    const png = await mcp.call('compress_image', { file_path: PNG, output_path: outDir, quality: 'auto' });
    expect(png.isError).toBeFalsy();
    const s = png.structuredContent as { auto_quality: boolean; quality: number; output_path: string };
    expect(s.auto_quality).toBe(true);
    expect(s.quality).toBeGreaterThanOrEqual(1);
    expect(s.quality).toBeLessThanOrEqual(100);
    expect((await sharp(s.output_path).metadata()).format).toBe('png');
  });

  it('never replaces the source unless overwrite is true, and refuses before spending a request', async () => {
    const source = work.copy(PHOTO, 'keep.jpg');
    const before = sha(source);
    const count = await used();
    const refused = await mcp.call('compress_image', { file_path: source, output_path: source });
    expect(refused.isError).toBe(true);
    expect(errorOf(refused)).toMatchObject({ code: 'INVALID_OPTION' });
    expect(textOf(refused)).toContain('overwrite: true');
    // Into the source's own directory with its own format lands on the source too.
    const intoDir = await mcp.call('compress_image', { file_path: source, output_path: work.dir });
    expect(intoDir.isError).toBe(true);
    expect(errorOf(intoDir).code).toBe('INVALID_OPTION');
    expect(sha(source)).toBe(before);
    expect(await used()).toBe(count + 1); // only the get_usage call itself

    const replaced = await mcp.call('compress_image', {
      file_path: source,
      output_path: source,
      overwrite: true,
    });
    expect(replaced.isError).toBeFalsy();
    expect(replaced.structuredContent).toMatchObject({ output_path: source });
    expect(sha(source)).not.toBe(before);
    expect(statSync(source).size).toBe((replaced.structuredContent as { output_size: number }).output_size);
  });

  it('replaces another existing file only with overwrite', async () => {
    const source = work.copy(PHOTO, 'other.jpg');
    const target = join(work.dir, 'taken.webp');
    writeFileSync(target, 'precious');
    const refused = await mcp.call('compress_image', {
      file_path: source,
      output_path: target,
      output_format: 'webp',
    });
    expect(refused.isError).toBe(true);
    expect(errorOf(refused).code).toBe('CONFLICT');
    expect(readFileSync(target, 'utf8')).toBe('precious');
    const done = await mcp.call('compress_image', {
      file_path: source,
      output_path: target,
      output_format: 'webp',
      overwrite: true,
    });
    expect(done.isError).toBeFalsy();
    expect((await sharp(target).metadata()).format).toBe('webp');
    // The same through a directory: taken.webp is what writing taken.jpg into work.dir as WebP makes.
    const inDir = await mcp.call('compress_image', {
      file_path: work.copy(PHOTO, 'taken.jpg'),
      output_path: work.dir,
      output_format: 'webp',
    });
    expect(errorOf(inDir)).toMatchObject({ code: 'CONFLICT' });
    expect(textOf(inDir)).toContain(`${target} already exists`);
  });
});

describe('cancellation', () => {
  it('a call the client cancels aborts its request and writes nothing', async () => {
    const source = work.copy(join(CORPUS, 'photo-mate-LadyBird.jpg'), 'cancel.jpg');
    const controller = new AbortController();
    const call = mcp.client.callTool(
      { name: 'compress_image', arguments: { file_path: source, output_format: 'avif', quality: 60 } },
      undefined,
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort(new Error('user pressed stop')), 300);
    await expect(call).rejects.toThrow();
    const deadline = Date.now() + 20_000;
    while (!mcp.logs.some((l) => l.includes('compress_image failed') && l.includes('ABORTED'))) {
      if (Date.now() > deadline) throw new Error(`no aborted call in the log:\n${mcp.logs.join('\n')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(readdirSync(work.dir).filter((f) => f.startsWith('cancel.'))).toEqual(['cancel.jpg']);
  });
});

describe('path checks', () => {
  it('refuses relative, missing, directory, empty and non-image paths with a clear isError and no request', async () => {
    const count = await used();
    const text = join(work.dir, 'notes.txt');
    writeFileSync(text, 'not an image at all');
    const empty = join(work.dir, 'empty.jpg');
    writeFileSync(empty, '');
    const cases: [unknown, string, string][] = [
      ['photos/rocket.jpg', 'INVALID_OPTION', 'absolute path'],
      [join(work.dir, 'nope.jpg'), 'NOT_FOUND', 'does not exist'],
      [work.dir, 'INVALID_OPTION', 'is a directory'],
      [empty, 'EMPTY_FILE', 'empty'],
      [text, 'NOT_AN_IMAGE', 'is not an image'],
    ];
    for (const [file_path, code, words] of cases) {
      for (const tool of ['compress_image', 'image_info']) {
        const result = await mcp.call(tool, { file_path });
        expect(result.isError, `${tool} ${String(file_path)}`).toBe(true);
        expect(errorOf(result).code).toBe(code);
        expect(textOf(result)).toContain(words);
        expect(textOf(result)).toContain('file_path');
      }
    }
    const relativeOut = await mcp.call('compress_image', { file_path: PHOTO, output_path: 'out.webp' });
    expect(errorOf(relativeOut)).toMatchObject({ code: 'INVALID_OPTION' });
    expect(textOf(relativeOut)).toContain('output_path: expected an absolute path');
    expect(await used()).toBe(count + 1);
  });
});

describe('API errors become isError results with the server code', () => {
  it('a bad option: INVALID_OPTION naming the field, what it accepts and what it got, before any request', async () => {
    const count = await used();
    for (const [tool, args, expected] of [
      [
        'compress_image',
        { quality: 500 },
        'quality: expected an integer from 1 to 100, or "auto", received 500',
      ],
      ['image_info', { output_format: 'bmp' }, 'output_format: expected one of jpeg, png, webp, avif, gif'],
      [
        'compress_image',
        { max_dimension: 0 },
        'max_dimension: expected an integer from 1 to 65535, received 0',
      ],
      ['compress_batch', { strip_exif: 'maybe' }, 'strip_exif: expected true or false, received "maybe"'],
    ] as const) {
      const file = tool === 'compress_batch' ? { file_paths: [PHOTO] } : { file_path: PHOTO };
      const result = await mcp.call(tool, { ...file, ...args });
      expect(result.isError).toBe(true);
      const error = errorOf(result);
      expect(error.code).toBe('INVALID_OPTION');
      expect(error.message).toContain(expected);
      expect(error['details']).toEqual([expect.objectContaining({ field: Object.keys(args)[0] })]);
      expect(textOf(result)).toMatch(/^INVALID_OPTION: Invalid option — /);
    }
    // The spellings the server accepts are accepted here too.
    const ok = await mcp.call('image_info', {
      file_path: PHOTO,
      output_format: 'JPG',
      quality: '75',
      strip_exif: 'no',
    });
    expect(ok.structuredContent).toMatchObject({
      output_format: 'jpeg',
      quality: 75,
      metadata_stripped: false,
    });
    expect(await used()).toBe(count + 2);
  });

  it('a file that only looks like an image by name: NOT_AN_IMAGE (415) from the server, with its request id', async () => {
    const fake = join(work.dir, 'fake.jpg');
    writeFileSync(fake, 'Hello, I am text pretending to be a JPEG.\n'.repeat(20));
    const result = await mcp.call('compress_image', { file_path: fake });
    expect(result.isError).toBe(true);
    const error = errorOf(result);
    expect(error).toMatchObject({ code: 'NOT_AN_IMAGE', status: 415 });
    expect(typeof error['request_id']).toBe('string');
    expect(textOf(result)).toMatch(/^NOT_AN_IMAGE \(HTTP 415\): /);
    expect(textOf(result)).toContain(`Request id: ${String(error['request_id'])}`);
    expect(readdirSync(work.dir)).not.toContain('fake.min.jpg');
  });

  it('a truncated JPEG: CORRUPT_IMAGE (422); a file over the upload limit: FILE_TOO_LARGE (413)', async () => {
    const broken = join(work.dir, 'broken.jpg');
    writeFileSync(broken, readFileSync(PHOTO).subarray(0, 3000));
    const corrupt = await mcp.call('image_info', { file_path: broken });
    expect(errorOf(corrupt)).toMatchObject({ code: 'CORRUPT_IMAGE', status: 422 });
    const big = await mcp.call('compress_image', { file_path: BIG_PHOTO });
    expect(errorOf(big)).toMatchObject({ code: 'FILE_TOO_LARGE', status: 413 });
  });

  it('a wrong key: INVALID_API_KEY (401) with the setup steps', async () => {
    const other = await connect({ apiKey: `cmp_live_${'A'.repeat(43)}`, baseUrl: srv.url, env: {} });
    try {
      const result = await other.call('get_usage');
      expect(result.isError).toBe(true);
      expect(errorOf(result)).toMatchObject({ code: 'INVALID_API_KEY', status: 401 });
      expect(textOf(result)).toContain('COMPRESSO_API_KEY');
    } finally {
      await other.close();
    }
  });

  it('no server listening: CONNECTION_ERROR naming the address and COMPRESSO_BASE_URL', async () => {
    const other = await connect({ apiKey: key, baseUrl: 'http://127.0.0.1:9', env: {}, maxRetries: 0 });
    try {
      const result = await other.call('image_info', { file_path: PHOTO });
      expect(result.isError).toBe(true);
      expect(errorOf(result).code).toBe('CONNECTION_ERROR');
      expect(textOf(result)).toContain('http://127.0.0.1:9');
      expect(textOf(result)).toContain('COMPRESSO_BASE_URL');
      expect(other.logs.some((l) => l.includes('image_info failed') && l.includes('CONNECTION_ERROR'))).toBe(
        true,
      );
    } finally {
      await other.close();
    }
  });
});

describe('image_info', () => {
  it('reports what compression would give, in the schema InfoResult, and writes nothing', async () => {
    const dir = join(work.dir, 'info');
    mkdirSync(dir);
    const source = join(dir, 'rocket.jpg');
    writeFileSync(source, readFileSync(PHOTO));
    const result = await mcp.call('image_info', {
      file_path: source,
      output_format: 'webp',
      max_dimension: 300,
    });
    expect(result.isError).toBeFalsy();
    const { file_path, ...info } = result.structuredContent as Record<string, unknown>;
    expect(file_path).toBe(source);
    const parsed = InfoResultSchema.parse(info);
    expect(parsed).toMatchObject({
      input_size: statSync(source).size,
      output_format: 'webp',
      width: 300,
      height: 200,
    });
    expect(parsed.output_size).toBeLessThan(parsed.input_size);
    expect(readdirSync(dir)).toEqual(['rocket.jpg']);
    expect(textOf(result)).toContain('Nothing was written');
    // Sizes as the CLI and the web compressor count them: 112 525 bytes is 112.5 kB (not 109.9 KB).
    expect(textOf(result)).toContain(
      `${source}: 112.5 kB jpeg 640×427 → ${(parsed.output_size / 1000).toFixed(1)} kB webp 300×200`,
    );
  });
});

describe('compress_batch', () => {
  it('50 files with 3 bad ones: 47 results and 3 clear errors, in order, with progress', async () => {
    const dir = join(work.dir, 'batch');
    const out = join(work.dir, 'batch-out');
    mkdirSync(dir);
    const paths: string[] = [];
    for (let i = 1; i <= 50; i++) {
      const name = join(dir, `p${String(i).padStart(2, '0')}.jpg`);
      if (i === 7) writeFileSync(name, readFileSync(PHOTO).subarray(0, 3000));
      else if (i === 23) writeFileSync(name.replace(/\.jpg$/, '.png'), 'text, not a PNG');
      else if (i !== 41) writeFileSync(name, readFileSync(PHOTO));
      paths.push(i === 23 ? name.replace(/\.jpg$/, '.png') : name);
    }
    const progress: { progress: number; total?: number }[] = [];
    const [jobsBefore, compressBefore] = [answered('/api/v1/jobs', 202), answered('/api/v1/compress', 200)];
    const result = await mcp.call(
      'compress_batch',
      { file_paths: paths, output_dir: out, output_format: 'webp', quality: 70 },
      (p) => progress.push(p),
    );
    expect(result.isError).toBeFalsy();
    // Over JOB_THRESHOLD files: one job, no single compress request.
    expect(paths.length).toBeGreaterThan(JOB_THRESHOLD);
    expect(answered('/api/v1/jobs', 202) - jobsBefore).toBe(1);
    expect(answered('/api/v1/compress', 200) - compressBefore).toBe(0);
    const s = result.structuredContent as {
      total: number;
      succeeded: number;
      failed: number;
      input_size: number;
      output_size: number;
      results: {
        file_path: string;
        ok: boolean;
        output_path?: string;
        error?: { code: string; status?: number };
      }[];
    };
    expect([s.total, s.succeeded, s.failed]).toEqual([50, 47, 3]);
    expect(s.results.map((r) => r.file_path)).toEqual(paths);
    expect(s.results[6]).toMatchObject({ ok: false, error: { code: 'CORRUPT_IMAGE', status: 422 } });
    expect(s.results[22]).toMatchObject({ ok: false, error: { code: 'NOT_AN_IMAGE', status: 415 } });
    expect(s.results[40]).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
    const written = readdirSync(out).sort();
    expect(written).toHaveLength(47);
    expect(written[0]).toBe('p01.webp');
    expect(s.results[0]?.output_path).toBe(join(out, 'p01.webp'));
    expect(s.input_size).toBe(47 * statSync(PHOTO).size);
    expect(s.output_size).toBe(written.reduce((sum, f) => sum + statSync(join(out, f)).size, 0));
    // One notification per file sent (49: the missing one never left), ending at 50 of 50.
    expect(progress).toHaveLength(49);
    expect(progress.at(-1)).toMatchObject({ progress: 50, total: 50 });
    expect(textOf(result)).toMatch(/^47 of 50 compressed/);
  });

  it('without output_dir writes each result beside its source and never replaces a source', async () => {
    const a = work.copy(PHOTO, 'beside-a.jpg');
    const b = work.copy(PNG, 'beside-b.png');
    const before = [sha(a), sha(b)];
    const jobsBefore = answered('/api/v1/jobs', 202);
    const result = await mcp.call('compress_batch', { file_paths: [a, b] });
    expect(result.isError).toBeFalsy();
    // A small batch: one compress request per file, no job.
    expect(answered('/api/v1/jobs', 202)).toBe(jobsBefore);
    expect(result.structuredContent).toMatchObject({
      succeeded: 2,
      results: [
        { ok: true, output_path: join(work.dir, 'beside-a.min.jpg') },
        { ok: true, output_path: join(work.dir, 'beside-b.min.png') },
      ],
    });
    expect([sha(a), sha(b)]).toEqual(before);
  });

  it('refuses an output_dir that is a file, and an empty list', async () => {
    const file = work.copy(PHOTO, 'not-a-dir.jpg');
    const result = await mcp.call('compress_batch', { file_paths: [PHOTO], output_dir: file });
    expect(errorOf(result)).toMatchObject({ code: 'INVALID_OPTION' });
    expect(textOf(result)).toContain('is not a directory');
    const none = await mcp.call('compress_batch', { file_paths: [] });
    expect(none.isError).toBe(true);
    expect(textOf(none)).toContain('file_paths');
  });
});

describe('get_usage', () => {
  it('reports the plan and the count, this call included', async () => {
    const first = await mcp.call('get_usage');
    const second = await mcp.call('get_usage');
    const a = first.structuredContent as {
      plan: string;
      used: number;
      limit: number;
      remaining: number;
      resets_at: string;
    };
    const b = second.structuredContent as typeof a;
    expect(a).toMatchObject({ plan: 'pro', limit: 500 });
    expect(b.used).toBe(a.used + 1);
    expect(b.remaining).toBe(b.limit - b.used);
    const midnight = new Date();
    midnight.setUTCHours(24, 0, 0, 0);
    expect(Date.parse(a.resets_at)).toBe(midnight.getTime());
    expect(textOf(first)).toContain('requests used today');
  });
});
