import { parseAspectRatio } from '@compresso/schema';

/**
 * The supported ratio nearest to the one asked for, by distance of the logarithms (so 2:1 and 1:2 are
 * equally far from 1:1, as they look). Ties go to the earlier entry of `supported`.
 */
export function nearestAspectRatio(requested: string, supported: readonly string[]): string {
  const want = ratioOf(requested);
  let best = supported[0]!;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of supported) {
    const distance = Math.abs(Math.log(ratioOf(candidate)) - Math.log(want));
    if (distance < bestDistance - 1e-9) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function ratioOf(text: string): number {
  const parsed = parseAspectRatio(text);
  if (!parsed) throw new Error(`not an aspect ratio: ${text}`);
  return parsed.width / parsed.height;
}

/** Two ratios that describe the same shape (3:2 and 6:4). */
export function sameRatio(a: string, b: string): boolean {
  return Math.abs(ratioOf(a) - ratioOf(b)) < 1e-9;
}
