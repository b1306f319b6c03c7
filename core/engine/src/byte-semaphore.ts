/**
 * Admission by memory: each job declares the bytes it is expected to hold, and jobs run while their sum
 * stays within `budget` (and their number within `maxHolders`). The rest wait in arrival order.
 *
 * Strictly first in, first out: when the job at the head does not fit, nothing behind it is let past,
 * even a small job that would fit. Otherwise a steady stream of small images could keep a large one
 * waiting for ever. A job larger than the whole budget is not refused: it waits until nothing else
 * runs, then runs alone — the pixel limits, not the budget, decide what is too large to process.
 */
export class ByteSemaphore {
  readonly budget: number;
  readonly maxHolders: number;
  #inUse = 0;
  #holders = 0;
  #queue: { bytes: number; admit: () => void }[] = [];
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
    return this.#holders;
  }

  /** Jobs waiting for admission. */
  get waiting(): number {
    return this.#queue.length;
  }

  /** Bytes the waiting jobs have asked for. */
  get waitingBytes(): number {
    return this.#waitingBytes;
  }

  #fits(bytes: number): boolean {
    if (this.#holders === 0) return true;
    return this.#holders < this.maxHolders && this.#inUse + bytes <= this.budget;
  }

  #take(bytes: number): void {
    this.#holders++;
    this.#inUse += bytes;
  }

  /** Admit from the head of the line for as long as the head fits. */
  #drain(): void {
    while (this.#queue.length) {
      const head = this.#queue[0]!;
      if (!this.#fits(head.bytes)) return;
      this.#queue.shift();
      this.#waitingBytes -= head.bytes;
      this.#take(head.bytes);
      head.admit();
    }
  }

  /** Run `task` once `bytes` can be held; the bytes are given back when it settles, whatever its outcome. */
  async run<T>(bytes: number, task: () => Promise<T>): Promise<T> {
    if (!Number.isFinite(bytes) || bytes < 0)
      throw new RangeError(`bytes must be a non-negative number, got ${bytes}`);
    const need = Math.ceil(bytes);
    // A newcomer only goes straight in when nobody is waiting: FIFO holds for arrivals too.
    if (this.#queue.length === 0 && this.#fits(need)) this.#take(need);
    else {
      await new Promise<void>((admit) => {
        this.#queue.push({ bytes: need, admit });
        this.#waitingBytes += need;
      });
    }
    try {
      return await task();
    } finally {
      this.#holders--;
      this.#inUse -= need;
      this.#drain();
    }
  }
}
