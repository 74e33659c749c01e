/**
 * Giving the event loop back during long background work. `yieldToLoop` is the one-off form
 * (between chunks of a re-certification, while draining a queue); `TimeSlice` is for work made
 * of many small units (the token roll-up): it checks in between units and yields once it has run
 * for its budget, so socket reads, acknowledgements and timers never wait behind it for more than
 * a few milliseconds, and with a rest it also leaves them most of the loop's time.
 */

/** Resolves on the next turn of the event loop, after pending I/O callbacks and timers. */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Default budget of one slice. */
const SLICE_MS = 4;

export class TimeSlice {
  private started = performance.now();

  /**
   * @param budgetMs how long a slice runs before it yields
   * @param restMs how long it then stays away (a timer), so background work takes at most
   *   budget / (budget + rest) of the loop however busy the server is; 0 comes back on the next
   *   turn of the loop.
   */
  constructor(
    private readonly budgetMs = SLICE_MS,
    private readonly restMs = 0,
  ) {}

  /** Yields to the event loop when this slice has used its budget; otherwise returns at once. */
  async yieldIfDue(): Promise<void> {
    if (performance.now() - this.started < this.budgetMs) return;
    if (this.restMs > 0) await new Promise((resolve) => setTimeout(resolve, this.restMs));
    else await yieldToLoop();
    this.started = performance.now();
  }
}
