/**
 * Calibration data for quality "auto" (core/engine/src/auto.ts, image-features.ts):
 *
 *   features  the cheap image features of every corpus image at ≤ 2048 px, and the synthetic/photo
 *             call isSynthetic() makes from them (the thresholds are read off this table);
 *   curves    per corpus image (≤ 2048 px) and format, the score at a grid of Compresso qualities with
 *             the encoder settings auto would use (and 4:2:0 as well for synthetic JPEG/AVIF), beside the
 *             image's features: what the quality predictor of auto.ts is fitted on.
 *   small     auto's outputs on small images (16–256 px, photos and graphics) in JPEG, WebP and AVIF,
 *             scored by the engine's metric AND by the reference SSIMULACRA2 tool, with the settings
 *             auto chose: the evidence behind SMALL_IMAGE_SIDE and the small-image settings.
 *
 * Usage: node test/bench/auto-calibrate.ts [--part features|curves|small] [--tool PATH]
 *        [--kinds photo,screenshot,…] [--out FILE]   (curves of some kinds only, into another file)
 * The reference tool (cloudinary/ssimulacra2, built from its public source, see FIELD-NOTES) is taken
 * from --tool, $SSIMULACRA2 or /work/tools/ssimulacra2/ssimulacra2; without it "small" is skipped.
 * Writes test/bench/results/auto-calibration.json (parts not run keep their previous values).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  type AutoEncoder,
  closeMetricPool,
  createEngine,
  decodeToRgb,
  type EncodeVariant,
  isSynthetic,
  measureFeatures,
  prepare,
  ssimulacra2,
} from '@compresso/engine';
import sharp from 'sharp';
import { backgroundsFor, decodeReferences, scoreEncoded } from '../../core/engine/src/metric/compare.ts';
import { DEFAULT_CORPUS, loadCorpus } from './corpus.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    part: { type: 'string' },
    tool: { type: 'string' },
    kinds: { type: 'string' },
    out: { type: 'string' },
  },
});
const OUT = values.out ?? join(HERE, 'results', 'auto-calibration.json');
const onlyKinds = values.kinds?.split(',');
const tool = values.tool ?? process.env.SSIMULACRA2 ?? '/work/tools/ssimulacra2/ssimulacra2';
const parts = values.part ? [values.part] : ['features', 'curves', 'small'];
const previous = existsSync(OUT) ? JSON.parse(readFileSync(OUT, 'utf8')) : {};
const result: Record<string, unknown> = { ...previous, date: new Date().toISOString() };
const corpus = await loadCorpus(DEFAULT_CORPUS);

if (parts.includes('features')) {
  const rows = [];
  for (const image of corpus.filter((i) => !i.heic)) {
    const f = await measureFeatures(
      sharp(image.bytes).resize(2048, 2048, { fit: 'inside', withoutEnlargement: true }),
    );
    const round = (n: number) => Math.round(n * 1000) / 1000;
    rows.push({
      name: image.name,
      kind: image.kind,
      flatShare: round(f.flatShare),
      colours: f.colours,
      edgeShare: round(f.edgeShare),
      chromaEdgeShare: round(f.chromaEdgeShare),
      synthetic: isSynthetic(f),
    });
    process.stderr.write(`features ${image.name}\n`);
  }
  result.features = rows;
}

/** Compresso qualities the curves are measured at: around the targets, where the predictor works. */
const CURVE_QUALITIES = [56, 66, 74, 80, 86, 94];

if (parts.includes('curves')) {
  const rows: unknown[] = [];
  // The grid runs inside an AutoEncoder, so every encode takes exactly the engine's path (orientation,
  // resize, JPEG flattening) and every score the metric path auto uses.
  let current: { name: string; kind: string } = { name: '', kind: '' };
  const grid: AutoEncoder = async (source, options, format, encodeAtQuality) => {
    const references = await decodeReferences(
      () => prepare(source, { ...options, strip_exif: true }, 'jpeg'),
      backgroundsFor(source.hasAlpha, format),
    );
    const { width, height, data } = references[0]!.image;
    const f = await measureFeatures(sharp(data, { raw: { width, height, channels: 3 } }));
    const synthetic = isSynthetic(f);
    const variants: { label: string; variant: EncodeVariant }[] =
      format === 'webp'
        ? [{ label: 'lossy', variant: {} }]
        : synthetic
          ? [
              { label: '4:4:4', variant: { chromaSubsampling: '4:4:4' } },
              { label: '4:2:0', variant: { chromaSubsampling: '4:2:0' } },
            ]
          : [{ label: '4:2:0', variant: { chromaSubsampling: '4:2:0' } }];
    let last: Awaited<ReturnType<typeof encodeAtQuality>> | undefined;
    for (const { label, variant } of variants) {
      const points = [];
      for (const q of CURVE_QUALITIES) {
        const encoded = await encodeAtQuality(q, variant);
        const score = await scoreEncoded(references, encoded.data);
        points.push({ q, bytes: encoded.data.length, score: Math.round(score * 100) / 100 });
        last = encoded;
      }
      const round = (n: number) => Math.round(n * 1000) / 1000;
      rows.push({
        ...current,
        width,
        height,
        format,
        variant: label,
        synthetic,
        features: {
          flatShare: round(f.flatShare),
          colours: f.colours,
          edgeShare: round(f.edgeShare),
          chromaEdgeShare: round(f.chromaEdgeShare),
          meanGradient: round(f.meanGradient),
        },
        points,
      });
      process.stderr.write(
        `curves ${current.name} ${format} ${label}: ${points.map((p) => `${p.q}:${p.score.toFixed(1)}`).join(' ')}\n`,
      );
    }
    return { encoded: last!, steps: 0 };
  };
  const engine = createEngine({ concurrency: 1, auto: grid });
  try {
    // Photos first (the predictor's main case); the file is rewritten after every image, so a run
    // cut short still leaves what it measured.
    const order = (k: string) => (k === 'photo' ? 0 : 1);
    const images = corpus
      .filter((i) => !i.heic && (!onlyKinds || onlyKinds.includes(i.kind)))
      .sort((a, b) => order(a.kind) - order(b.kind));
    for (const image of images) {
      current = { name: image.name, kind: image.kind };
      for (const format of ['jpeg', 'webp', 'avif'] as const) {
        await engine.optimize(image.bytes, { output_format: format, quality: 'auto', max_dimension: 2048 });
      }
      result.curves = { qualities: CURVE_QUALITIES, rows };
      writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
    }
  } finally {
    await engine.close();
  }
  result.curves = { qualities: CURVE_QUALITIES, rows };
}

/** Small sizes: the shorter-side cases of issue 11 (70×46, 156×78, 176×108) and the ends 16 and 256. */
const SMALL_SIDES = [16, 48, 70, 128, 176, 256];
const SMALL_IMAGES = [
  'photo-mate-Dune.jpg',
  'photo-mate-LadyBird.jpg',
  'photo-skimage-rocket.jpg',
  'photo-skimage-chelsea.png',
  'graphic-skimage-logo.png',
  'screenshot-gimp-assign-5.png',
];

if (parts.includes('small')) {
  if (!existsSync(tool)) {
    process.stderr.write(`small: reference tool not found at ${tool}; skipped\n`);
  } else {
    const engine = createEngine({ concurrency: 1 });
    const dir = mkdtempSync(join(tmpdir(), 'compresso-auto-cal-'));
    const rows = [];
    try {
      for (const name of SMALL_IMAGES) {
        const image = corpus.find((i) => i.name === name);
        if (!image) continue;
        for (const side of SMALL_SIDES) {
          // The source at this size, opaque (the reference tool judges alpha its own way), as a PNG.
          const source = await sharp(image.bytes)
            .resize(side, side, { fit: 'inside' })
            .flatten({ background: '#808080' })
            .png()
            .toBuffer();
          const refPath = join(dir, 'ref.png');
          writeFileSync(refPath, source);
          for (const format of ['jpeg', 'webp', 'avif'] as const) {
            for (const quality of ['auto', 80] as const) {
              const out = await engine.optimize(source, { output_format: format, quality });
              const distPath = join(dir, 'dist.png');
              await sharp(out.data).png().toFile(distPath);
              const { width, height } = out.info;
              const engineScore = ssimulacra2(await decodeToRgb(source), await decodeToRgb(out.data));
              let referenceScore: number | null = null;
              if (Math.min(width, height) >= 8) {
                referenceScore = Number(execFileSync(tool, [refPath, distPath]).toString().trim());
              }
              rows.push({
                name,
                width,
                height,
                format,
                quality,
                chosenQuality: out.info.quality,
                chromaSubsampling: out.info.chroma_subsampling ?? null,
                lossless: out.info.lossless ?? null,
                bytes: out.data.length,
                engineScore: Math.round(engineScore * 10) / 10,
                referenceScore: referenceScore === null ? null : Math.round(referenceScore * 10) / 10,
              });
              process.stderr.write(
                `small ${name} ${width}×${height} ${format} ${quality}: engine ${engineScore.toFixed(1)} reference ${referenceScore?.toFixed(1)} (${out.info.chroma_subsampling ?? ''}${out.info.lossless ? ' lossless' : ''} q${out.info.quality}, ${out.data.length} B)\n`,
              );
            }
          }
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await engine.close();
    }
    result.small = {
      tool,
      note: 'auto vs fixed 80 on small images, engine metric vs the reference SSIMULACRA2 tool (which refuses < 8 px)',
      rows,
    };
  }
}
await closeMetricPool();
writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
process.stderr.write(`written ${OUT}\n`);
