import { CompressoError, type ErrorCode } from '@compresso/schema';
import sharp from 'sharp';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createEngine } from './engine.ts';
import { closeHeicDecoder } from './heic.ts';
import { withTimeLimit } from './limits.ts';
import { corpus } from './test-support/corpus.ts';
import { animated, animatedGif, noise, pngBomb, pngChunkBomb } from './test-support/fixtures.ts';

const engine = createEngine({ concurrency: 2 });

afterAll(() => closeHeicDecoder());

async function refusal(promise: Promise<unknown>): Promise<CompressoError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CompressoError);
  return error as CompressoError;
}

async function expectCode(input: Uint8Array, code: ErrorCode, status: number): Promise<CompressoError> {
  const error = await refusal(engine.optimize(input));
  expect(error.code).toBe(code);
  expect(error.status).toBe(status);
  // inspect() goes through the same checks
  expect((await refusal(engine.inspect(input))).code).toBe(code);
  return error;
}

describe('hostile and broken input', () => {
  it('anything but bytes → INVALID_REQUEST naming what came', async () => {
    for (const [input, name] of [
      ['photo.jpg', 'string'],
      [new ArrayBuffer(8), 'ArrayBuffer'],
      [undefined, 'undefined'],
    ] as const) {
      const error = await refusal(engine.optimize(input as unknown as Uint8Array));
      expect(error.code).toBe('INVALID_REQUEST');
      expect(error.message).toContain(`received ${name}`);
    }
  });

  it('zero bytes → EMPTY_FILE', async () => {
    const error = await expectCode(new Uint8Array(0), 'EMPTY_FILE', 422);
    expect(error.message).toMatch(/empty/);
  });

  it('truncated JPEG and PNG → CORRUPT_IMAGE', async () => {
    const jpeg = corpus('photo-skimage-rocket.jpg');
    const png = corpus('icon-oxygen-konqueror.png');
    for (const broken of [jpeg.subarray(0, jpeg.length >> 1), png.subarray(0, png.length >> 1)]) {
      const error = await refusal(engine.optimize(broken));
      expect(error.code).toBe('CORRUPT_IMAGE');
      expect(error.message).toMatch(/damaged or incomplete/);
    }
  });

  it('a text file named photo.jpg → NOT_AN_IMAGE', async () => {
    const text = Buffer.from('Dear customer,\nplease find attached photo.jpg\n');
    const error = await expectCode(text, 'NOT_AN_IMAGE', 415);
    expect(error.message).toMatch(/not an image/);
  });

  it('SVG and BMP → UNSUPPORTED_FORMAT, each named', async () => {
    const svg = Buffer.from(
      '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>',
    );
    expect((await expectCode(svg, 'UNSUPPORTED_FORMAT', 415)).message).toMatch(/^file: SVG is not supported/);
    const bmp = Buffer.alloc(70);
    bmp.write('BM', 0, 'latin1');
    bmp.writeUInt32LE(70, 2);
    bmp.writeUInt32LE(54, 10);
    bmp.writeUInt32LE(40, 14);
    bmp.writeInt32LE(2, 18);
    bmp.writeInt32LE(2, 22);
    bmp.writeUInt16LE(1, 26);
    bmp.writeUInt16LE(24, 28);
    expect((await expectCode(bmp, 'UNSUPPORTED_FORMAT', 415)).message).toMatch(
      /BMP images are not supported/,
    );
  });

  it('a 50000×50000 PNG bomb of a few hundred bytes → IMAGE_TOO_LARGE, without the memory', async () => {
    const bomb = pngBomb(50_000, 50_000);
    expect(bomb.length).toBeLessThan(4096);
    const rssBefore = process.memoryUsage().rss;
    const error = await expectCode(bomb, 'IMAGE_TOO_LARGE', 422);
    const rssGrowth = process.memoryUsage().rss - rssBefore;
    expect(error.message).toContain('50000×50000');
    expect(error.details).toMatchObject({ width: 50_000, height: 50_000 });
    // Refused from the header: the 7.5 GB of pixels were never allocated. (How fast: the benchmark.)
    expect(rssGrowth).toBeLessThan(100 * 1024 * 1024);
  });

  it('zlib bombs in PNG text and profile chunks do not blow memory', async () => {
    for (const kind of ['zTXt', 'iTXt', 'iCCP'] as const) {
      const bomb = await pngChunkBomb(kind, 64);
      expect(bomb.length).toBeLessThan(100_000);
      const rssBefore = process.memoryUsage().rss;
      // libvips's PNG reader caps what it inflates from ancillary chunks; the image itself is fine.
      const { info } = await engine.optimize(bomb);
      expect(info.width).toBe(8);
      expect(process.memoryUsage().rss - rssBefore).toBeLessThan(32 * 1024 * 1024);
    }
  });

  it('an animated GIF with 2000 frames → TOO_MANY_FRAMES', async () => {
    const gif = await animatedGif(2000, 4, 4);
    const error = await expectCode(gif, 'TOO_MANY_FRAMES', 422);
    expect(error.message).toMatch(/2000 frames; this server accepts at most 500/);
  });

  it('more pixels over all frames than maxTotalPixels → IMAGE_TOO_LARGE', async () => {
    const small = createEngine({ limits: { maxTotalPixels: 10_000 } });
    const gif = await animatedGif(20, 30, 30);
    const error = await refusal(small.optimize(gif));
    expect(error.code).toBe('IMAGE_TOO_LARGE');
    expect(error.message).toMatch(/over all frames/);
  });

  it('input over maxInputBytes → FILE_TOO_LARGE, before parsing', async () => {
    const small = createEngine({ limits: { maxInputBytes: 1000 } });
    const error = await refusal(small.optimize(Buffer.alloc(1001, 0x41)));
    expect(error.code).toBe('FILE_TOO_LARGE');
    expect(error.status).toBe(413);
  });

  it('a pipeline over the time limit → PROCESSING_TIMEOUT', async () => {
    // A quarter second: an AVIF encode of a 4 MP noise image takes several times that anywhere, and
    // libvips cannot interrupt an encoder once it has the frame, so the wall-clock guard answers.
    const strict = createEngine({ limits: { timeoutSeconds: 0.25 } });
    const big = await noise(2000, 2000).png({ compressionLevel: 0 }).toBuffer();
    const error = await refusal(strict.optimize(big, { output_format: 'avif', quality: 100 }));
    expect(error.code).toBe('PROCESSING_TIMEOUT');
    expect(error.message).toMatch(/limit of 0.25 s/);
    expect(error.details).toEqual({ limit_seconds: 0.25 });
  });

  it('withTimeLimit refuses at the limit, not before, on its own clock', async () => {
    // When the refusal comes is shown on fake timers: a stopwatch around a real encode measured the
    // machine's load as much as the guard (it was 240–1000 ms, and failed on saturated cores).
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      let outcome: unknown;
      const guarded = withTimeLimit(new Promise<never>(() => {}), 0.25).catch((e: unknown) => {
        outcome = e;
      });
      await vi.advanceTimersByTimeAsync(249);
      expect(outcome).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      await guarded;
      expect(outcome).toBeInstanceOf(CompressoError);
      expect((outcome as CompressoError).code).toBe('PROCESSING_TIMEOUT');
      // Work that finishes in time clears its timer: nothing is left to fire later.
      expect(await withTimeLimit(Promise.resolve('done'), 0.25)).toBe('done');
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('withTimeLimit passes results and failures through untouched', async () => {
    expect(await withTimeLimit(Promise.resolve(7), 1)).toBe(7);
    await expect(withTimeLimit(Promise.reject(new Error('own')), 1)).rejects.toThrow('own');
  });

  it('a HEIC decode over the time limit → PROCESSING_TIMEOUT', async () => {
    const strict = createEngine({ limits: { timeoutSeconds: 0.01 } });
    const error = await refusal(strict.optimize(corpus('photo-heic-mate-Dune.heic')));
    expect(error.code).toBe('PROCESSING_TIMEOUT');
  });

  it('says what is wrong differently for each refusal', async () => {
    const jpeg = corpus('photo-skimage-rocket.jpg');
    const small = createEngine({ limits: { maxInputBytes: 100 } });
    const gif = await animatedGif(600, 2, 2);
    // Thunks: a promise created before its turn would reject unobserved.
    const cases: [() => Promise<unknown>, ErrorCode][] = [
      [() => engine.optimize(new Uint8Array(0)), 'EMPTY_FILE'],
      [() => engine.optimize(Buffer.from('hello, this is text')), 'NOT_AN_IMAGE'],
      [() => engine.optimize(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>')), 'UNSUPPORTED_FORMAT'],
      [() => engine.optimize(Buffer.from('%PDF-1.7\n%âãÏÓ\n')), 'UNSUPPORTED_FORMAT'],
      [() => engine.optimize(jpeg.subarray(0, jpeg.length >> 1)), 'CORRUPT_IMAGE'],
      [() => engine.optimize(pngBomb(50_000, 50_000)), 'IMAGE_TOO_LARGE'],
      [() => engine.optimize(gif), 'TOO_MANY_FRAMES'],
      [() => small.optimize(jpeg), 'FILE_TOO_LARGE'],
    ];
    const messages = new Set<string>();
    for (const [run, code] of cases) {
      const error = await refusal(run());
      expect(error.code).toBe(code);
      expect(error.message).toMatch(/^file: /);
      messages.add(error.message);
    }
    expect(messages.size).toBe(cases.length);
  });
});

describe('broken files of every format', () => {
  it('names each broken format CORRUPT_IMAGE with the telling reason', async () => {
    const base = noise(64, 64);
    const files = {
      webp: await base.clone().webp().toBuffer(),
      avif: await base.clone().avif({ effort: 0 }).toBuffer(),
      tiff: await base.clone().tiff().toBuffer(),
    };
    for (const [format, file] of Object.entries(files)) {
      const error = await refusal(engine.optimize(file.subarray(0, file.length >> 1)));
      expect(error.code, format).toBe('CORRUPT_IMAGE');
      expect(error.message).not.toMatch(/bad seek/);
    }
    const header = corpus('photo-skimage-rocket.jpg').subarray(0, 300);
    expect((await refusal(engine.optimize(header))).message).toMatch(/premature end of JPEG image\)\.$/);
  });

  it('an option error stays a programming error, not a 4xx', async () => {
    const { fromSharpError } = await import('./sharp-errors.ts');
    const bug = new Error('Expected positive integer between 1 and 100000000 for width but received -1');
    expect(() => fromSharpError(bug)).toThrow(bug);
  });
});

describe('format detection', () => {
  it('trusts bytes, not names: text starting with "BM" is not a BMP', async () => {
    const error = await refusal(
      engine.optimize(Buffer.from('BMW 320d, 2019, one owner, full service history')),
    );
    expect(error.code).toBe('NOT_AN_IMAGE');
  });

  it('a hostile ftyp box claiming 4 GB of brands is read no further than its first 256 bytes', async () => {
    const hostile = Buffer.alloc(16 * 1024 * 1024, 0x61);
    hostile.writeUInt32BE(0xfffffff0, 0);
    hostile.write('ftypisom', 4, 'latin1');
    // An 'avif' brand past the cap: a reader that walked the claimed 4 GB would find it and take the
    // file for AVIF. (Shown by what is read, not by a stopwatch.)
    hostile.write('avif', 1024, 'latin1');
    const error = await refusal(engine.optimize(hostile));
    expect(error.code).toBe('UNSUPPORTED_FORMAT');
    expect(error.details).toEqual({ format: 'isom' });
  });

  it('knows SVG behind a BOM, comments and a DOCTYPE, and HTML is not SVG', async () => {
    const illustrator =
      '\ufeff<?xml version="1.0" encoding="utf-8"?>\n<!-- Generator: Adobe Illustrator 27.0 -->\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n<svg version="1.1" xmlns="http://www.w3.org/2000/svg"/>';
    expect((await refusal(engine.optimize(Buffer.from(illustrator)))).message).toMatch(/^file: SVG/);
    const html = '<!doctype html><html><body><svg xmlns="http://www.w3.org/2000/svg"/></body></html>';
    expect((await refusal(engine.optimize(Buffer.from(html)))).code).toBe('NOT_AN_IMAGE');
  });

  it('refuses video in an ISO container by name', async () => {
    const mp4 = Buffer.alloc(64);
    mp4.writeUInt32BE(24, 0);
    mp4.write('ftypisom\0\0\x02\0isomiso2', 4, 'latin1');
    const error = await refusal(engine.optimize(mp4));
    expect(error.code).toBe('UNSUPPORTED_FORMAT');
    expect(error.message).toMatch(/ISO media \(brand "isom"/);
  });
});

describe('outputs a format cannot hold', () => {
  it('a 20000-px wide image as WebP → IMAGE_TOO_LARGE suggesting max_dimension', async () => {
    const wide = await noise(20_000, 2).png().toBuffer();
    const error = await refusal(engine.optimize(wide, { output_format: 'webp' }));
    expect(error.code).toBe('IMAGE_TOO_LARGE');
    expect(error.message).toMatch(/too large for WebP output.*max_dimension/);
    const { info } = await engine.optimize(wide, { output_format: 'webp', max_dimension: 4000 });
    expect(info.width).toBe(4000);
  });

  it('a multi-page TIFF is its first page, not an animation', async () => {
    const twoPage = await animated(2, 16, 16).tiff().toBuffer();
    expect((await sharp(twoPage).metadata()).pages).toBe(2);
    expect(await engine.inspect(twoPage)).toMatchObject({
      frames: 1,
      animated: false,
      width: 16,
      height: 16,
    });
    const { data, info } = await engine.optimize(twoPage, { output_format: 'webp' });
    expect(info).toMatchObject({ frames: 1, width: 16, height: 16 });
    expect((await sharp(data).metadata()).pages ?? 1).toBe(1);
  });
});

describe('limits on animations', () => {
  it('maxPixels is per frame: an animation whose frames fit is not refused for its total', async () => {
    const tight = createEngine({ limits: { maxPixels: 1000, maxTotalPixels: 100_000 } });
    const gif = await animatedGif(10, 30, 30);
    const { info } = await tight.optimize(gif);
    expect(info.frames).toBe(10);
    expect((await refusal(tight.optimize(await animatedGif(2, 40, 40)))).code).toBe('IMAGE_TOO_LARGE');
  });
});
