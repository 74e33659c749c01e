/**
 * Smart lockout (the shape of Okta's and Microsoft Entra's): failures are counted per address and
 * per principal. A count on what the attempt itself is (its address, the signed-in person making
 * it) refuses once spent; a count on something anyone can name (a DID, the whole server) refuses
 * only attempts whose address or person failed too, so a stranger's failures never lock the
 * owner out: a right answer from an address with no failures gets through. Only failures count:
 * asking for a challenge, or answering right, costs nothing.
 */
import type { Logger } from '../log.js';
import { AppError } from '../domain/errors.js';
import { retryAfterSeconds, type RateLimiter } from './rate-limits.js';

/** One attempt: where it comes from and whom it names. */
export interface Attempt {
  /** The source address (as the rate limits key it: an IPv6 client by its /64). */
  address: string;
  /** The principal it names or acts as (a DID, a person's id). */
  principal: string;
}

export interface FailureCount {
  /** The setting of this limit (for the log line). */
  setting: string;
  limiter: RateLimiter;
  /** The key this count keeps the attempt under. */
  key: (a: Attempt) => string;
  /** `own`: the attempt's own address or person, refused once spent; `named`: refused past it only after a failure of the attempt's own. */
  kind: 'own' | 'named';
  /** How the 429 says where the failures were: "from this address", "for this DID". */
  where: string;
}

/** Reports a limit's trip once per window and key: under a flood, one line, not one per refusal. */
export class TripLog {
  private readonly until = new Map<string, number>();

  constructor(
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Logs a warning naming the limit and the address (never a secret), unless this trip was logged already. */
  tripped(setting: string, key: string, address: string, waitMs: number): void {
    const t = this.now();
    const id = `${setting}\n${key}`;
    if ((this.until.get(id) ?? 0) > t) return;
    if (this.until.size >= 10_000) for (const [k, end] of this.until) if (end <= t) this.until.delete(k);
    this.until.set(id, t + waitMs);
    this.log.warn({ limit: setting, address, retryAfterSeconds: retryAfterSeconds(waitMs) }, `rate limit ${setting} tripped by ${address}`);
  }
}

export class Lockout {
  constructor(
    /** What is counted, for the 429's message ("failed logins"). */
    private readonly what: string,
    private readonly counts: readonly FailureCount[],
    private readonly trips: TripLog,
  ) {}

  /** 429 (with Retry-After) when the attempt may not be made; checked before it, so a refusal never depends on its answer. */
  async check(a: Attempt): Promise<void> {
    let ownFailures = false;
    for (const c of this.counts) {
      if (c.kind !== 'own') continue;
      const key = c.key(a);
      const wait = await c.limiter.blocked(key);
      if (wait !== null) throw this.refusal(c, wait);
      if ((await c.limiter.used(key)) > 0) ownFailures = true;
    }
    if (!ownFailures) return;
    for (const c of this.counts) {
      if (c.kind !== 'named') continue;
      const wait = await c.limiter.blocked(c.key(a));
      if (wait !== null) throw this.refusal(c, wait);
    }
  }

  /** Counts a failed attempt everywhere it counts; a limit it trips is logged. */
  async failed(a: Attempt): Promise<void> {
    for (const c of this.counts) {
      const key = c.key(a);
      const before = await c.limiter.blocked(key);
      await c.limiter.take(key);
      const after = before === null ? await c.limiter.blocked(key) : null;
      if (after !== null) this.trips.tripped(c.setting, key, a.address, after);
    }
  }

  private refusal(c: FailureCount, waitMs: number): AppError {
    const seconds = retryAfterSeconds(waitMs);
    return new AppError(429, 'rate_limited', `too many ${this.what} ${c.where}; retry in ${seconds} s`, seconds);
  }
}
