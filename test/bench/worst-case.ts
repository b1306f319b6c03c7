/**
 * "The fixed quality that reaches the same worst case" (issue 11): for one kind and format, the
 * smallest Compresso quality Q at which every image of the kind scores at least the floor — what a
 * user would have to pick by hand to get auto's guarantee from a fixed quality. Auto's bytes are
 * then compared with the bytes of that fixed Q on the same images.
 */

export interface AtQuality {
  score: number;
  bytes: number;
}

export interface WorstCase {
  /** The smallest Q reaching the floor on every image; null when some image misses it even at 100. */
  q: number | null;
  /** Total bytes of every image at that Q (null when q is null). */
  bytes: number | null;
  /** The image that needed the highest Q (or never reached the floor). */
  hardest: string;
  /** Encodes scored to find it. */
  probes: number;
}

const LOWEST = 30;

/**
 * Per image: the smallest Q with score ≥ floor (steps of 5 from 80, then bisection inside the last
 * step); the kind's Q is the largest of these. Scores are not strictly monotonic in Q, so this is the
 * smallest Q found by the search, as a user trying qualities would find it.
 */
export async function worstCaseQuality(
  names: string[],
  floor: number,
  at: (name: string, q: number) => Promise<AtQuality>,
): Promise<WorstCase> {
  let probes = 0;
  const probe = async (name: string, q: number) => {
    probes++;
    return at(name, q);
  };
  let worst = 0;
  let hardest = names[0] ?? '';
  for (const name of names) {
    let pass: number | undefined;
    let fail: number | undefined;
    let q = 80;
    for (;;) {
      const ok = (await probe(name, q)).score >= floor;
      if (ok) pass = q;
      else fail = q;
      if (ok && (q <= LOWEST || fail !== undefined)) break;
      if (!ok && (q >= 100 || pass !== undefined)) break;
      q = ok ? Math.max(LOWEST, q - 5) : Math.min(100, q + 5);
    }
    if (pass === undefined) return { q: null, bytes: null, hardest: name, probes };
    let lo = fail === undefined ? pass : fail + 1;
    let hi = pass;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      if ((await probe(name, mid)).score >= floor) hi = mid;
      else lo = mid + 1;
    }
    if (hi > worst) {
      worst = hi;
      hardest = name;
    }
  }
  let bytes = 0;
  for (const name of names) bytes += (await at(name, worst)).bytes;
  return { q: worst, bytes, hardest, probes };
}
