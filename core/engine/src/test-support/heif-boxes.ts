/** Build HEIF header boxes by hand, to test header parsing on cases the corpus does not have. */

export function box(type: string, ...body: Uint8Array[]): Buffer {
  const size = 8 + body.reduce((n, b) => n + b.length, 0);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(size, 0);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, ...body]);
}

const FULL = new Uint8Array(4); // version 0, flags 0

function u32s(...values: number[]): Buffer {
  const out = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => {
    out.writeUInt32BE(v, i * 4);
  });
  return out;
}

export interface HeifSpec {
  width: number;
  height: number;
  /** irot: quarter turns anticlockwise. */
  rotation?: number;
  /** clap clean aperture, whole pixels. */
  crop?: { width: number; height: number };
  /** Colour box of the primary item: nclx primaries, or an ICC profile. */
  colour?: { primaries: number } | { icc: Uint8Array };
  /** Add an auxiliary item (3) of this aux type, referring to the primary through auxl. */
  auxType?: string;
}

/**
 * ftyp + meta with: pitm → item 2 (the primary), item 1 a thumbnail with its own ispe 64×64 and an
 * ICC profile (a parser that ignores ipma would read those), item 2 with the spec's properties.
 */
export function heifHeader(spec: HeifSpec): Buffer {
  const properties: Buffer[] = [
    box('ispe', FULL, u32s(64, 64)),
    box('colr', Buffer.from('prof', 'latin1'), Buffer.alloc(200, 7)),
    box('ispe', FULL, u32s(spec.width, spec.height)),
  ];
  const primary = [3];
  const add = (b: Buffer, to: number[]) => {
    properties.push(b);
    to.push(properties.length);
  };
  if (spec.crop) add(box('clap', u32s(spec.crop.width, 1, spec.crop.height, 1, 0, 1, 0, 1)), primary);
  if (spec.rotation) add(box('irot', Buffer.from([spec.rotation])), primary);
  if (spec.colour && 'primaries' in spec.colour) {
    const nclx = Buffer.alloc(11);
    nclx.write('nclx', 0, 'latin1');
    nclx.writeUInt16BE(spec.colour.primaries, 4);
    nclx.writeUInt16BE(13, 6); // sRGB transfer curve, as iPhones declare
    nclx.writeUInt16BE(6, 8);
    add(box('colr', nclx), primary);
  } else if (spec.colour) {
    add(box('colr', Buffer.from('prof', 'latin1'), spec.colour.icc), primary);
  }
  const aux: number[] = [];
  if (spec.auxType) {
    add(box('ispe', FULL, u32s(spec.width, spec.height)), aux);
    add(box('auxC', FULL, Buffer.from(`${spec.auxType}\0`, 'latin1')), aux);
  }
  const entries: [number, number[]][] = [
    [1, [1, 2]],
    [2, primary],
  ];
  if (spec.auxType) entries.push([3, aux]);
  const ipma = Buffer.concat([
    FULL,
    u32s(entries.length),
    ...entries.map(([id, list]) =>
      Buffer.from([id >> 8, id & 255, list.length, ...list.map((i) => 0x80 | i)]),
    ),
  ]);
  const children = [
    box('pitm', FULL, Buffer.from([0, 2])),
    box('iprp', box('ipco', ...properties), box('ipma', ipma)),
  ];
  if (spec.auxType) children.push(box('iref', FULL, box('auxl', Buffer.from([0, 3, 0, 1, 0, 2]))));
  return Buffer.concat([
    box('ftyp', Buffer.from('heic\0\0\0\0mif1heic', 'latin1')),
    box('meta', FULL, ...children),
  ]);
}

/**
 * A real HEIC with an `nclx` colour box added to its primary item — what iPhones write for Display P3
 * (primaries 12, sRGB transfer). Debian's heif-enc 1.15 drops the nclx options, so the box is spliced
 * in here: ipco gains the box, ipma associates it, and every iloc offset moves by the bytes added
 * before the image data. Handles the layout heif-enc writes (iloc v0/v1, 4-byte offsets, no base).
 */
export function withNclx(heic: Uint8Array, primaries: number): Buffer {
  const file = Buffer.from(heic);
  const top = children(file, 0, file.length);
  const meta = top.find((b) => b.type === 'meta');
  if (!meta) throw new Error('no meta box');
  const parts = children(file, meta.start + 12, meta.end);
  const pitm = parts.find((b) => b.type === 'pitm')!;
  const primary = file.readUInt16BE(pitm.start + 12);
  const rebuilt = parts.map((part) => {
    if (part.type !== 'iprp') return file.subarray(part.start, part.end);
    const [ipco, ipma] = children(file, part.start + 8, part.end);
    if (ipco?.type !== 'ipco' || ipma?.type !== 'ipma') throw new Error('unexpected iprp layout');
    const index = children(file, ipco.start + 8, ipco.end).length + 1;
    const nclx = Buffer.alloc(11);
    nclx.write('nclx', 0, 'latin1');
    nclx.writeUInt16BE(primaries, 4);
    nclx.writeUInt16BE(13, 6);
    nclx.writeUInt16BE(6, 8);
    nclx[10] = 0x80; // full range
    const newIpco = box('ipco', file.subarray(ipco.start + 8, ipco.end), box('colr', nclx));
    const body = file.subarray(ipma.start + 8, ipma.end);
    if (body[0] !== 0 || (body[3]! & 1) !== 0) throw new Error('ipma v0 with 8-bit indices expected');
    const out: number[] = [...body.subarray(0, 8)];
    let at = 8;
    for (let i = 0; i < body.readUInt32BE(4); i++) {
      const id = body.readUInt16BE(at);
      const n = body[at + 2]!;
      const list = [...body.subarray(at + 3, at + 3 + n)];
      if (id === primary) list.push(index);
      out.push(id >> 8, id & 255, list.length, ...list);
      at += 3 + n;
    }
    return box('iprp', newIpco, box('ipma', Buffer.from(out)));
  });
  const grown = rebuilt.reduce((n, b) => n + b.length, 0) - (meta.end - meta.start - 12);
  for (const [i, part] of parts.entries()) {
    if (part.type === 'iloc') rebuilt[i] = shiftIloc(Buffer.from(rebuilt[i]!), grown);
  }
  const newMeta = box('meta', file.subarray(meta.start + 8, meta.start + 12), ...rebuilt);
  return Buffer.concat([file.subarray(0, meta.start), newMeta, file.subarray(meta.end)]);
}

function children(file: Buffer, start: number, end: number): { type: string; start: number; end: number }[] {
  const found = [];
  for (let at = start; at + 8 <= end; ) {
    const size = file.readUInt32BE(at) || end - at;
    found.push({ type: file.toString('latin1', at + 4, at + 8), start: at, end: at + size });
    at += size;
  }
  return found;
}

function shiftIloc(iloc: Buffer, delta: number): Buffer {
  const version = iloc[8]!;
  const offsetSize = iloc[12]! >> 4;
  const lengthSize = iloc[12]! & 15;
  const baseSize = iloc[13]! >> 4;
  if (version > 1 || offsetSize !== 4 || (baseSize !== 0 && baseSize !== 4))
    throw new Error('unexpected iloc layout');
  const indexSize = version === 1 ? iloc[13]! & 15 : 0;
  let at = 16;
  const count = iloc.readUInt16BE(14);
  for (let i = 0; i < count; i++) {
    at += 2; // item ID
    const method = version === 1 ? iloc.readUInt16BE(at) & 15 : 0;
    if (version === 1) at += 2;
    at += 2; // data reference index
    // Offsets are base + extent offset: move the base when there is one, else each extent.
    const base = baseSize ? iloc.readUInt32BE(at) : 0;
    if (base && method === 0) iloc.writeUInt32BE(base + delta, at);
    at += baseSize;
    const extents = iloc.readUInt16BE(at);
    at += 2;
    for (let x = 0; x < extents; x++) {
      at += indexSize;
      if (!base && method === 0) iloc.writeUInt32BE(iloc.readUInt32BE(at) + delta, at);
      at += offsetSize + lengthSize;
    }
  }
  return iloc;
}
