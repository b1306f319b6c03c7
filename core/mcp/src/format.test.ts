import { formatBytes as cliFormatBytes } from '@compresso/cli';
import { describe, expect, it } from 'vitest';
import { formatBytes } from './format.ts';

describe('formatBytes', () => {
  it('prints sizes in 1000-based kB/MB/GB as the CLI does', () => {
    // Sizes of corpus files (graphic-skimage-logo.png, photo-skimage-rocket.jpg, photo-mate-Dune.jpg).
    expect(formatBytes(179_723)).toBe('179.7 kB');
    expect(formatBytes(112_525)).toBe('112.5 kB');
    expect(formatBytes(1_021_283)).toBe('1.0 MB');
    expect(formatBytes(999)).toBe('999 B');
    expect(formatBytes(1000)).toBe('1.0 kB');
    expect(formatBytes(2_500_000_000)).toBe('2.5 GB');
  });

  it('gives the CLI’s text for every size, across each unit boundary', () => {
    const sizes = [0, 1, 999, 1000, 1023, 1024, 1049, 99_949, 99_950, 999_949, 999_950, 999_999];
    for (let power = 6; power <= 15; power++) sizes.push(10 ** power - 1, 10 ** power, 1.5 * 10 ** power);
    for (const size of sizes) expect(formatBytes(size), String(size)).toBe(cliFormatBytes(size));
  });
});
