/**
 * Admission by memory: each job declares the bytes it is expected to hold, and jobs run while their sum
 * stays within `budget` (and their number within `maxHolders`). The rest wait in arrival order.
 *
 * Strictly first in, first out: when the job at the head does not fit, nothing behind it is let past,
 * even a small job that would fit. Otherwise a steady stream of small images could keep a large one
 * waiting for ever. A job larger than the whole budget is not refused: it waits until nothing else
 * runs, then runs alone — the pixel limits, not the budget, decide what is too large to process.
 *
 * Part of a job's bytes may be declared `shared`: memory held in a place the running jobs share, which
 * holds at most `ceiling` whatever they ask of it (quality "auto": the metric thread, which keeps at
 * most two large prepared references and scores one candidate at a time, see memory-estimate.ts). The
 * running jobs then count together as `heldTogether` gives: their bytes, less what their shared parts
 * ask for beyond the largest ceiling among them.
 */
export interface MemoryClaim {
  bytes: number;
  /** The part of `bytes` held in the shared place (at least), and the most that place holds. */
  shared?: { bytes: number; ceiling: number };
}

/** What jobs running together hold by their claims (see ByteSemaphore). */
export function heldTogether(claims: Iterable<MemoryClaim>): number {
  let bytes = 0;
  let shared = 0;
  let ceiling = 0;
  for (const claim of claims) {
    bytes += claim.bytes;
    if (claim.shared) {
      shared += claim.shared.bytes;
      ceiling = Math.max(ceiling, claim.shared.ceiling);
    }
  }
  return bytes - Math.max(0, shared - ceiling);
}

export class ByteSemaphore {
  readonly budget: number;
  readonly maxHolders: number;
  #inUse = 0;
  #running = new Set<MemoryClaim>();
  #queue: { claim: MemoryClaim; admit: () => void }[] = [];
  #waitingBytes = 0;

  constructor(budget: number, maxHolders = Number.POSITIVE_INFINITY) {
    if (!Number.isSafeInteger(budget) || budget < 1)
      throw new RangeError(`budget must be a positive whole number of bytes, got ${budget}`);
    if (maxHolders !== Number.POSITIVE_INFINITY && (!Number.isInteger(maxHolders) || maxHolders < 1))
      throw new RangeError(`maxHolders must be a positive integer, got ${maxHolders}`);
    this.budget = budget;
    this.maxHolders = maxHolders;
  }

  /** Bytes held by the jobs running now (may exceed the budget only while one oversized job runs alone). */
  get inUse(): number {
    return this.#inUse;
  }

  /** Jobs running now. */
  get active(): number {
    return this.#running.size;
  }

  /** Jobs waiting for admission. */
  get waiting(): number {
    return this.#queue.length;
  }

  /** Bytes the waiting jobs have asked for. */
  get waitingBytes(): number {
    return this.#waitingBytes;
  }

  #fits(claim: MemoryClaim): boolean {
    if (this.#running.size === 0) return true;
    return this.#running.size < this.maxHolders && heldTogether([...this.#running, claim]) <= this.budget;
  }

  #take(claim: MemoryClaim): void {
    this.#running.add(claim);
    this.#inUse = heldTogether(this.#running);
  }

  /** Admit from the head of the line for as long as the head fits. */
  #drain(): void {
    while (this.#queue.length) {
      const head = this.#queue[0]!;
      if (!this.#fits(head.claim)) return;
      this.#queue.shift();
      this.#waitingBytes -= head.claim.bytes;
      this.#take(head.claim);
      head.admit();
    }
  }

  /**
   * Run `task` once its bytes (a number, or a claim with a shared part) can be held; they are given
   * back when it settles, whatever its outcome.
   */
  async run<T>(bytes: number | MemoryClaim, task: () => Promise<T>): Promise<T> {
    const claim = checkedClaim(bytes);
    // A newcomer only goes straight in when nobody is waiting: FIFO holds for arrivals too.
    if (this.#queue.length === 0 && this.#fits(claim)) this.#take(claim);
    else {
      await new Promise<void>((admit) => {
        this.#queue.push({ claim, admit });
        this.#waitingBytes += claim.bytes;
      });
    }
    try {
      return await task();
    } finally {
      this.#running.delete(claim);
      this.#inUse = heldTogether(this.#running);
      this.#drain();
    }
  }
}

/** A fresh claim object (each run is one entry of the running set), in whole bytes, checked. */
function checkedClaim(input: number | MemoryClaim): MemoryClaim {
  const claim = typeof input === 'number' ? { bytes: input } : input;
  const valid = (n: number) => Number.isFinite(n) && n >= 0;
  if (!valid(claim.bytes)) throw new RangeError(`bytes must be a non-negative number, got ${claim.bytes}`);
  if (!claim.shared) return { bytes: Math.ceil(claim.bytes) };
  const { bytes, ceiling } = claim.shared;
  if (!valid(bytes) || !valid(ceiling) || bytes > claim.bytes)
    throw new RangeError(
      `shared bytes must be non-negative and within the claim's bytes, with a non-negative ceiling, got ${bytes} of ${claim.bytes} (ceiling ${ceiling})`,
    );
  // Rounded down: the shared part only ever takes bytes off the count.
  return { bytes: Math.ceil(claim.bytes), shared: { bytes: Math.floor(bytes), ceiling: Math.ceil(ceiling) } };
}
