/**
 * Rate limits: counts of events per key (a source address, a DID, a token, a bridge id) over a
 * window, with an optional burst allowance, on rate-limiter-flexible. Its memory store is used
 * today; its other stores (Redis, MongoDB, ...) share counts between nodes, so the store sits
 * behind `RateLimitStore` and can be swapped without touching the routes or the gateway.
 */
import { BurstyRateLimiter, RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

/** `points` events per `seconds` for one key; past them, up to `burst.points` more per `burst.seconds`. */
export interface RateRule {
  points: number;
  seconds: number;
  burst?: { points: number; seconds: number };
}

export interface RateLimiter {
  /** Counts one event for `key`: null when it is allowed, else the milliseconds until one would be. */
  take(key: string): Promise<number | null>;
}

export interface RateLimitStore {
  /** The limiter named `name` (its keys apart from other limiters'); null: one that never refuses. */
  limiter(name: string, rule: RateRule | null): RateLimiter;
}

/** A limiter that never refuses (a limit set to 0). */
export const unlimited: RateLimiter = { take: () => Promise.resolve(null) };

type MakeLimiter = (opts: { keyPrefix: string; points: number; duration: number }) => RateLimiterAbstract;

/** A RateLimitStore over any rate-limiter-flexible store, given how to make one of its limiters. */
export function flexibleStore(make: MakeLimiter): RateLimitStore {
  return {
    limiter(name, rule) {
      if (!rule) return unlimited;
      const main = make({ keyPrefix: name, points: rule.points, duration: rule.seconds });
      const limiter = rule.burst
        ? new BurstyRateLimiter(main, make({ keyPrefix: `${name}:burst`, points: rule.burst.points, duration: rule.burst.seconds }))
        : main;
      return {
        take: (key) =>
          limiter.consume(key).then(
            () => null,
            (refused: unknown) => {
              // Refusals come as RateLimiterRes; anything else is a store fault for the caller to handle.
              if (refused instanceof RateLimiterRes) return Math.max(1, refused.msBeforeNext);
              throw refused;
            },
          ),
      };
    },
  };
}

/** Counts held in this process (one node). */
export function memoryStore(): RateLimitStore {
  return flexibleStore((opts) => new RateLimiterMemory(opts));
}

/**
 * The limited groups of endpoints. Each has a limit per source address and, except agents, one
 * per the key its requests name (docs/api.md, "Rate limits").
 */
export const LIMIT_GROUPS = {
  /** POST /api/auth/challenge and /api/auth/login; the key is the DID. */
  login: { what: 'login requests', keyName: 'DID' },
  /** The claim and invitation endpoints; the key is the claim or invitation token. */
  claim: { what: 'claim and invitation requests', keyName: 'token' },
  /** Incoming webhook and team-chat deliveries; the key is the bridge id. */
  webhook: { what: 'incoming deliveries', keyName: 'bridge' },
  /** Agent hellos on /ws/agent and POST /api/agents/register; no key limit. */
  agent: { what: 'agent connections', keyName: null },
} as const;

export type LimitGroup = keyof typeof LIMIT_GROUPS;

export type RateRules = Record<LimitGroup, { address: RateRule | null; key: RateRule | null }>;

export type RateLimits = Record<LimitGroup, { address: RateLimiter; key: RateLimiter }>;

export function createRateLimits(rules: RateRules, store: RateLimitStore): RateLimits {
  const out = {} as RateLimits;
  for (const group of Object.keys(LIMIT_GROUPS) as LimitGroup[]) {
    out[group] = {
      address: store.limiter(`${group}:address`, rules[group].address),
      key: store.limiter(`${group}:key`, rules[group].key),
    };
  }
  return out;
}

/** Seconds for a Retry-After header (at least 1). */
export const retryAfterSeconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
