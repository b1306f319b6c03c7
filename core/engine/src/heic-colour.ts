import sharp from 'sharp';

import { heicColour } from './heic-header.ts';

export { type HeicColour, heicColour } from './heic-header.ts';

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
  // A copy: a view would carry the whole file's buffer along wherever the profile is posted.
  if (colour.icc) return colour.icc.slice();
  if (colour.primaries === 12) return displayP3Profile();
  return undefined;
}
