import sharp from 'sharp';

export interface FixtureImage {
  bytes: Uint8Array;
  filename: string;
  contentType: string;
}

/**
 * A real image made with sharp: smooth gradients with a deterministic grain, so an encoder has
 * something to save on (a high-quality JPEG, an unquantised PNG) — or, with `small`, one already
 * written tightly that a recompression cannot shrink by much.
 */
export async function fixtureImage(
  seed: number,
  kind: 'jpeg' | 'png' | 'small-jpeg' = 'jpeg',
  size = 160,
): Promise<FixtureImage> {
  const pixels = Buffer.alloc(size * size * 3);
  let state = seed * 2654435761;
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      state = (state * 1103515245 + 12345) >>> 0;
      const grain = (state >>> 24) % 24;
      const i = (y * size + x) * 3;
      pixels[i] = (x * 255) / size + grain;
      pixels[i + 1] = (y * 255) / size + ((seed * 37) % 64);
      pixels[i + 2] = ((x + y + seed * 13) % size) + grain;
    }
  }
  const image = sharp(pixels, { raw: { width: size, height: size, channels: 3 } });
  if (kind === 'png') {
    const bytes = await image.png({ compressionLevel: 1 }).toBuffer();
    return { bytes: new Uint8Array(bytes), filename: `image-${seed}.png`, contentType: 'image/png' };
  }
  const bytes = await image
    .jpeg({ quality: kind === 'small-jpeg' ? 40 : 97, mozjpeg: kind === 'small-jpeg' })
    .toBuffer();
  return { bytes: new Uint8Array(bytes), filename: `image-${seed}.jpg`, contentType: 'image/jpeg' };
}
