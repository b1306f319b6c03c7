/**
 * A lossy WebP of a transparent image is a RIFF file of chunks: VP8X (canvas and flags), ALPH (the
 * alpha plane, coded on its own) and VP8 (the colour, lossy), with ICCP, EXIF and XMP around them
 * when metadata is kept (https://developers.google.com/speed/webp/docs/riff_container). At the
 * alpha quality the engine writes (100, libwebp's default: lossless) the ALPH chunk depends on the
 * alpha plane and the effort only, not on the colour's quality; and the colour's VP8 chunk does not
 * depend on the alpha quality (libwebp codes the alpha from a copy of the plane, after the colour
 * has been converted with the full alpha). So two encodes of the same pixels at two qualities share
 * their ALPH chunk, and an encode whose alpha was written at quality 0, cheaply, becomes the full
 * encode to the byte once the ALPH chunk of an earlier one is put in its place.
 *
 * Measured with sharp 0.35.5 (libwebp 1.6): the alpha plane was 40–70 % of a lossy WebP encode of
 * the corpus's transparent images (a 256-px icon 9.2 → 5.7 ms and 15.4 → 6.7 ms; the Debian logo
 * at 1689 × 1800 682 → 237 ms; the Gulp illustration at 1920 × 1200 967 → 304 ms). Quality "auto"
 * encodes the same image at several qualities; optimize.ts splices every encode after the first.
 * webp-alpha.test.ts holds the spliced outputs byte-equal to full encodes.
 */

interface Chunk {
  id: string;
  data: Uint8Array;
}

/** The chunks of a RIFF WebP file, or undefined when it is not one (or is cut short). */
export function webpChunks(file: Uint8Array): Chunk[] | undefined {
  if (file.length < 12) return undefined;
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const tag = (at: number) => String.fromCharCode(file[at]!, file[at + 1]!, file[at + 2]!, file[at + 3]!);
  if (tag(0) !== 'RIFF' || tag(8) !== 'WEBP' || view.getUint32(4, true) + 8 !== file.length) return undefined;
  const chunks: Chunk[] = [];
  let at = 12;
  while (at < file.length) {
    if (at + 8 > file.length) return undefined;
    const size = view.getUint32(at + 4, true);
    const end = at + 8 + size;
    if (end > file.length) return undefined;
    chunks.push({ id: tag(at), data: file.subarray(at + 8, end) });
    at = end + (size & 1);
  }
  return at === file.length ? chunks : undefined;
}

/** The alpha plane of a single-frame lossy WebP and the header it goes with, to splice into others. */
export interface WebpAlpha {
  /** The VP8X chunk's payload: canvas size and flags, which a spliced file must share. */
  header: Uint8Array;
  /** The ALPH chunk's payload. */
  alpha: Uint8Array;
}

/** The VP8X and ALPH chunks of a single-frame lossy WebP with transparency (not copied), or undefined. */
function alphaChunks(chunks: Chunk[]): { head: Chunk; alph: Chunk } | undefined {
  const head = chunks[0];
  if (head?.id !== 'VP8X') return undefined;
  const alphas = chunks.filter((c) => c.id === 'ALPH');
  if (alphas.length !== 1 || chunks.some((c) => c.id === 'ANIM' || c.id === 'ANMF')) return undefined;
  return { head, alph: alphas[0]! };
}

/** The ALPH chunk of a single-frame lossy WebP with transparency (copied), or undefined. */
export function webpAlpha(file: Uint8Array): WebpAlpha | undefined {
  const found = alphaChunks(webpChunks(file) ?? []);
  return found && { header: Uint8Array.from(found.head.data), alpha: Uint8Array.from(found.alph.data) };
}

/**
 * `file` with its ALPH chunk's payload replaced by `known.alpha`; undefined (the caller encodes in
 * full) unless `file` is a single-frame lossy WebP with one ALPH chunk and the same VP8X header.
 */
export function withWebpAlpha(file: Uint8Array, known: WebpAlpha): Buffer<ArrayBuffer> | undefined {
  const chunks = webpChunks(file);
  const own = chunks && alphaChunks(chunks);
  if (!chunks || !own || !Buffer.from(own.head.data).equals(known.header)) return undefined;
  const parts = chunks.map((c) => (c.id === 'ALPH' ? { id: c.id, data: known.alpha } : c));
  const length = 12 + parts.reduce((n, c) => n + 8 + c.data.length + (c.data.length & 1), 0);
  const out = Buffer.alloc(length);
  out.write('RIFF', 0, 'latin1');
  out.writeUInt32LE(length - 8, 4);
  out.write('WEBP', 8, 'latin1');
  let at = 12;
  for (const c of parts) {
    out.write(c.id, at, 'latin1');
    out.writeUInt32LE(c.data.length, at + 4);
    out.set(c.data, at + 8);
    at += 8 + c.data.length + (c.data.length & 1);
  }
  return out;
}
