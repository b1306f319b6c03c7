import { type Box, boxes, child, fileBox, u16, u32 } from './isobmff.ts';

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

/** What a HEIF's header says about its primary image, read without decoding a pixel. */
export interface HeicHeader {
  /** Displayed size: the primary item's `ispe`, cropped by `clap`, swapped by a quarter-turn `irot`. */
  width: number;
  height: number;
  /** Quarter turns anticlockwise libheif applies when decoding (`irot`), 0–3. */
  rotation: number;
  /** The primary image has an alpha plane (an auxiliary image of alpha type). */
  hasAlpha: boolean;
  colour: HeicColour;
}

/**
 * Real files list tens of items (an iPhone grid: ~50 tiles, a thumbnail, EXIF, depth and gain maps).
 * The cap keeps a hostile `ipma` or `iref` of millions of entries from holding the event loop or
 * filling memory with a map nobody needs.
 */
const MAX_ITEMS = 10_000;

const ALPHA_AUX_TYPES = new Set([
  'urn:mpeg:hevc:2015:auxid:1',
  'urn:mpeg:mpegB:cicp:systems:auxiliary:alpha',
]);

function itemId(bytes: Uint8Array, at: number, wide: boolean): number {
  return wide ? u32(bytes, at) : u16(bytes, at);
}

/** item ID → 1-based indices into ipco of the properties `ipma` associates with it. */
function associations(bytes: Uint8Array, iprp: Box): Map<number, number[]> {
  const map = new Map<number, number[]>();
  for (const ipma of boxes(bytes, iprp.body, iprp.end).filter((b) => b.type === 'ipma')) {
    const version = bytes[ipma.body]!;
    const wideIndex = (bytes[ipma.body + 3]! & 1) === 1;
    let at = ipma.body + 4;
    const count = Math.min(u32(bytes, at), MAX_ITEMS - map.size);
    at += 4;
    for (let i = 0; i < count && at + 3 <= ipma.end; i++) {
      const id = itemId(bytes, at, version >= 1);
      at += version >= 1 ? 4 : 2;
      const n = bytes[at]!;
      at += 1;
      const indices: number[] = [];
      for (let k = 0; k < n && at < ipma.end; k++) {
        indices.push(wideIndex ? u16(bytes, at) & 0x7fff : bytes[at]! & 0x7f);
        at += wideIndex ? 2 : 1;
      }
      map.set(id, indices);
    }
  }
  return map;
}

/** Items that reference `target` through an `auxl` (auxiliary image) reference. */
function auxiliaryOf(bytes: Uint8Array, meta: Box, target: number): number[] {
  const iref = child(bytes, meta, 'iref', true);
  if (!iref) return [];
  const wide = bytes[iref.body]! >= 1;
  const found: number[] = [];
  let seen = 0;
  for (const ref of boxes(bytes, iref.body + 4, iref.end)) {
    if (ref.type !== 'auxl') continue;
    const size = wide ? 4 : 2;
    const from = itemId(bytes, ref.body, wide);
    const count = u16(bytes, ref.body + size);
    for (let i = 0; i < count && seen < MAX_ITEMS; i++, seen++) {
      const at = ref.body + size + 2 + i * size;
      if (at + size > ref.end) break;
      if (itemId(bytes, at, wide) === target) found.push(from);
    }
  }
  return found;
}

function text(bytes: Uint8Array, start: number, end: number): string {
  const zero = bytes.indexOf(0, start);
  return String.fromCharCode(...bytes.subarray(start, zero < 0 || zero > end ? end : zero));
}

function colourOf(bytes: Uint8Array, colrs: Box[]): HeicColour {
  const colour: HeicColour = {};
  for (const colr of colrs) {
    if (colr.body + 4 > colr.end) continue;
    const kind = text(bytes, colr.body, colr.body + 4);
    // 128 bytes is an ICC header alone: anything shorter is not a profile lcms could use.
    if ((kind === 'prof' || kind === 'rICC') && !colour.icc && colr.end - colr.body >= 4 + 128) {
      colour.icc = bytes.subarray(colr.body + 4, colr.end);
    } else if (kind === 'nclx' && colour.primaries === undefined && colr.body + 6 <= colr.end) {
      colour.primaries = u16(bytes, colr.body + 4);
    }
  }
  return colour;
}

interface Primary {
  meta: Box;
  id: number;
  own: Box[];
  propertiesOf(item: number): Box[];
}

/** The primary item (`pitm`) and the properties `ipma` associates with it in `ipco`. */
function primaryItem(bytes: Uint8Array): Primary | undefined {
  const meta = child(bytes, fileBox(bytes), 'meta');
  const pitm = child(bytes, meta, 'pitm', true);
  const iprp = child(bytes, meta, 'iprp', true);
  const ipco = child(bytes, iprp, 'ipco');
  if (!meta || !pitm || !iprp || !ipco) return undefined;
  const properties = boxes(bytes, ipco.body, ipco.end);
  const byItem = associations(bytes, iprp);
  const propertiesOf = (item: number): Box[] =>
    (byItem.get(item) ?? []).map((index) => properties[index - 1]).filter((p): p is Box => p !== undefined);
  const id = itemId(bytes, pitm.body + 4, bytes[pitm.body]! >= 1);
  return { meta, id, own: propertiesOf(id), propertiesOf };
}

/**
 * The colour of a HEIF's primary image (its `colr`; a thumbnail's does not count). {} when it declares
 * none, which HEIF defines as sRGB.
 */
export function heicColour(bytes: Uint8Array): HeicColour {
  const primary = primaryItem(bytes);
  return primary
    ? colourOf(
        bytes,
        primary.own.filter((p) => p.type === 'colr'),
      )
    : {};
}

/**
 * What the header says about the primary image: size, crop, rotation, colour, and whether an alpha
 * plane refers to it. Only header boxes are read (a few KB), never image data; undefined when the
 * header lacks a size (the decoder then has the last word).
 */
export function heicHeader(bytes: Uint8Array): HeicHeader | undefined {
  const primary = primaryItem(bytes);
  const ispe = primary?.own.find((p) => p.type === 'ispe');
  if (!primary || !ispe || ispe.body + 12 > ispe.end) return undefined;
  let width = u32(bytes, ispe.body + 4);
  let height = u32(bytes, ispe.body + 8);
  const clap = primary.own.find((p) => p.type === 'clap');
  if (clap && clap.body + 16 <= clap.end) {
    const [wn, wd, hn, hd] = [0, 4, 8, 12].map((o) => u32(bytes, clap.body + o)) as [
      number,
      number,
      number,
      number,
    ];
    if (wd > 0 && hd > 0) {
      width = Math.min(width, Math.round(wn / wd));
      height = Math.min(height, Math.round(hn / hd));
    }
  }
  const irot = primary.own.find((p) => p.type === 'irot');
  const rotation = irot && irot.body < irot.end ? bytes[irot.body]! & 3 : 0;
  if (rotation % 2 === 1) [width, height] = [height, width];
  const hasAlpha = auxiliaryOf(bytes, primary.meta, primary.id).some((aux) =>
    primary
      .propertiesOf(aux)
      .some((p) => p.type === 'auxC' && ALPHA_AUX_TYPES.has(text(bytes, p.body + 4, p.end))),
  );
  return { width, height, rotation, hasAlpha, colour: heicColour(bytes) };
}
