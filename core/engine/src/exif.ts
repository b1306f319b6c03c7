/**
 * Does an EXIF block (as sharp returns it: "Exif\0\0" + TIFF) carry a GPS IFD? Reads IFD0 only;
 * the GPS pointer (tag 0x8825) lives there by the EXIF specification.
 */
export function exifHasGps(exif: Uint8Array | undefined): boolean {
  if (!exif || exif.length < 14) return false;
  let base = 0;
  if (String.fromCharCode(...exif.subarray(0, 4)) === 'Exif') base = 6;
  const view = new DataView(exif.buffer, exif.byteOffset, exif.byteLength);
  const order = String.fromCharCode(exif[base]!, exif[base + 1]!);
  if (order !== 'II' && order !== 'MM') return false;
  const little = order === 'II';
  if (base + 8 > exif.length) return false;
  const ifd0 = base + view.getUint32(base + 4, little);
  if (ifd0 + 2 > exif.length) return false;
  const count = view.getUint16(ifd0, little);
  for (let i = 0; i < count; i++) {
    const entry = ifd0 + 2 + i * 12;
    if (entry + 12 > exif.length) return false;
    if (view.getUint16(entry, little) === 0x8825) return true;
  }
  return false;
}

function startsWith(bytes: Uint8Array, at: number, text: string): boolean {
  if (at + text.length > bytes.length) return false;
  for (let i = 0; i < text.length; i++) if (bytes[at + i] !== text.charCodeAt(i)) return false;
  return true;
}

/**
 * Which JPEG marker segments stay: everything that is not an APPn or COM (tables, frame and scan
 * headers), plus the three APPn that change how the pixels render — APP0 JFIF/JFXX, APP2 ICC_PROFILE
 * and APP14 Adobe (the colour transform of CMYK/YCCK files). Every other APPn goes: APP1 Exif and XMP,
 * APP13 IPTC, APP2 MPF (it indexes the images after EOI, which go too), and vendor segments (APP11
 * JUMBF, maker blocks) — the same set a re-encode without keepMetadata leaves out. An allow-list, so
 * an unknown segment never leaks.
 */
function keepJpegSegment(bytes: Uint8Array, marker: number, body: number): boolean {
  if (marker === 0xfe) return false;
  if (marker < 0xe0 || marker > 0xef) return true;
  if (marker === 0xe0) return startsWith(bytes, body, 'JFIF\0') || startsWith(bytes, body, 'JFXX\0');
  if (marker === 0xe2) return startsWith(bytes, body, 'ICC_PROFILE\0');
  if (marker === 0xee) return startsWith(bytes, body, 'Adobe');
  return false;
}

/**
 * Remove EXIF, XMP and IPTC from a JPEG without touching the compressed pixels. Walks the marker
 * segments (and, between scans, the entropy-coded data with indexOf, so it stays fast on 50 MB) and
 * stops at the first EOI: anything after it (MPF secondary images, which carry their own EXIF) goes.
 * Returns undefined when the structure is not what the standard says; the caller then re-encodes.
 */
function stripJpeg(bytes: Uint8Array): Uint8Array | undefined {
  const keep: [number, number][] = [[0, 2]];
  let at = 2;
  while (at + 2 <= bytes.length) {
    if (bytes[at] !== 0xff) return undefined;
    const marker = bytes[at + 1]!;
    if (marker === 0xff) {
      at++; // fill byte
      continue;
    }
    if (marker === 0xd9) {
      keep.push([at, at + 2]);
      return concat(bytes, keep);
    }
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      keep.push([at, at + 2]);
      at += 2;
      continue;
    }
    if (at + 4 > bytes.length) return undefined;
    const length = (bytes[at + 2]! << 8) | bytes[at + 3]!;
    const end = at + 2 + length;
    if (length < 2 || end > bytes.length) return undefined;
    if (keepJpegSegment(bytes, marker, at + 4)) keep.push([at, end]);
    at = end;
    if (marker === 0xda) {
      // Entropy-coded data: ends at the first 0xFF that is not a stuffed 0x00 or a restart marker.
      let scan = at;
      for (;;) {
        const ff = bytes.indexOf(0xff, scan);
        if (ff < 0 || ff + 1 >= bytes.length) return undefined;
        const next = bytes[ff + 1]!;
        if (next === 0x00 || (next >= 0xd0 && next <= 0xd7) || next === 0xff) {
          scan = ff + (next === 0xff ? 1 : 2);
          continue;
        }
        keep.push([at, ff]);
        at = ff;
        break;
      }
    }
  }
  return undefined;
}

/**
 * PNG chunks that stay besides the critical ones (IHDR, PLTE, IDAT, IEND: upper-case first letter):
 * those that shape the pixels — colour (iCCP, sRGB, gAMA, cHRM, cICP, mDCV, cLLI, sBIT), transparency
 * and background (tRNS, bKGD), physical size (pHYs) and APNG animation (acTL, fcTL, fdAT). eXIf, the
 * text chunks (tEXt, zTXt, iTXt: XMP and tools' comments), tIME and private chunks go. An allow-list,
 * so an unknown chunk never leaks.
 */
const PNG_KEPT_CHUNKS = new Set([
  'iCCP',
  'sRGB',
  'gAMA',
  'cHRM',
  'cICP',
  'mDCV',
  'cLLI',
  'sBIT',
  'tRNS',
  'bKGD',
  'pHYs',
  'acTL',
  'fcTL',
  'fdAT',
]);

function keepPngChunk(type: string): boolean {
  const critical = type.charCodeAt(0) >= 65 && type.charCodeAt(0) <= 90;
  return critical || PNG_KEPT_CHUNKS.has(type);
}

function stripPng(bytes: Uint8Array): Uint8Array | undefined {
  const keep: [number, number][] = [[0, 8]];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 8;
  while (at + 12 <= bytes.length) {
    const length = view.getUint32(at);
    const type = String.fromCharCode(bytes[at + 4]!, bytes[at + 5]!, bytes[at + 6]!, bytes[at + 7]!);
    const end = at + 12 + length;
    if (end > bytes.length) return undefined;
    if (keepPngChunk(type)) keep.push([at, end]);
    at = end;
    if (type === 'IEND') return concat(bytes, keep);
  }
  return undefined;
}

function concat(bytes: Uint8Array, ranges: [number, number][]): Uint8Array {
  let total = 0;
  for (const [a, b] of ranges) total += b - a;
  const out = Buffer.allocUnsafe(total);
  let at = 0;
  for (const [a, b] of ranges) {
    out.set(bytes.subarray(a, b), at);
    at += b - a;
  }
  return out;
}

/**
 * The input with its EXIF, XMP and IPTC removed losslessly, for JPEG and PNG (the formats whose
 * metadata sits in self-contained segments). Undefined for other formats, or when the file does not
 * parse cleanly. The result may equal the input in size when there was nothing to remove.
 */
export function stripMetadataLossless(bytes: Uint8Array, format: string): Uint8Array | undefined {
  if (format === 'jpeg' && bytes[0] === 0xff && bytes[1] === 0xd8) return stripJpeg(bytes);
  if (format === 'png' && bytes.length > 8) return stripPng(bytes);
  return undefined;
}
