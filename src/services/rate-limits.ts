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
  /**
   * Whether `key` has used up its events, without counting one: null when one more would be
   * allowed, else the milliseconds until it would be. For limits that count only failures (wrong
   * codes), checked before the attempt, so a refusal never depends on the attempt's outcome.
   */
  blocked(key: string): Promise<number | null>;
  /** The events counted for `key` in its current window (0: none), without counting one. */
  used(key: string): Promise<number>;
}

export interface RateLimitStore {
  /** The limiter named `name` (its keys apart from other limiters'); null: one that never refuses. */
  limiter(name: string, rule: RateRule | null): RateLimiter;
}

/** A limiter that never refuses (a limit set to 0). */
export const unlimited: RateLimiter = { take: () => Promise.resolve(null), blocked: () => Promise.resolve(null), used: () => Promise.resolve(0) };

type MakeLimiter = (opts: { keyPrefix: string; points: number; duration: number }) => RateLimiterAbstract;

/** A RateLimitStore over any rate-limiter-flexible store, given how to make one of its limiters. */
export function flexibleStore(make: MakeLimiter): RateLimitStore {
  return {
    limiter(name, rule) {
      if (!rule) return unlimited;
      const main = make({ keyPrefix: name, points: rule.points, duration: rule.seconds });
      const burst = rule.burst ? make({ keyPrefix: `${name}:burst`, points: rule.burst.points, duration: rule.burst.seconds }) : null;
      const limiter = burst ? new BurstyRateLimiter(main, burst) : main;
      /** Milliseconds until `l` (allowing `points`) takes one more event for `key`; null when it would now. */
      const waitOf = async (l: RateLimiterAbstract, points: number, key: string): Promise<number | null> => {
        const res = await l.get(key);
        return res && res.consumedPoints >= points ? Math.max(1, res.msBeforeNext) : null;
      };
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
        async used(key) {
          return (await main.get(key))?.consumedPoints ?? 0;
        },
        async blocked(key) {
          const wait = await waitOf(main, rule.points, key);
          if (wait === null || !burst || !rule.burst) return wait;
          const burstWait = await waitOf(burst, rule.burst.points, key);
          return burstWait === null ? null : Math.min(wait, burstWait);
        },
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
 * per the key its requests name (docs/api.md, "Rate limits"), each set by the setting named here.
 */
export const LIMIT_GROUPS = {
  /** POST /api/auth/challenge and /api/auth/login, per address only: a DID is anyone's to name. */
  login: { what: 'login requests', keyName: null, settings: { address: 'RATE_LIMIT_LOGIN_PER_ADDRESS', key: null } },
  /**
   * Failed logins, counted by the login service itself (challenges asked for never count): per
   * address, and per DID with the smart-lockout rule (src/services/lockout.ts).
   */
  loginFailure: { what: 'failed logins', keyName: 'DID', settings: { address: 'RATE_LIMIT_LOGIN_FAILURES_PER_ADDRESS', key: 'RATE_LIMIT_LOGIN_PER_DID' } },
  /** The claim and invitation endpoints; the key is the claim or invitation token. */
  claim: { what: 'claim and invitation requests', keyName: 'token', settings: { address: 'RATE_LIMIT_CLAIM_PER_ADDRESS', key: 'RATE_LIMIT_CLAIM_PER_TOKEN' } },
  /** Incoming webhook and team-chat deliveries; the key is the bridge id. */
  webhook: { what: 'incoming deliveries', keyName: 'bridge', settings: { address: 'RATE_LIMIT_WEBHOOK_PER_ADDRESS', key: 'RATE_LIMIT_WEBHOOK_PER_BRIDGE' } },
  /** Agent hellos on /ws/agent and POST /api/agents/register; no key limit. */
  agent: { what: 'agent connections', keyName: null, settings: { address: 'RATE_LIMIT_AGENT_PER_ADDRESS', key: null } },
  /** POST /api/auth/device and /api/auth/device/token (a browser asking to be signed in, and polling); no key limit. */
  device: { what: 'device sign-in requests', keyName: null, settings: { address: 'RATE_LIMIT_DEVICE_PER_ADDRESS', key: null } },
  /**
   * Wrong user codes given to the approval endpoints (/api/auth/device/{userCode}/…), counted by
   * the device approval service itself (only wrong codes count): per address, and per signed-in
   * person giving them.
   */
  userCode: { what: 'wrong user codes', keyName: 'person', settings: { address: 'RATE_LIMIT_USER_CODE_PER_ADDRESS', key: 'RATE_LIMIT_USER_CODE_PER_PERSON' } },
  /** The same, over the whole server (the key is always the same), with the smart-lockout rule. */
  userCodeTotal: { what: 'wrong user codes', keyName: 'server', settings: { address: null, key: 'RATE_LIMIT_USER_CODE_TOTAL' } },
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
