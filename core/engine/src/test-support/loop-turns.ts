/**
 * How many full turns of the event loop (a setImmediate each) complete before `work` settles, up to
 * `wanted`. Work that held the main thread from the call until it settled leaves no turn at all; work
 * handed to the libuv pool or a worker thread leaves the loop turning meanwhile. An order, not a
 * stopwatch: it does not depend on how loaded the machine is, so it says nothing about speed either
 * (that is the benchmark's business).
 */
export async function loopTurnsBefore(work: Promise<unknown>, wanted = 10): Promise<number> {
  let settled = false;
  work.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  let turns = 0;
  while (!settled && turns < wanted) {
    await new Promise((resolve) => setImmediate(resolve));
    if (!settled) turns++;
  }
  return turns;
}
