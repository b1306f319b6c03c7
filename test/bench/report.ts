export type Mode = 'default' | 'auto' | 'search';

/** Quality "auto" against the fixed quality that reaches the same worst case (worst-case.ts). */
export interface AutoVsFixed {
  kind: string;
  format: string;
  floor: number;
  images: number;
  /** Smallest fixed Q at which every image of the kind reaches the floor; null if none does. */
  worstCaseQ: number | null;
  worstCaseBytes: number | null;
  hardest: string;
  autoBytes: number;
  autoVsWorstCasePercent: number | null;
  autoMeanScore: number | null;
  autoMinScore: number | null;
  autoImagesPerSecond: number;
  fixedImagesPerSecond: number;
  /** Fixed-default images/s ÷ auto's: what one auto image costs in fixed encodes. */
  autoCost: number;
  /**
   * Auto's CPU time per image ÷ the fixed default's (whole process: main, libvips and metric
   * threads). What a saturated server pays per image; free of the idle core at the end of a small
   * batch that the images/s ratio counts (run.ts Batch.cpuSeconds).
   */
  autoCpuCost?: number;
  /**
   * Share of auto's batch time, in percent, during which an image waited for the engine's memory
   * budget while a core had no image (run.ts Batch.memoryHeld).
   */
  autoMemoryHeldPercent?: number;
  /** Mean candidate encodes scored per image (load-independent cost). */
  autoSteps: number | null;
  /** --search: the pre-issue-11 bisection on the same images. */
  searchBytes?: number;
  searchMeanScore?: number | null;
  searchMinScore?: number | null;
  searchImagesPerSecond?: number;
  searchCost?: number;
  searchCpuCost?: number;
  searchSteps?: number | null;
  autoVsSearchPercent?: number | null;
}

/** One line of results: one encoder, one format, one quality mode, one kind (or all kinds). */
export interface Row {
  kind: string;
  format: string;
  mode: Mode;
  /** engine | sharp (raw sharp, same settings) | a reference tool's name. */
  encoder: string;
  /** Distinct images measured. */
  images: number;
  /** Encodes timed (small kinds repeat images so every slot stays busy). */
  jobs: number;
  seconds: number;
  imagesPerSecond: number;
  inputBytes: number;
  outputBytes: number;
  /** 1 − output/input over the original files (resize included), in percent. */
  savedPercent: number;
  meanScore: number | null;
  minScore: number | null;
  scored: number;
  /** Mean Compresso quality used (the chosen one for "auto"). */
  meanQuality: number | null;
  peakRssMiB: number | null;
  errors: string[];
  identicalToEngine?: number;
  /** Reference tools: total bytes relative to the engine's for the same images, in percent. */
  bytesVsEnginePercent?: number;
  rawImagesPerSecond?: number;
  engineOverRaw?: number;
}

export interface BenchResult {
  benchmark: 'compresso';
  version: 1;
  date: string;
  durationSeconds: number;
  timedSeconds: number;
  machine: Record<string, unknown>;
  settings: {
    quick: boolean;
    /** Images per kind at most; null when every image was measured. */
    perKind: number | null;
    corpusImages: number;
    corpus: string;
    kinds: string[];
    formats: string[];
    modes: Mode[];
    maxDimension: number;
    concurrency: number;
    defaultQuality: number;
    avifEffort: number;
    webpEffort: number;
    minJobsPerBatch: number;
    /** Absent in results written before 2026-11-28 (their batches ran once: 0). */
    minBatchSeconds?: number;
    /** The engine's memory budget; absent before 2026-11-28 (always the default, 256 MiB). */
    memoryBudgetMiB?: number;
    repeat: number;
    /** Passes of quality "auto" (best counts): absent before 2026-12-01, when auto ran one pass. */
    autoRepeat?: number;
    images: string[];
  };
  metric: { name: string; scored: boolean; note: string; seconds: number };
  memory: { processMaxRssMiB: number };
  avifAtMaxDimension: Row | null;
  referenceTools: { name: string; format: string; version: string; settings: string }[];
  rows: Row[];
  autoVsFixed?: AutoVsFixed[];
  notes: string[];
}

function n(value: number | null | undefined, digits = 1): string {
  return value === null || value === undefined ? '—' : value.toFixed(digits);
}

function qualityLabel(row: Row, defaultQuality: number): string {
  if (row.mode === 'auto') return `auto (≈${n(row.meanQuality, 0)})`;
  if (row.mode === 'search') return `search (≈${n(row.meanQuality, 0)})`;
  return String(defaultQuality);
}

function score(row: Row): string {
  if (row.meanScore === null) return '—';
  return `${n(row.meanScore)} (min ${n(row.minScore)})`;
}

function versus(row: Row): string {
  if (row.bytesVsEnginePercent === undefined) return '';
  return `${row.bytesVsEnginePercent > 0 ? '+' : ''}${n(row.bytesVsEnginePercent)} %`;
}

const ENCODER_ORDER = ['engine', 'sharp'];
function encoderRank(encoder: string): number {
  const i = ENCODER_ORDER.indexOf(encoder);
  return i === -1 ? ENCODER_ORDER.length : i;
}

const COLUMNS: [title: string, align: 'left' | 'right'][] = [
  ['format', 'left'],
  ['quality', 'left'],
  ['encoder', 'left'],
  ['img/s', 'right'],
  ['raw sharp img/s', 'right'],
  ['engine ÷ raw', 'right'],
  ['saved', 'right'],
  ['bytes vs engine', 'right'],
  ['SSIMULACRA2 mean (min)', 'right'],
  ['peak RSS MiB', 'right'],
];

/** Padded the way biome formats Markdown tables, so a committed report passes `biome check`. */
function aligned(cells: string[][]): string[] {
  const widths = COLUMNS.map(([title], i) => Math.max(title.length, ...cells.map((row) => row[i]!.length)));
  const pad = (text: string, i: number) =>
    COLUMNS[i]![1] === 'right' ? text.padStart(widths[i]!) : text.padEnd(widths[i]!);
  const line = (row: string[]) => `| ${row.map(pad).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (COLUMNS[i]![1] === 'right' ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w))).join(' | ')} |`;
  return [line(COLUMNS.map(([title]) => title)), rule, ...cells.map(line)];
}

function table(rows: Row[], defaultQuality: number): string[] {
  const sorted = [...rows]
    .filter((r) => r.encoder !== 'sharp')
    .sort(
      (a, b) =>
        a.format.localeCompare(b.format) ||
        a.mode.localeCompare(b.mode) ||
        encoderRank(a.encoder) - encoderRank(b.encoder),
    );
  return aligned(
    sorted.map((r) => {
      const engine = r.encoder === 'engine';
      return [
        r.format,
        qualityLabel(r, defaultQuality),
        r.encoder,
        n(r.imagesPerSecond, 2),
        engine ? n(r.rawImagesPerSecond, 2) : '',
        engine ? n(r.engineOverRaw, 2) : '',
        `${n(r.savedPercent)} %`,
        versus(r),
        score(r),
        engine ? n(r.peakRssMiB, 0) : '',
      ];
    }),
  );
}

/** The report as Markdown, ready to paste into the README. */
export function markdown(result: BenchResult): string {
  const { settings, machine } = result;
  const out: string[] = [];
  out.push(`## Compresso benchmark — ${result.date.slice(0, 10)}`);
  out.push('');
  out.push(
    `${machine['cpuModel']}, ${machine['cores']} cores, ${machine['memoryGiB']} GiB; Node ${machine['node']}, sharp ${machine['sharp']} (libvips ${machine['libvips']}, ${machine['libvipsThreadsPerImage']} libvips thread(s) per image, MALLOC_ARENA_MAX=${machine['mallocArenaMax'] ?? 'unset'}). ` +
      `Load average at start/end: ${(machine['loadAverageAtStart'] as number[])[0]} / ${(machine['loadAverageAtEnd'] as number[])[0]} (other processes share the machine).`,
  );
  out.push('');
  out.push(
    `${settings.images.length} of the corpus's ${settings.corpusImages} images${settings.quick ? ' (--quick)' : settings.perKind ? ` (at most ${settings.perKind} per kind; --all for every one)` : ''}, resized to fit ${settings.maxDimension}×${settings.maxDimension} (never enlarged), ` +
      `${settings.concurrency} images in flight for the engine, raw sharp and the reference tools alike; ` +
      `engine and raw sharp speeds are the best of ${settings.repeat} alternating pass(es)` +
      (settings.modes.includes('auto')
        ? ` (quality "auto" ${settings.autoRepeat === undefined ? 'one pass' : `the best of ${settings.autoRepeat}`}${settings.modes.includes('search') ? ', "search" one pass' : ''})`
        : '') +
      (settings.minBatchSeconds
        ? `, each repeating its batch for at least ${settings.minBatchSeconds} s (the mean round counts). `
        : '. ') +
      `Default quality ${settings.defaultQuality}; AVIF effort ${settings.avifEffort}, WebP effort ${settings.webpEffort}. ` +
      `Score: ${result.metric.scored ? 'SSIMULACRA2 of each output against the resized source (90 visually lossless, 80 very high, 70 high)' : `none (${result.metric.note})`}. ` +
      `Run took ${result.durationSeconds} s (${result.timedSeconds} s timed).`,
  );
  const kinds = [...settings.kinds, 'all'];
  for (const kind of kinds) {
    const rows = result.rows.filter((r) => r.kind === kind);
    if (!rows.length) continue;
    const count = Math.max(...rows.map((r) => r.images));
    out.push('');
    out.push(`### ${kind === 'all' ? 'All kinds' : kind} (${count} image${count === 1 ? '' : 's'})`);
    out.push('');
    out.push(...table(rows, settings.defaultQuality));
  }
  if (result.autoVsFixed?.length) {
    const withSearch = result.autoVsFixed.some((r) => r.searchBytes !== undefined);
    out.push('');
    out.push(
      `### Auto against the fixed quality with the same worst case (floor ${result.autoVsFixed[0]!.floor})`,
    );
    out.push('');
    out.push(
      `Fixed Q: the smallest Compresso quality at which every image of the kind scores at least the floor (none: some image misses it even at 100). Auto cost: images/s at the fixed default ÷ images/s with auto (one auto image costs that many fixed encodes). CPU cost: CPU time per image with auto ÷ at the fixed default (the whole process); it leaves out a core left idle, at the end of a small batch while the last, slowest auto finishes, or while the memory budget holds an image back. Held by memory: the share of the auto batch's time in which an image waited for the engine's memory budget (${result.settings.memoryBudgetMiB ?? 256} MiB in this run) while fewer than the images in flight ran; auto is counted at what it was measured to hold (memory-estimate.ts, since 2026-11-28: 95 B a pixel more than the encoder, 155 for a transparent image into WebP or AVIF; 32 before; autos running together count for less, as they share the metric thread), so two large autos may not fit together and run one after the other.`,
    );
    out.push('');
    const head = [
      'kind',
      'format',
      'fixed Q',
      'fixed Q bytes',
      'auto bytes',
      'auto vs fixed Q',
      'auto mean (min)',
      'auto cost',
      'CPU cost',
      'held by memory',
      'auto steps',
    ];
    if (withSearch)
      head.push(
        'search bytes',
        'auto vs search',
        'search mean (min)',
        'search cost',
        'search CPU cost',
        'search steps',
      );
    const cells = result.autoVsFixed.map((r) => {
      const row = [
        r.kind,
        r.format,
        r.worstCaseQ === null ? 'none' : String(r.worstCaseQ),
        r.worstCaseBytes === null ? '—' : String(r.worstCaseBytes),
        String(r.autoBytes),
        r.autoVsWorstCasePercent === null
          ? '—'
          : `${r.autoVsWorstCasePercent > 0 ? '+' : ''}${n(r.autoVsWorstCasePercent)} %`,
        `${n(r.autoMeanScore)} (${n(r.autoMinScore)})`,
        `${n(r.autoCost)}×`,
        r.autoCpuCost === undefined ? '—' : `${n(r.autoCpuCost)}×`,
        r.autoMemoryHeldPercent === undefined ? '—' : `${r.autoMemoryHeldPercent} %`,
        n(r.autoSteps),
      ];
      if (withSearch)
        row.push(
          r.searchBytes === undefined ? '—' : String(r.searchBytes),
          r.autoVsSearchPercent == null
            ? '—'
            : `${r.autoVsSearchPercent > 0 ? '+' : ''}${n(r.autoVsSearchPercent)} %`,
          `${n(r.searchMeanScore)} (${n(r.searchMinScore)})`,
          r.searchCost === undefined ? '—' : `${n(r.searchCost)}×`,
          r.searchCpuCost === undefined ? '—' : `${n(r.searchCpuCost)}×`,
          n(r.searchSteps),
        );
      return row;
    });
    const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
    const left = (i: number) => i < 2;
    const line = (c: string[]) =>
      `| ${c.map((t, i) => (left(i) ? t.padEnd(widths[i]!) : t.padStart(widths[i]!))).join(' | ')} |`;
    out.push(line(head));
    out.push(`| ${widths.map((w, i) => (left(i) ? '-'.repeat(w) : `${'-'.repeat(w - 1)}:`)).join(' | ')} |`);
    for (const c of cells) out.push(line(c));
    const mean = (xs: (number | undefined)[]) => {
      const known = xs.filter((x): x is number => x !== undefined);
      return known.length ? known.reduce((a, b) => a + b, 0) / known.length : undefined;
    };
    const rows = result.autoVsFixed;
    const photos = rows.filter((r) => r.kind === 'photo');
    const costs = (of: AutoVsFixed[]) =>
      `${n(mean(of.map((r) => r.autoCost)))}× (CPU ${n(mean(of.map((r) => r.autoCpuCost)))}×)`;
    out.push('');
    out.push(
      `Auto cost, the mean of the rows: ${costs(rows)} over all ${rows.length} kind × format rows; ${costs(photos)} over the photo rows.`,
    );
  }
  out.push('');
  out.push(
    `Peak process RSS over the timed engine and raw sharp runs: ${result.memory.processMaxRssMiB} MiB.`,
  );
  const a = result.avifAtMaxDimension;
  if (a) {
    out.push(
      `AVIF at ${settings.maxDimension} px (effort ${settings.avifEffort}, ${a.images} images whose long side reaches ${settings.maxDimension}): ` +
        `**${n(a.imagesPerSecond, 2)} images/s** with ${settings.concurrency} in flight.`,
    );
  }
  if (result.referenceTools.length) {
    out.push('');
    out.push('Reference encoders (Debian), single-threaded, fed the already resized source as PNG:');
    out.push('');
    for (const t of result.referenceTools) out.push(`- ${t.name} (${t.format}): ${t.version}; ${t.settings}`);
  }
  const errors = result.rows
    .filter((r) => r.kind === 'all')
    .flatMap((r) => r.errors.map((e) => `${r.encoder} ${r.format} ${r.mode}: ${e}`));
  if (result.notes.length || errors.length) {
    out.push('');
    out.push('Notes:');
    out.push('');
    for (const note of [...result.notes, ...errors]) out.push(`- ${note}`);
  }
  out.push('');
  return out.join('\n');
}
