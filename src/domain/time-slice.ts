/**
 * Giving the event loop back during long background work. `yieldToLoop` is the one-off form
 * (between chunks of a re-certification, while draining a queue); `TimeSlice` is for work made
 * of many small units (the token roll-up): it checks in between units and yields once it has run
 * for its budget, so socket reads, acknowledgements and timers never wait behind it for more than
 * a few milliseconds.
 */

/** Resolves on the next turn of the event loop, after pending I/O callbacks and timers. */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Default budget of one slice. */
const SLICE_MS = 4;

export class TimeSlice {
  private started = performance.now();

  constructor(private readonly budgetMs = SLICE_MS) {}

  /** Yields to the event loop when this slice has used its budget; otherwise returns at once. */
  async yieldIfDue(): Promise<void> {
    if (performance.now() - this.started < this.budgetMs) return;
    await yieldToLoop();
    this.started = performance.now();
  }
}
