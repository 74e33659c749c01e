/**
 * Time as the cluster modules see it: the wall clock and timers behind one small interface, so
 * tests drive leases, renewals and expiries with a clock they advance by hand.
 */

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Runs `fn` once after `ms`. What `fn` returns is ignored by the system clock; a test clock may
   * await it, so callbacks return the promise of the work they start (which must not reject).
   */
  after(ms: number, fn: () => unknown): Timer;
}

/** The process clock. Timers are unref'd: a lease renewal never keeps the process alive by itself. */
export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, Math.max(0, ms));
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};

/** A time in the ISO 8601 form every stored timestamp has (sorts as it compares). */
export const iso = (ms: number): string => new Date(ms).toISOString();

/** The stored form of "never" / "long ago": before every lease. */
export const EPOCH_ISO = iso(0);
