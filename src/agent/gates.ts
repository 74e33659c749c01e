/**
 * The agent-side enforcement gates (interface §6), run in this order when an intent arrives:
 *
 * 1. Capability: the action is one of the certificate's capabilities —
 *    `Capability '<action>' is not granted`.
 * 2. Policy expiry: policyExpiresAt has not passed —
 *    `Policy '<id>' has expired; action '<action>' is blocked`.
 * 3. Daily token budget: today's (UTC) prompt plus completion tokens are below maxTokensPerDay —
 *    `Daily token budget exhausted`. The counter resets at UTC midnight.
 * 4. Hourly request rate: executions in the last 60 minutes are below maxRequestsPerHour —
 *    `Hourly request limit reached`. Only executions that passed the gates count.
 *
 * The clock is injectable so tests can move time. The counters live in memory; give the agent a
 * GateStateStore (`fileGateState` keeps them in a JSON file) and they survive a restart of the
 * agent's process, so a restart does not hand it a fresh budget.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { CertificateTerms } from '../domain/certificate-format.js';

export type Clock = () => number;

export type GateResult = { ok: true } | { ok: false; gate: 1 | 2 | 3 | 4; error: string };

const HOUR_MS = 3_600_000;

export const gateMessages = {
  capability: (action: string) => `Capability '${action}' is not granted`,
  expired: (policyId: string, action: string) => `Policy '${policyId}' has expired; action '${action}' is blocked`,
  budget: 'Daily token budget exhausted',
  rate: 'Hourly request limit reached',
} as const;

/** What the gates count, as a store keeps it. */
export interface GateState {
  /** UTC day (YYYY-MM-DD) of `tokensToday`. */
  day: string;
  tokensToday: number;
  /** Start times (ms since the epoch) of the executions in the rolling hour, oldest first. */
  executions: number[];
}

/** Where the gates' counters are kept between runs of the agent (load once at start, save after each change). */
export interface GateStateStore {
  load(): GateState | null;
  save(state: GateState): void;
}

/**
 * A GateStateStore in a JSON file (written to a temporary file and renamed, so a crash leaves the
 * old state or the new one). A missing file is a fresh start; an unreadable one throws.
 */
export function fileGateState(path: string): GateStateStore {
  return {
    load() {
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw err;
      }
      const s = JSON.parse(text) as Partial<GateState>;
      if (typeof s.day !== 'string' || typeof s.tokensToday !== 'number' || !Array.isArray(s.executions) || !s.executions.every((t) => typeof t === 'number')) {
        throw new Error(`${path} does not hold gate state`);
      }
      return { day: s.day, tokensToday: s.tokensToday, executions: s.executions };
    },
    save(state) {
      const tmp = `${path}.tmp`;
      writeFileSync(tmp, JSON.stringify(state), { mode: 0o600 });
      renameSync(tmp, path);
    },
  };
}

export class Gates {
  private day = '';
  private tokensToday = 0;
  /** Start times of executions in the rolling window, oldest first. */
  private executions: number[] = [];

  constructor(
    private readonly clock: Clock = Date.now,
    private readonly store?: GateStateStore,
  ) {
    const saved = store?.load();
    if (saved) {
      this.day = saved.day;
      this.tokensToday = saved.tokensToday;
      this.executions = [...saved.executions].sort((a, b) => a - b);
    }
  }

  /** The counters as a store keeps them. */
  state(): GateState {
    return { day: this.day, tokensToday: this.tokensToday, executions: [...this.executions] };
  }

  /** Checks an intent against the terms; when it passes, counts it as an execution. */
  admit(action: string, terms: CertificateTerms): GateResult {
    if (!terms.capabilities.includes(action as never)) return { ok: false, gate: 1, error: gateMessages.capability(action) };
    const now = this.clock();
    if (terms.policyExpiresAt !== null && Date.parse(terms.policyExpiresAt) <= now) {
      return { ok: false, gate: 2, error: gateMessages.expired(terms.policyId ?? 'unknown', action) };
    }
    const limits = terms.resourceLimits;
    if (limits?.maxTokensPerDay !== undefined && this.todaysTokens(now) >= limits.maxTokensPerDay) {
      return { ok: false, gate: 3, error: gateMessages.budget };
    }
    this.dropOld(now);
    if (limits?.maxRequestsPerHour !== undefined && this.executions.length >= limits.maxRequestsPerHour) {
      return { ok: false, gate: 4, error: gateMessages.rate };
    }
    this.executions.push(now);
    this.store?.save(this.state());
    return { ok: true };
  }

  /** Adds model usage to today's total. */
  recordTokens(promptTokens: number, completionTokens: number): void {
    this.todaysTokens(this.clock());
    this.tokensToday += promptTokens + completionTokens;
    this.store?.save(this.state());
  }

  /** Today's (UTC) token total. */
  todaysTokens(now = this.clock()): number {
    const day = new Date(now).toISOString().slice(0, 10);
    if (day !== this.day) {
      this.day = day;
      this.tokensToday = 0;
    }
    return this.tokensToday;
  }

  /** Executions within the last 60 minutes. */
  executionsThisHour(now = this.clock()): number {
    this.dropOld(now);
    return this.executions.length;
  }

  private dropOld(now: number): void {
    let i = 0;
    while (i < this.executions.length && this.executions[i]! <= now - HOUR_MS) i++;
    if (i > 0) this.executions.splice(0, i);
  }
}
