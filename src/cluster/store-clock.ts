/**
 * The one clock a cluster judges its leases by: the store's. Every node reads the store's time
 * (MongoDB's `hello.localTime`) and carries it forward on its own monotonic clock, so what one
 * node writes as `leaseUntil` and what another compares it with are times of the same clock,
 * whatever the nodes' own wall clocks say (docs/cluster.md, "One clock").
 *
 * A reading taken in a round trip of r ms is off by at most r/2: the store read its clock at some
 * instant of the trip, and the estimate is its middle. Readings off by more than `maxErrorMs` are
 * not used once a good one is held; the lease margin must cover twice `maxErrorMs` (one node's
 * error each way) plus the drift between two readings (parts per million of a third of the lease).
 */
import { performance } from 'node:perf_hooks';
import { systemClock, type Clock, type Timer } from './clock.js';
import type { ClusterLog } from './membership.js';

export interface StoreClockOptions {
  /** The store's time now (ms since the Unix epoch). */
  time: () => Promise<number>;
  /** The largest error a reading may have to be used (default 500 ms). */
  maxErrorMs?: number;
  /** How often the store's clock is read again (default 5 s). */
  syncEveryMs?: number;
  log: ClusterLog;
  /**
   * Elapsed time and timers between readings. Default: the process's monotonic clock, which a
   * change of the wall clock (NTP stepping it, an operator) does not move.
   */
  base?: Clock;
}

/** The process's monotonic clock in epoch milliseconds, with the system timers. */
export const monotonicClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  after: (ms, fn) => systemClock.after(ms, fn),
};

export class StoreClock implements Clock {
  private readonly base: Clock;
  private readonly maxErrorMs: number;
  /** The store's time at `anchorBase` on the base clock; NaN until the first reading. */
  private anchorStore = Number.NaN;
  private anchorBase = 0;
  private errorMs = Number.POSITIVE_INFINITY;
  private timer: Timer | undefined;
  private running = false;

  constructor(private readonly options: StoreClockOptions) {
    this.base = options.base ?? monotonicClock;
    this.maxErrorMs = options.maxErrorMs ?? 500;
  }

  /** The store's time now, as last measured (throws before the first reading). */
  now(): number {
    if (Number.isNaN(this.anchorStore)) throw new Error('the store clock has not been read yet');
    return this.anchorStore + (this.base.now() - this.anchorBase);
  }

  after(ms: number, fn: () => unknown): Timer {
    return this.base.after(ms, fn);
  }

  /** The error bound of the reading in use (ms), and this node's offset from the store. */
  status(): { errorMs: number; offsetMs: number } {
    return { errorMs: this.errorMs, offsetMs: Math.round(Date.now() - this.now()) };
  }

  /**
   * Reads the store's clock until one reading is within `maxErrorMs` (a few tries), then again
   * every `syncEveryMs`. Throws when the store cannot be read at all.
   */
  async start(): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const ok = await this.sync();
      if (ok || attempt >= 4) break;
    }
    if (this.errorMs > this.maxErrorMs) {
      this.options.log.warn({ errorMs: this.errorMs, maxErrorMs: this.maxErrorMs }, 'the store answers slowly: its clock is known less precisely than the lease margin assumes');
    }
    this.running = true;
    this.schedule();
  }

  stop(): void {
    this.running = false;
    this.timer?.cancel();
  }

  /** One reading; true when it is now in use. Store errors are thrown. */
  async sync(): Promise<boolean> {
    const t0 = this.base.now();
    const storeTime = await this.options.time();
    const t1 = this.base.now();
    const errorMs = (t1 - t0) / 2;
    // A slow reading is used only when nothing as good is held (the first one, whatever it is).
    if (errorMs > this.maxErrorMs && errorMs >= this.errorMs) return false;
    this.anchorStore = storeTime + errorMs;
    this.anchorBase = t1;
    this.errorMs = errorMs;
    return true;
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = this.base.after(this.options.syncEveryMs ?? 5000, () =>
      this.sync()
        .catch((err: unknown) => this.options.log.warn({ err }, 'reading the store clock failed; carrying the last reading forward'))
        .then(() => this.schedule()),
    );
  }
}

/** The store's clock from a store that reports it, or this process's clock for one that does not (the embedded store). */
export function storeTimeOf(store: { time?(): Promise<number> }): () => Promise<number> {
  return store.time ? () => store.time!() : async () => Date.now();
}
