import { CompressoError, type InputFormat } from '@compresso/schema';

function ascii(bytes: Uint8Array, start: number, end: number): string {
  return String.fromCharCode(...bytes.subarray(start, end));
}

/** HEIF major/compatible brands whose image items are HEVC-coded (what iPhones write). */
const HEVC_BRANDS = new Set(['heic', 'heix', 'hevc', 'hevx', 'heim', 'heis', 'hevm', 'hevs']);

export interface Detected {
  format: InputFormat;
  /** True for HEIF files coded with HEVC, which sharp's prebuilt libvips cannot decode. */
  hevc: boolean;
}

function isoBrands(bytes: Uint8Array): string[] {
  const boxSize = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0);
  // A hostile ftyp may claim gigabytes; real ones list a handful of brands.
  const end = Math.min(bytes.length, Math.max(16, boxSize), 256);
  const brands = [ascii(bytes, 8, 12)];
  for (let i = 16; i + 4 <= end; i += 4) brands.push(ascii(bytes, i, i + 4));
  return brands;
}

const BMP_DIB_SIZES = new Set([12, 16, 40, 52, 56, 64, 108, 124]);

function readUint32LE(bytes: Uint8Array, at: number): number {
  if (at + 4 > bytes.length) return -1;
  return (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0;
}

const UNSUPPORTED: [string, (b: Uint8Array) => boolean][] = [
  // "BM" alone starts plenty of text ("BMW…"): also require the zero reserved words and a known
  // DIB header size.
  [
    'BMP',
    (b) => ascii(b, 0, 2) === 'BM' && readUint32LE(b, 6) === 0 && BMP_DIB_SIZES.has(readUint32LE(b, 14)),
  ],
  ['GIMP XCF', (b) => ascii(b, 0, 8) === 'gimp xcf'],
  ['PDF', (b) => ascii(b, 0, 5) === '%PDF-'],
  ['Photoshop (PSD)', (b) => ascii(b, 0, 4) === '8BPS'],
  ['ICO', (b) => b[0] === 0 && b[1] === 0 && b[2] === 1 && b[3] === 0 && b.length > 6],
  ['JPEG XL', (b) => (b[0] === 0xff && b[1] === 0x0a) || ascii(b, 4, 8) === 'JXL '],
  ['JPEG 2000', (b) => ascii(b, 4, 8) === 'jP  '],
  ['OpenEXR', (b) => b[0] === 0x76 && b[1] === 0x2f && b[2] === 0x31 && b[3] === 0x01],
];

/**
 * SVG is text: after an optional BOM, XML declaration, comments (editors write "Generator: …" ones)
 * and DOCTYPE, the first element is <svg>. Only the first 4 KB are read.
 */
function looksLikeSvg(bytes: Uint8Array): boolean {
  let head = new TextDecoder('utf-8', { fatal: false }).decode(bytes.subarray(0, 4096)).toLowerCase();
  for (;;) {
    head = head.replace(/^[\s\ufeff]+/, '');
    const close = head.startsWith('<?')
      ? '?>'
      : head.startsWith('<!--')
        ? '-->'
        : head.startsWith('<!')
          ? '>'
          : '';
    if (!close) break;
    const at = head.indexOf(close);
    if (at < 0) return false;
    head = head.slice(at + close.length);
  }
  return /^<svg[\s>/]/.test(head);
}

/**
 * Decide the format from the bytes, never from a file name: a text file named photo.jpg is not a JPEG.
 * Throws EMPTY_FILE, UNSUPPORTED_FORMAT (an image we do not take: SVG, BMP, …) or NOT_AN_IMAGE.
 */
export function detectFormat(bytes: Uint8Array): Detected {
  if (bytes.length === 0) throw new CompressoError('EMPTY_FILE', 'file: the file is empty (0 bytes).');
  const b = bytes;
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff)
    return { format: 'jpeg', hevc: false };
  if (b.length >= 8 && ascii(b, 0, 8) === '\x89PNG\r\n\x1a\n') return { format: 'png', hevc: false };
  if (b.length >= 6 && (ascii(b, 0, 6) === 'GIF87a' || ascii(b, 0, 6) === 'GIF89a'))
    return { format: 'gif', hevc: false };
  if (b.length >= 12 && ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 12) === 'WEBP')
    return { format: 'webp', hevc: false };
  if (b.length >= 4 && (ascii(b, 0, 4) === 'II*\0' || ascii(b, 0, 4) === 'MM\0*'))
    return { format: 'tiff', hevc: false };
  if (b.length >= 12 && ascii(b, 4, 8) === 'ftyp') {
    const brands = isoBrands(b);
    if (brands.some((x) => x === 'avif' || x === 'avis')) return { format: 'avif', hevc: false };
    if (brands.some((x) => HEVC_BRANDS.has(x))) return { format: 'heif', hevc: true };
    if (brands.some((x) => x === 'mif1' || x === 'msf1')) return { format: 'heif', hevc: true };
    // The same container carries video and camera raw (Canon CR3 is "crx "): say which.
    const kind = brands.includes('crx ')
      ? 'Canon CR3 raw'
      : `ISO media (brand "${brands[0]!.trim()}", e.g. video)`;
    throw new CompressoError(
      'UNSUPPORTED_FORMAT',
      `file: ${kind} files are not supported; send JPEG, PNG, WebP, AVIF, GIF, TIFF or HEIC.`,
      { details: { format: brands[0]!.trim() } },
    );
  }
  if (looksLikeSvg(b)) {
    throw new CompressoError(
      'UNSUPPORTED_FORMAT',
      'file: SVG is not supported (vector images are not compressed by Compresso; send JPEG, PNG, WebP, AVIF, GIF, TIFF or HEIC).',
      {
        details: { format: 'svg' },
      },
    );
  }
  for (const [name, test] of UNSUPPORTED) {
    if (b.length >= 8 && test(b)) {
      throw new CompressoError(
        'UNSUPPORTED_FORMAT',
        `file: ${name} images are not supported; send JPEG, PNG, WebP, AVIF, GIF, TIFF or HEIC.`,
        {
          details: { format: name },
        },
      );
    }
  }
  throw new CompressoError(
    'NOT_AN_IMAGE',
    'file: the data is not an image Compresso recognises (expected JPEG, PNG, WebP, AVIF, GIF, TIFF or HEIC).',
  );
}
