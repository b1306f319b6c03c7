import { ALT_TEXT_MAX, type ImageFacts } from '@compresso/schema';
import { type EngineLimits, withTimeLimit } from './limits.ts';
import { pipelineFailure } from './sharp-errors.ts';
import { openSource } from './source.ts';

/** Sides within this share of each other make a square. */
const SQUARE_TOLERANCE = 0.03;

/**
 * What can be measured on an image without understanding it: its size and orientation, its most
 * common colour, and whether any of it is see-through. Measured on a copy at most 256 px wide,
 * which keeps the cost flat for any input (the dominant colour is a histogram, not a detail).
 */
export async function measureFacts(input: Uint8Array, limits: EngineLimits): Promise<ImageFacts> {
  const source = await openSource(input, limits);
  try {
    const small = source
      .pipeline({ firstFrameOnly: true })
      .autoOrient()
      .resize({ width: 256, height: 256, fit: 'inside', withoutEnlargement: true })
      .toColourspace('srgb');
    const stats = await withTimeLimit(small.stats(), limits.timeoutSeconds);
    const alpha = source.hasAlpha ? stats.channels[stats.channels.length - 1] : undefined;
    const { r, g, b } = stats.dominant;
    const hex = `#${[r, g, b].map((v) => v.toString(16).padStart(2, '0')).join('')}`;
    const { width, height } = source;
    return {
      width,
      height,
      orientation:
        Math.abs(width - height) <= SQUARE_TOLERANCE * Math.max(width, height)
          ? 'square'
          : width > height
            ? 'landscape'
            : 'portrait',
      dominant_color: hex,
      color_name: colorName(r, g, b),
      transparent: alpha !== undefined && alpha.min < 255,
    };
  } catch (error) {
    throw await pipelineFailure(error, source);
  }
}

/** A plain English name for an sRGB colour: a hue family, made light, dark or greyish where it is. */
export function colorName(r: number, g: number, b: number): string {
  const max = Math.max(r, g, b) / 255;
  const min = Math.min(r, g, b) / 255;
  const lightness = (max + min) / 2;
  const chroma = max - min;
  if (chroma < 0.08) {
    if (lightness < 0.12) return 'black';
    if (lightness > 0.92) return 'white';
    return lightness < 0.4 ? 'dark grey' : lightness > 0.7 ? 'light grey' : 'grey';
  }
  let hue: number;
  const rn = r / 255;
  const gn = g / 255;
  const bn = b / 255;
  if (max === rn) hue = (((gn - bn) / chroma) % 6) * 60;
  else if (max === gn) hue = ((bn - rn) / chroma + 2) * 60;
  else hue = ((rn - gn) / chroma + 4) * 60;
  if (hue < 0) hue += 360;
  let family: string;
  if (hue < 15 || hue >= 345) family = 'red';
  else if (hue < 40) family = lightness < 0.45 ? 'brown' : 'orange';
  else if (hue < 70) family = lightness < 0.35 ? 'olive' : 'yellow';
  else if (hue < 165) family = 'green';
  else if (hue < 200) family = 'teal';
  else if (hue < 255) family = 'blue';
  else if (hue < 290) family = 'purple';
  else family = 'pink';
  if (family === 'red' && lightness > 0.7) family = 'pink';
  const muted = chroma < 0.25 && family !== 'brown' && family !== 'olive' ? 'greyish ' : '';
  const shade = lightness < 0.3 ? 'dark ' : lightness > 0.75 ? 'light ' : '';
  return `${shade}${muted}${family}`;
}

export interface AltTextContext {
  product_title?: string | undefined;
  vendor?: string | undefined;
  page_title?: string | undefined;
  /** The upload's file name; used only when it reads as words, not a camera's counter. */
  file_name?: string | undefined;
}

/** "red-running_shoe-02.jpg" → "red running shoe"; undefined for "IMG_2041.JPG", "DSC0001", "image". */
export function wordsOfFileName(name: string | undefined): string | undefined {
  if (!name) return undefined;
  const words = name
    .replace(/^.*[\\/]/, '')
    .replace(/\.[A-Za-z0-9]{1,5}$/, '')
    .split(/[\s_.+-]+/)
    .map((w) => w.replace(/\d+$/, ''))
    .filter(
      (w) =>
        /^[A-Za-z]{2,}$/.test(w) &&
        !/^(img|image|dsc|dscn|dcim|pxl|photo|screenshot|copy|final|edit|scaled|untitled)$/i.test(w),
    );
  return words.length ? words.join(' ').toLowerCase() : undefined;
}

/**
 * Alt text written without seeing the image: what the caller said it is (product, vendor, page or a
 * descriptive file name), then what was measured (orientation, main colour, transparency). It never
 * names content no one observed; with no context at all it says only what was measured.
 */
export function offlineAltText(context: AltTextContext, facts: ImageFacts): { alt: string; basis: string[] } {
  const basis: string[] = [];
  let subject: string | undefined;
  if (context.product_title) {
    subject = context.product_title;
    basis.push('product_title');
    if (context.vendor && !subject.toLowerCase().includes(context.vendor.toLowerCase())) {
      subject = `${subject} by ${context.vendor}`;
      basis.push('vendor');
    }
  } else if (context.page_title) {
    subject = `Image from ${context.page_title}`;
    basis.push('page_title');
  } else {
    const words = wordsOfFileName(context.file_name);
    if (words) {
      subject = words.charAt(0).toUpperCase() + words.slice(1);
      basis.push('file_name');
    }
  }
  const shape =
    facts.orientation === 'square' ? 'Square' : facts.orientation === 'landscape' ? 'Landscape' : 'Portrait';
  const look = [`mostly ${facts.color_name}`];
  basis.push('orientation', 'dominant_color');
  if (facts.transparent) {
    look.push('on a transparent background');
    basis.push('transparent');
  }
  const measured = `${subject ? shape.toLowerCase() : shape} image, ${look.join(', ')}`;
  const alt = subject ? `${subject} — ${measured}` : measured;
  return { alt: alt.length > ALT_TEXT_MAX ? `${alt.slice(0, ALT_TEXT_MAX - 1)}…` : alt, basis };
}
