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
