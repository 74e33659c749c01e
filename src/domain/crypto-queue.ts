/**
 * Ed25519 verification jobs for the libuv thread pool, at most 16 in flight.
 * The pool (4 threads by default) also serves the file system; ten thousand crypto jobs queued
 * at once would make every store write wait behind them. Jobs beyond the limit wait here, in
 * order, and the pool stays available for the rest.
 */
const MAX_IN_FLIGHT = 16;
let inFlight = 0;
const waiting: Array<() => void> = [];

function next(): void {
  inFlight--;
  const start = waiting.shift();
  if (start) {
    inFlight++;
    start();
  }
}

/** Runs `start` (which must call `done` exactly once) when a slot is free. */
export function cryptoJob<T>(start: (done: (err: Error | null, value?: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const run = () => {
      try {
        start((err, value) => {
          next();
          if (err) reject(err);
          else resolve(value as T);
        });
      } catch (err) {
        next();
        reject(err);
      }
    };
    if (inFlight < MAX_IN_FLIGHT) {
      inFlight++;
      run();
    } else {
      waiting.push(run);
    }
  });
}
