/**
 * Wrap 8-bit RGBA pixels and an ICC profile in a minimal uncompressed TIFF.
 *
 * Why: sharp's raw input cannot be told which colour space its numbers are in (it assumes sRGB), and
 * `withIccProfile` converts rather than assigns. A TIFF carrying the profile (tag 34675) is read by
 * libvips like any other tagged input, so the engine converts it to sRGB on output exactly as it does
 * for a P3 JPEG. Uncompressed keeps it a single copy of the pixels, written in the HEIC worker.
 */
export function rgbaTiff(width: number, height: number, rgba: Uint8Array, icc: Uint8Array): Uint8Array {
  const pixelBytes = width * height * 4;
  if (rgba.length !== pixelBytes)
    throw new RangeError(`expected ${pixelBytes} bytes of RGBA, got ${rgba.length}`);
  const SHORT = 3;
  const LONG = 4;
  const UNDEFINED = 7;
  const entries = 12;
  const ifd = 8;
  const ifdSize = 2 + entries * 12 + 4;
  const bitsAt = ifd + ifdSize;
  const iccAt = bitsAt + 8;
  // Word-aligned pixels: some readers map strips directly.
  const pixelsAt = (iccAt + icc.length + 3) & ~3;
  const out = new Uint8Array(pixelsAt + pixelBytes);
  const view = new DataView(out.buffer);
  out.set([0x49, 0x49, 42, 0]); // "II", 42: little-endian TIFF
  view.setUint32(4, ifd, true);
  view.setUint16(ifd, entries, true);
  let at = ifd + 2;
  const entry = (tag: number, type: number, count: number, value: number) => {
    view.setUint16(at, tag, true);
    view.setUint16(at + 2, type, true);
    view.setUint32(at + 4, count, true);
    // A single SHORT sits in the first two bytes of the value field; everything else is a LONG.
    if (type === SHORT && count === 1) view.setUint16(at + 8, value, true);
    else view.setUint32(at + 8, value, true);
    at += 12;
  };
  // Tags in ascending order, as TIFF requires.
  entry(256, LONG, 1, width);
  entry(257, LONG, 1, height);
  entry(258, SHORT, 4, bitsAt); // BitsPerSample 8,8,8,8 (stored out of line: 4 SHORTs > 4 bytes)
  entry(259, SHORT, 1, 1); // no compression
  entry(262, SHORT, 1, 2); // RGB
  entry(273, LONG, 1, pixelsAt); // one strip
  entry(277, SHORT, 1, 4); // samples per pixel
  entry(278, LONG, 1, height); // rows per strip
  entry(279, LONG, 1, pixelBytes);
  entry(284, SHORT, 1, 1); // chunky (RGBARGBA…)
  entry(338, SHORT, 1, 2); // extra sample = unassociated alpha
  entry(34675, UNDEFINED, icc.length, iccAt); // ICC profile
  view.setUint32(at, 0, true); // no further IFD
  for (let i = 0; i < 4; i++) view.setUint16(bitsAt + i * 2, 8, true);
  out.set(icc, iccAt);
  out.set(rgba, pixelsAt);
  return out;
}
