import sharp from 'sharp';

/**
 * The colour space of a HEIF's primary image, from its `colr` property. libheif hands back the coded
 * RGB numbers untouched, so without this an Adobe RGB or Display P3 photo (what iPhones write) would be
 * read as sRGB and come out desaturated.
 */
export interface HeicColour {
  /** An embedded ICC profile (`colr` of type `prof` or `rICC`). */
  icc?: Uint8Array;
  /** CICP colour primaries of an `nclx` colour box (1 = sRGB/BT.709, 12 = Display P3, 9 = BT.2020). */
  primaries?: number;
}

function u32(bytes: Uint8Array, at: number): number {
  return ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0;
}

function u16(bytes: Uint8Array, at: number): number {
  return (bytes[at]! << 8) | bytes[at + 1]!;
}

interface Box {
  type: string;
  body: number;
  end: number;
}

/** The ISO-BMFF boxes directly inside [start, end); stops quietly at the first box that does not fit. */
function boxes(bytes: Uint8Array, start: number, end: number): Box[] {
  const found: Box[] = [];
  let at = start;
  while (at + 8 <= end) {
    let size = u32(bytes, at);
    let body = at + 8;
    if (size === 1) {
      if (at + 16 > end || u32(bytes, at + 8) !== 0) break;
      size = u32(bytes, at + 12);
      body = at + 16;
    } else if (size === 0) size = end - at;
    if (size < body - at || at + size > end) break;
    found.push({ type: String.fromCharCode(...bytes.subarray(at + 4, at + 8)), body, end: at + size });
    at += size;
  }
  return found;
}

/** The first child box of `type` inside `parent`; `full` when `parent` is a full box (version + flags). */
function child(bytes: Uint8Array, parent: Box | undefined, type: string, full = false): Box | undefined {
  if (!parent) return undefined;
  return boxes(bytes, parent.body + (full ? 4 : 0), parent.end).find((b) => b.type === type);
}

/**
 * Read the `colr` property associated with the primary item (`pitm` → `ipma` → `ipco`). Only header
 * boxes are read (a few KB), never image data. Returns {} when the file declares no colour, which HEIF
 * defines as sRGB.
 */
export function heicColour(bytes: Uint8Array): HeicColour {
  const meta = child(bytes, { type: '', body: 0, end: bytes.length }, 'meta');
  const iprp = child(bytes, meta, 'iprp', true);
  const ipco = child(bytes, iprp, 'ipco');
  if (!meta || !iprp || !ipco) return {};
  const properties = boxes(bytes, ipco.body, ipco.end);
  let candidates = properties.filter((p) => p.type === 'colr');
  const pitm = child(bytes, meta, 'pitm', true);
  if (pitm) {
    const primary = bytes[pitm.body] === 0 ? u16(bytes, pitm.body + 4) : u32(bytes, pitm.body + 4);
    const associated = associatedProperties(bytes, iprp, primary);
    // Thumbnails and tiles may carry their own colr; the primary image's is the one that counts.
    if (associated) {
      candidates = associated
        .map((index) => properties[index - 1])
        .filter((p): p is Box => p?.type === 'colr');
    }
  }
  const colour: HeicColour = {};
  for (const colr of candidates) {
    if (colr.body + 4 > colr.end) continue;
    const kind = String.fromCharCode(...bytes.subarray(colr.body, colr.body + 4));
    // 128 bytes is an ICC header alone: anything shorter is not a profile lcms could use.
    if ((kind === 'prof' || kind === 'rICC') && !colour.icc && colr.end - colr.body >= 4 + 128) {
      colour.icc = bytes.subarray(colr.body + 4, colr.end);
    } else if (kind === 'nclx' && colour.primaries === undefined && colr.body + 6 <= colr.end) {
      colour.primaries = u16(bytes, colr.body + 4);
    }
  }
  return colour;
}

/** 1-based indices into ipco of the properties `ipma` associates with `item`; undefined if not listed. */
function associatedProperties(bytes: Uint8Array, iprp: Box, item: number): number[] | undefined {
  for (const ipma of boxes(bytes, iprp.body, iprp.end).filter((b) => b.type === 'ipma')) {
    const version = bytes[ipma.body]!;
    const wideIndex = (bytes[ipma.body + 3]! & 1) === 1;
    let at = ipma.body + 4;
    const count = u32(bytes, at);
    at += 4;
    for (let i = 0; i < count && at < ipma.end; i++) {
      const id = version < 1 ? u16(bytes, at) : u32(bytes, at);
      at += version < 1 ? 2 : 4;
      const n = bytes[at]!;
      at += 1;
      const indices: number[] = [];
      for (let k = 0; k < n; k++) {
        indices.push(wideIndex ? u16(bytes, at) & 0x7fff : bytes[at]! & 0x7f);
        at += wideIndex ? 2 : 1;
      }
      if (id === item) return indices;
    }
  }
  return undefined;
}

let displayP3: Promise<Uint8Array> | undefined;

/** sharp's own Display P3 profile, as bytes (libvips ships it; we ship no profile files). */
function displayP3Profile(): Promise<Uint8Array> {
  displayP3 ??= sharp({ create: { width: 1, height: 1, channels: 3, background: '#808080' } })
    .withIccProfile('p3')
    .png()
    .toBuffer()
    .then((png) => sharp(png).metadata())
    .then((m) => {
      if (!m.icc) throw new Error('sharp wrote no Display P3 profile');
      return new Uint8Array(m.icc);
    });
  return displayP3;
}

/**
 * The ICC profile the decoded pixels must be read through, or undefined when they are sRGB already.
 * An nclx box naming Display P3 primaries gets sharp's P3 profile (P3 uses the sRGB transfer curve,
 * which is what iPhones declare). Other nclx spaces (BT.2020, HDR transfer curves) have no built-in
 * profile in libvips; they are read as sRGB, which keeps them viewable but not exact.
 */
export async function heicInputProfile(bytes: Uint8Array): Promise<Uint8Array | undefined> {
  const colour = heicColour(bytes);
  if (colour.icc) return colour.icc;
  if (colour.primaries === 12) return displayP3Profile();
  return undefined;
}
