import type { ImageInspection } from '@compresso/schema';
import { exifHasGps } from './exif.ts';
import type { EngineLimits } from './limits.ts';
import { openSource } from './source.ts';

/** What an image is — format, size, dimensions, alpha, animation, orientation, colour, metadata. */
export async function inspectImage(bytes: Uint8Array, limits: EngineLimits): Promise<ImageInspection> {
  const source = await openSource(bytes, limits);
  const m = source.metadata;
  const exif = m?.exif ?? source.heic?.exif;
  return {
    format: source.format,
    size: bytes.length,
    width: source.width,
    height: source.height,
    has_alpha: source.hasAlpha,
    animated: source.frames > 1,
    frames: source.frames,
    orientation: source.orientation,
    color_space: m?.space ?? 'srgb',
    icc_profile: Boolean(m?.icc),
    metadata: {
      exif: Boolean(exif),
      xmp: Boolean(m?.xmp) || Boolean(source.heic?.xmp),
      iptc: Boolean(m?.iptc),
      gps: exifHasGps(exif),
    },
  };
}
