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
