/**
 * Bytes for people, in the convention the `compresso` CLI prints (core/cli/src/report.ts): powers of
 * 1000 spelled kB, MB, GB, TB, one decimal. An assistant relaying "179.7 kB" should quote the figure
 * the user sees from the CLI for the same file, not a 1024-based "175.5 KB". The CLI's function cannot
 * be imported here (this package depends on the client and schema only); format.test.ts holds the two
 * to the same output.
 */
export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let value = bytes / 1000;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}
