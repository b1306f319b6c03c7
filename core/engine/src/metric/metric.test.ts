import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { corpus } from '../test-support/corpus.ts';
import { loopTurnsBefore } from '../test-support/loop-turns.ts';
import { decodeReferences, scoreEncoded } from './compare.ts';
import {
  closeMetricPool,
  decodeToRgb,
  decodeToRgbs,
  type RgbImage,
  SharedScratch,
  scoreAsync,
  ssimulacra2,
} from './index.ts';
import {
  prepareReferenceSimd,
  releaseReferenceSimd,
  type SimdReference,
  sampledScalesSimd,
  ssimulacra2Simd,
  subScoresSimd,
} from './simd.ts';
import {
  AUTO_ROW_SAMPLING,
  type PreparedReference,
  prepareReference,
  type RowSampling,
  scoreFromSubScores,
  ssimulacra2 as ssimulacra2Ts,
  subScores,
  toLinear,
} from './ssimulacra2.ts';

const photo = corpus('photo-skimage-chelsea.png'); // 451×300: a real photo, scored in ~0.1 s

async function jpegAt(quality: number): Promise<RgbImage> {
  return decodeToRgb(await sharp(photo).jpeg({ quality }).toBuffer());
}

afterAll(() => closeMetricPool());

describe('ssimulacra2', () => {
  it('scores an image against itself 100', async () => {
    const ref = await decodeToRgb(photo);
    expect(ssimulacra2(ref, ref)).toBe(100);
    expect(subScores(ref, ref).every((v) => v === 0)).toBe(true);
  });

  it('falls monotonically as JPEG quality falls', async () => {
    const ref = await decodeToRgb(photo);
    const scores: number[] = [];
    for (const q of [95, 85, 70, 50, 30, 10]) scores.push(ssimulacra2(ref, await jpegAt(q)));
    for (let i = 1; i < scores.length; i++) expect(scores[i]).toBeLessThan(scores[i - 1]!);
    // The published scale: q95 near visually lossless, q10 far below "low quality" (30).
    expect(scores[0]).toBeGreaterThan(85);
    expect(scores[0]).toBeLessThan(100);
    expect(scores[5]).toBeLessThan(30);
  });

  it('sees a blur and a colour shift, not only block artifacts', async () => {
    const ref = await decodeToRgb(photo);
    const blurred = await decodeToRgb(sharp(photo).blur(2));
    const tinted = await decodeToRgb(sharp(photo).modulate({ hue: 40 }));
    expect(ssimulacra2(ref, blurred)).toBeLessThan(60);
    expect(ssimulacra2(ref, tinted)).toBeLessThan(80);
  });

  it('is symmetric in size handling and refuses images of different sizes', async () => {
    const ref = await decodeToRgb(photo);
    const small = await decodeToRgb(sharp(photo).resize(200));
    expect(() => ssimulacra2(ref, small)).toThrow(RangeError);
    await expect(scoreAsync(ref, small)).rejects.toThrow(RangeError);
    const bad = { width: ref.width, height: ref.height, data: ref.data.subarray(1) };
    expect(() => ssimulacra2(ref, bad)).toThrow(RangeError);
  });

  it('handles images too small for all six scales', async () => {
    // 48×30 has three scales (48, 24, 12); the reference stops before a side under 8 pixels.
    const small = await sharp(photo).resize(48, 30, { fit: 'fill' }).png().toBuffer();
    const ref = await decodeToRgb(small);
    const score = ssimulacra2(ref, await decodeToRgb(await sharp(small).jpeg({ quality: 10 }).toBuffer()));
    expect(Number.isFinite(score)).toBe(true);
    expect(score).toBeLessThan(90);
    const tiny = await decodeToRgb(sharp(small).resize(6, 4, { fit: 'fill' }));
    expect(ssimulacra2(tiny, tiny)).toBe(100);
    // Under 8 px a side the reference tool has no scale to compute; padded, a difference still shows.
    const solid = (width: number, height: number, v: number): RgbImage => ({
      width,
      height,
      data: new Uint8Array(width * height * 3).fill(v),
    });
    expect(ssimulacra2(solid(4, 4, 0), solid(4, 4, 255))).toBeLessThan(50);
    expect(ssimulacra2(solid(7, 100, 0), solid(7, 100, 255))).toBeLessThan(50);
    expect(ssimulacra2(solid(4, 4, 120), solid(4, 4, 120))).toBe(100);
  });

  it('scoreAsync leaves the event loop free for what the same score would hold it on the main thread', async () => {
    const big = await sharp(corpus('photo-mate-Dune.jpg')).resize(1600).png().toBuffer();
    const ref = await decodeToRgb(big);
    const dist = await decodeToRgb(await sharp(big).jpeg({ quality: 50 }).toBuffer());
    const sync = ssimulacra2(ref, dist);
    const scoring = scoreAsync(ref, dist);
    // The loop turns while the worker scores; the same score on the main thread would leave no turn
    // between the call and the answer. (Was: worst timer lag under max(100 ms, half the sync time).)
    expect(await loopTurnsBefore(scoring)).toBe(10);
    expect(await scoring).toBe(sync);
  });

  it('gives the same score in the worker pool as in-process', async () => {
    const ref = await decodeToRgb(photo);
    const dist = await jpegAt(60);
    const [a, b] = await Promise.all([scoreAsync(ref, dist), scoreAsync(ref, dist)]);
    expect(a).toBe(ssimulacra2(ref, dist));
    expect(b).toBe(a);
  });

  it('an alpha channel opaque everywhere gives one image for every background; scores stay the worse background', async () => {
    const backgrounds = [
      { r: 26, g: 26, b: 26 },
      { r: 230, g: 230, b: 230 },
    ];
    // The scikit-image logo is RGBA with every pixel opaque; the folder icon has transparent pixels.
    const [a, b] = await decodeToRgbs(corpus('graphic-skimage-logo.png'), backgrounds);
    expect(a).toBe(b);
    expect(a!.rgba).toBeUndefined();
    const [c, d] = await decodeToRgbs(corpus('icon-oxygen-folder-red.png'), backgrounds);
    expect(c).not.toBe(d);
    expect(c!.rgba).toBe(d!.rgba);
    // scoreEncoded scores such a pair once (compare.ts), and two distinct backgrounds by the worse.
    const logo = corpus('graphic-skimage-logo.png');
    const webp = await sharp(logo).webp({ quality: 60 }).toBuffer();
    const references = await decodeReferences(() => sharp(logo), backgrounds);
    const [candidate] = await decodeToRgbs(webp, backgrounds);
    expect(await scoreEncoded(references, webp)).toBe(ssimulacra2(references[0]!.image, candidate!));
    const folder = corpus('icon-oxygen-folder-red.png');
    const folderWebp = await sharp(folder).webp({ quality: 60 }).toBuffer();
    const folderRefs = await decodeReferences(() => sharp(folder), backgrounds);
    const folderCandidates = await decodeToRgbs(folderWebp, backgrounds);
    expect(await scoreEncoded(folderRefs, folderWebp)).toBe(
      Math.min(...folderRefs.map((r, i) => ssimulacra2(r.image, folderCandidates[i]!))),
    );
  });

  it('serves a request from the smallest free buffer large enough, and keeps no more than its bound', () => {
    const scratch = new SharedScratch({ maxFreeBytes: 1000 });
    const image = (bytes: Uint8Array) => ({ width: 1, height: bytes.length / 3, data: bytes });
    const big = scratch.take(600);
    const small = scratch.take(300);
    scratch.give([image(big), image(small)]);
    expect(scratch.freeBytes()).toBe(900);
    // 240 bytes: a view over the 300-byte buffer, not the 600-byte one.
    const view = scratch.take(240);
    expect(view.buffer).toBe(small.buffer);
    expect(view.length).toBe(240);
    expect(scratch.take(450).buffer).toBe(big.buffer);
    // A buffer more than twice as large as asked for is left for a larger request.
    scratch.give([image(view)]);
    expect(scratch.take(140).buffer).not.toBe(small.buffer);
    expect(scratch.take(150).buffer).toBe(small.buffer);
    // Past the bound the oldest free buffer goes; one larger than the bound is never kept.
    const larger = new Uint8Array(new SharedArrayBuffer(900));
    scratch.give([image(small), image(larger)]);
    expect(scratch.freeBytes()).toBe(900);
    expect(scratch.take(450).buffer).toBe(larger.buffer);
    scratch.give([image(new Uint8Array(new SharedArrayBuffer(1200)))]);
    expect(scratch.freeBytes()).toBe(0);
  });

  it("reuses a scratch's shared buffers from one candidate to the next, with the scores of fresh memory", async () => {
    const backgrounds = [
      { r: 26, g: 26, b: 26 },
      { r: 230, g: 230, b: 230 },
    ];
    const folder = corpus('icon-oxygen-folder-red.png');
    const references = await decodeReferences(() => sharp(folder), backgrounds);
    const scratch = new SharedScratch();
    const first = await decodeToRgbs(
      await sharp(folder).webp({ quality: 40 }).toBuffer(),
      backgrounds,
      scratch,
    );
    scratch.give(first);
    const second = await decodeToRgbs(
      await sharp(folder).webp({ quality: 90 }).toBuffer(),
      backgrounds,
      scratch,
    );
    // The RGBA and both composites went into the buffers the first candidate handed back.
    const used = new Set(first.flatMap((i) => [i.data.buffer, i.rgba!.buffer]));
    expect(second.every((i) => used.has(i.data.buffer) && used.has(i.rgba!.buffer))).toBe(true);
    // Scored one after the other through the same scratch, every candidate scores as without it.
    for (const q of [30, 60, 85, 30]) {
      const webp = await sharp(folder).webp({ quality: q }).toBuffer();
      expect(await scoreEncoded(references, webp, {}, scratch)).toBe(await scoreEncoded(references, webp));
    }
    const logo = corpus('graphic-skimage-logo.png');
    const logoRefs = await decodeReferences(() => sharp(logo), backgrounds);
    for (const q of [50, 80]) {
      const jpeg = await sharp(logo).jpeg({ quality: q }).toBuffer();
      expect(await scoreEncoded(logoRefs, jpeg, {}, scratch)).toBe(await scoreEncoded(logoRefs, jpeg));
    }
    // A scratch holding the 256-px icon's buffers: the same icon at 220 px goes into views over them.
    const fresh = new SharedScratch();
    const large = await decodeToRgbs(
      await sharp(folder).webp({ quality: 50 }).toBuffer(),
      backgrounds,
      fresh,
    );
    const largeBuffers = new Set(large.flatMap((i) => [i.data.buffer, i.rgba!.buffer]));
    fresh.give(large);
    const smaller = () => sharp(folder).resize(220);
    const smallerRefs = await decodeReferences(smaller, backgrounds);
    const webp = await smaller().webp({ quality: 50 }).toBuffer();
    const inLarger = await decodeToRgbs(webp, backgrounds, fresh);
    const views = inLarger.flatMap((i) => [i.data, i.rgba!]);
    expect(views.every((v) => largeBuffers.has(v.buffer) && v.buffer.byteLength > v.length)).toBe(true);
    expect(inLarger[0]!.rgba!.length).toBe(220 * 220 * 4);
    fresh.give(inLarger);
    expect(await scoreEncoded(smallerRefs, webp, {}, fresh)).toBe(await scoreEncoded(smallerRefs, webp));
  });

  it('hands pixels to the worker in shared memory: decoded there, or copied there once', async () => {
    // Decoded pixels are posted to the metric thread without a copy.
    const ref = await decodeToRgb(photo);
    const dist = await jpegAt(60);
    expect(ref.data.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(dist.data.buffer).toBeInstanceOf(SharedArrayBuffer);
    const transparent = await decodeToRgb(corpus('icon-oxygen-folder-red.png'));
    expect(transparent.rgba?.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(transparent.data.buffer).toBeInstanceOf(SharedArrayBuffer);
    // Pixels in ordinary memory (a caller's own arrays) give the same score, and stay the caller's.
    const own = (image: RgbImage): RgbImage => ({ ...image, data: new Uint8Array(image.data) });
    const ownRef = own(ref);
    expect(await scoreAsync(ownRef, own(dist))).toBe(ssimulacra2(ref, dist));
    expect(await scoreAsync(ownRef, own(dist))).toBe(ssimulacra2(ref, dist));
    expect(ownRef.data.buffer).toBeInstanceOf(ArrayBuffer);
  });
});

/** The two implementations: the TypeScript one and the WebAssembly SIMD one (simd.ts). */
interface Implementation<P> {
  name: string;
  prepare(reference: RgbImage, sampling?: RowSampling): P;
  score(reference: RgbImage | P, distorted: RgbImage): number;
  sub(reference: RgbImage, distorted: RgbImage, weightedOnly?: boolean): Float64Array;
  sampledScales(prepared: P): number;
  release(prepared: P): void;
}
const typescript: Implementation<PreparedReference> = {
  name: 'TypeScript',
  prepare: prepareReference,
  score: ssimulacra2Ts,
  sub: subScores,
  sampledScales: (p) => p.rows?.filter((r) => r !== undefined).length ?? 0,
  release: () => undefined,
};
const webassembly: Implementation<SimdReference> = {
  name: 'WebAssembly',
  prepare: prepareReferenceSimd,
  score: ssimulacra2Simd,
  sub: subScoresSimd,
  sampledScales: sampledScalesSimd,
  release: releaseReferenceSimd,
};

describe.each([typescript, webassembly] as Implementation<unknown>[])(
  'prepared reference ($name)',
  ({ prepare: prepareReference, score: ssimulacra2, sub: subScores, sampledScales, release }) => {
    it('scores exactly as the one-shot path, for several candidates', async () => {
      const ref = await decodeToRgb(photo);
      const prepared = prepareReference(ref);
      for (const q of [90, 40]) {
        const dist = await jpegAt(q);
        expect(ssimulacra2(prepared, dist)).toBe(ssimulacra2(ref, dist));
      }
    });

    it('skipping the terms of weight 0 or negligible weight moves no score by more than 0.005, at every scale count', async () => {
      // 451×300 has all six scales; 100×70 four, 40×30 two, 9×9 one: the weights are packed
      // differently for each, so which terms are skipped differs too. JPEG q30 at 4:2:0 and WebP q50:
      // blocking, ringing and lost colour, the errors the skipped X and B terms would see.
      let worst = 0;
      for (const side of [451, 100, 40, 9]) {
        const resized = () => sharp(photo).resize(side, side, { fit: 'inside' });
        const ref = await decodeToRgb(resized());
        for (const encoded of [
          await resized().jpeg({ quality: 30 }).toBuffer(),
          await resized().webp({ quality: 50 }).toBuffer(),
        ]) {
          const dist = await decodeToRgb(encoded);
          const all = subScores(ref, dist);
          const weighted = subScores(ref, dist, true);
          expect(
            weighted.some((v, i) => v !== all[i]),
            `${side}: some terms skipped`,
          ).toBe(true);
          const score = ssimulacra2(ref, dist);
          expect(ssimulacra2(prepareReference(ref), dist), `${side} prepared`).toBe(score);
          const off = Math.abs(score - scoreFromSubScores(all));
          expect(off, `${side}`).toBeLessThan(0.005);
          worst = Math.max(worst, off);
        }
      }
      // Not exactly 0: some skipped terms have a weight, only a negligible one.
      expect(worst).toBeGreaterThan(0);
    }, 60_000);

    it('row-sampled (AUTO_ROW_SAMPLING): exact under minHeight rows, within 0.5 of the exact score above', async () => {
      // 451×300 is under the 320 rows: not sampled at all, the very same score.
      const small = await decodeToRgb(photo);
      const smallDist = await jpegAt(40);
      expect(sampledScales(prepareReference(small, AUTO_ROW_SAMPLING))).toBe(0);
      expect(ssimulacra2(prepareReference(small, AUTO_ROW_SAMPLING), smallDist)).toBe(
        ssimulacra2(small, smallDist),
      );
      // A 1280-row photo: scales 1:1, 1:2 and 1:4 sampled; JPEG and WebP at qualities around the floor and target.
      const big = () => sharp(corpus('photo-mate-LadyBird.jpg')).resize(2048, 2048, { fit: 'inside' });
      const ref = await decodeToRgb(big());
      const exact = prepareReference(ref);
      const sampled = prepareReference(ref, AUTO_ROW_SAMPLING);
      expect(sampledScales(sampled)).toBe(3);
      for (const encoded of [
        await big().jpeg({ quality: 60 }).toBuffer(),
        await big().webp({ quality: 84 }).toBuffer(),
      ]) {
        const dist = await decodeToRgb(encoded);
        const off = ssimulacra2(sampled, dist) - ssimulacra2(exact, dist);
        expect(Math.abs(off)).toBeLessThanOrEqual(0.5);
        expect(off).not.toBe(0);
      }
      release(exact);
      release(sampled);
    }, 60_000);
  },
);

describe('compositing a transparent image', () => {
  it('gives the linear values of the blend computed in doubles, for every alpha and value over both backgrounds', () => {
    // toLinear looks the blend up in a 255²-entry table; the straightforward way computes the blend
    // in doubles and decodes it with the power function. Every alpha × every value, both backgrounds.
    const decode = (v: number) => (v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    const n = 256 * 256;
    const rgba = new Uint8Array(n * 4);
    for (let a = 0; a < 256; a++)
      for (let c = 0; c < 256; c++) {
        const j = (a * 256 + c) * 4;
        rgba.set([c, 255 - c, (c * 7) & 255, a], j);
      }
    let worst = 0;
    for (const background of [
      { r: 26, g: 26, b: 26 },
      { r: 230, g: 230, b: 230 },
      { r: 255, g: 0, b: 128 },
    ]) {
      const [r, g, b] = toLinear({ width: 256, height: 256, data: new Uint8Array(n * 3), rgba, background });
      const bg = [background.r, background.g, background.b];
      for (let i = 0; i < n; i++) {
        const a = rgba[i * 4 + 3]!;
        const t = a / 255;
        for (const [plane, c] of [
          [r, 0],
          [g, 1],
          [b, 2],
        ] as const) {
          const expected = Math.fround(decode((t * rgba[i * 4 + c]!) / 255 + ((1 - t) * bg[c]!) / 255));
          const got = plane[i]!;
          // Equal, or one Float32 step apart where the blend's own rounding crosses a step.
          worst = Math.max(worst, Math.abs(got - expected) / Math.max(expected, 1e-30));
        }
      }
    }
    expect(worst).toBeLessThan(2.4e-7);
  });
});

describe('decodeToRgb', () => {
  it('rounds the composite as the blend computed in doubles, for every alpha and value, whole and fractional backgrounds', async () => {
    // Whole 0–255 backgrounds take a lookup table in integers, others the float blend.
    const n = 256 * 256;
    const rgba = new Uint8Array(n * 4);
    for (let a = 0; a < 256; a++)
      for (let c = 0; c < 256; c++) rgba.set([c, 255 - c, (c * 7) & 255, a], (a * 256 + c) * 4);
    const png = await sharp(rgba, { raw: { width: 256, height: 256, channels: 4 } })
      .png()
      .toBuffer();
    const backgrounds = [
      { r: 26, g: 26, b: 26 },
      { r: 230, g: 230, b: 230 },
      { r: 255, g: 0, b: 128 },
      { r: 12.5, g: 100.25, b: 3 },
    ];
    const images = await decodeToRgbs(png, backgrounds);
    backgrounds.forEach((background, k) => {
      const bg = [background.r, background.g, background.b];
      const { data } = images[k]!;
      let wrong = 0;
      for (let i = 0; i < n; i++) {
        const t = rgba[i * 4 + 3]! / 255;
        for (let c = 0; c < 3; c++)
          if (data[i * 3 + c] !== Math.round(t * rgba[i * 4 + c]! + (1 - t) * bg[c]!)) wrong++;
      }
      expect(wrong).toBe(0);
      expect(images[k]!.background).toEqual(background);
    });
  });

  it('composites transparency onto the requested background', async () => {
    const clear = await sharp({
      create: { width: 8, height: 8, channels: 4, background: { r: 255, g: 0, b: 0, alpha: 0 } },
    })
      .png()
      .toBuffer();
    const dark = await decodeToRgb(clear, { background: { r: 26, g: 26, b: 26 } });
    const grey = await decodeToRgb(clear);
    expect([...dark.data.subarray(0, 3)]).toEqual([26, 26, 26]);
    expect([...grey.data.subarray(0, 3)]).toEqual([128, 128, 128]);
    expect(dark.data.length).toBe(8 * 8 * 3);
  });

  it('keeps a transparent image unflattened too, so alpha differences under one code value still count', async () => {
    // Grey 200 at alpha 200 and at alpha 201 over light grey (230) give 206.47 and 206.35: the same
    // 8-bit value however it is rounded, but the reference tool composites in floating point and
    // sees the two differ.
    const rgba = (alphaOf: (x: number) => number) => {
      const px = new Uint8Array(32 * 32 * 4);
      for (let i = 0; i < 32 * 32; i++) {
        px.fill(200, i * 4, i * 4 + 3);
        px[i * 4 + 3] = alphaOf(i % 32);
      }
      return sharp(px, { raw: { width: 32, height: 32, channels: 4 } })
        .png()
        .toBuffer();
    };
    const background = { r: 230, g: 230, b: 230 };
    const ref = await decodeToRgb(await rgba(() => 200), { background });
    const dist = await decodeToRgb(await rgba((x) => (x < 16 ? 201 : 200)), { background });
    expect([...dist.data]).toEqual([...ref.data]);
    const score = ssimulacra2(ref, dist);
    expect(score).toBeLessThan(100);
    expect(score).toBeGreaterThan(99);
    expect(ref.rgba?.length).toBe(32 * 32 * 4);
    expect(ref.background).toEqual(background);
    // Opaque images carry no RGBA copy: the metric reads the 8-bit data directly.
    expect((await decodeToRgb(photo)).rgba).toBeUndefined();
  });
});
