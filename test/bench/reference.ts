import { execFile } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { AVIF_EFFORT, encoderQuality, WEBP_EFFORT } from '@compresso/engine';
import type { OutputFormat } from '@compresso/schema';

const run = promisify(execFile);

/**
 * Reference encoders from Debian, each run single-threaded at the settings that match what the engine
 * asks its own encoder for at the same Compresso quality. They read the already resized source as a
 * PNG, so their time is PNG decode + encode (no resize, no JPEG/HEIC decode): a slight head start.
 */
export interface ReferenceTool {
  name: string;
  format: OutputFormat;
  binary: string;
  version: string;
  /** How the settings relate to the engine's, for the report. */
  settings: string;
  args(input: string, output: string, quality: number): string[];
  env?: Record<string, string>;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function version(binary: string, args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await run(binary, args, { timeout: 10_000 });
    return (
      (stdout || stderr)
        .split('\n')
        .find((l) => l.trim())
        ?.trim() ?? 'unknown'
    );
  } catch {
    return 'unknown';
  }
}

/**
 * /usr/local/bin/convert on the dev machines is a Python stand-in that only renders PNG previews;
 * the real ImageMagick lives under /usr/bin. Anything that does not announce itself as ImageMagick
 * (or is a script) is not used.
 */
async function findImageMagick(): Promise<string | undefined> {
  for (const path of ['/usr/bin/magick', '/usr/bin/convert-im6.q16', '/usr/bin/convert']) {
    if (!executable(path)) continue;
    if (readFileSync(path).subarray(0, 2).toString() === '#!') continue;
    const v = await version(path, ['-version']);
    if (v.includes('ImageMagick')) return path;
  }
  return undefined;
}

export interface ReferenceDiscovery {
  tools: ReferenceTool[];
  notes: string[];
}

/** The libheif/aom mapping sharp goes through: quality 0–100 onto quantiser 63–0. */
function aomQuantizer(avifQuality: number): number {
  return Math.round(((100 - avifQuality) * 63) / 100);
}

export async function discoverReferenceTools(formats: readonly OutputFormat[]): Promise<ReferenceDiscovery> {
  const tools: ReferenceTool[] = [];
  const notes: string[] = [];
  const want = new Set(formats);
  // libvips maps AVIF effort e to aom speed 9 − e, and palette effort e to libimagequant speed 11 − e.
  const aomSpeed = 9 - AVIF_EFFORT;
  const quantSpeed = 11 - 7;

  if (want.has('jpeg')) {
    const magick = await findImageMagick();
    if (magick) {
      tools.push({
        name: 'imagemagick',
        format: 'jpeg',
        binary: magick,
        version: await version(magick, ['-version']),
        settings: '-quality Q -sampling-factor 4:2:0 (libjpeg-turbo, not mozjpeg); transparency over white',
        args: (input, output, q) => [
          '-limit',
          'thread',
          '1',
          input,
          '-background',
          'white',
          '-alpha',
          'remove',
          '-strip',
          '-quality',
          String(encoderQuality('jpeg', q)),
          '-sampling-factor',
          '2x2',
          output,
        ],
      });
    } else notes.push('ImageMagick not installed (apt-get install imagemagick): jpeg reference skipped');
  }
  if (want.has('webp')) {
    if (executable('/usr/bin/cwebp')) {
      tools.push({
        name: 'cwebp',
        format: 'webp',
        binary: '/usr/bin/cwebp',
        version: `cwebp ${await version('/usr/bin/cwebp', ['-version'])}`,
        settings: `-q <engine's mapped WebP quality> -m ${WEBP_EFFORT}`,
        args: (input, output, q) => [
          '-quiet',
          '-q',
          String(encoderQuality('webp', q)),
          '-m',
          String(WEBP_EFFORT),
          input,
          '-o',
          output,
        ],
      });
    } else notes.push('cwebp not installed (apt-get install webp): webp reference skipped');
  }
  if (want.has('avif')) {
    if (executable('/usr/bin/avifenc')) {
      tools.push({
        name: 'avifenc',
        format: 'avif',
        binary: '/usr/bin/avifenc',
        version: await version('/usr/bin/avifenc', ['--version']),
        settings: `aom, -s ${aomSpeed} (= engine effort ${AVIF_EFFORT}), end-usage=q, cq-level from the mapped quality, 4:2:0, 1 thread`,
        args: (input, output, q) => {
          const cq = String(aomQuantizer(encoderQuality('avif', q)));
          return [
            '-j',
            '1',
            '-c',
            'aom',
            '-s',
            String(aomSpeed),
            '-y',
            '420',
            '--min',
            '0',
            '--max',
            '63',
            '-a',
            'end-usage=q',
            '-a',
            `cq-level=${cq}`,
            input,
            output,
          ];
        },
      });
    } else notes.push('avifenc not installed (apt-get install libavif-bin): avif reference skipped');
  }
  if (want.has('png')) {
    if (executable('/usr/bin/pngquant')) {
      tools.push({
        name: 'pngquant',
        format: 'png',
        binary: '/usr/bin/pngquant',
        version: `pngquant ${await version('/usr/bin/pngquant', ['--version'])}`,
        settings: `--quality 0-Q --speed ${quantSpeed} (libimagequant, as sharp's palette PNG; no lossless fallback)`,
        args: (input, output, q) => [
          '--quality',
          `0-${encoderQuality('png', q)}`,
          '--speed',
          String(quantSpeed),
          '--strip',
          '--force',
          '--output',
          output,
          input,
        ],
      });
    } else notes.push('pngquant not installed (apt-get install pngquant): png reference skipped');
  }
  return { tools, notes };
}

export async function runTool(tool: ReferenceTool, input: string, output: string, quality: number) {
  await run(tool.binary, tool.args(input, output, quality), {
    timeout: 300_000,
    env: { ...process.env, OMP_NUM_THREADS: '1', MAGICK_THREAD_LIMIT: '1' },
  });
}
