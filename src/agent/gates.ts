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
 * The clock is injectable so tests can move time.
 */
import type { CertificateTerms } from '../domain/certificate.js';

export type Clock = () => number;

export type GateResult = { ok: true } | { ok: false; gate: 1 | 2 | 3 | 4; error: string };

const HOUR_MS = 3_600_000;

export const gateMessages = {
  capability: (action: string) => `Capability '${action}' is not granted`,
  expired: (policyId: string, action: string) => `Policy '${policyId}' has expired; action '${action}' is blocked`,
  budget: 'Daily token budget exhausted',
  rate: 'Hourly request limit reached',
} as const;

export class Gates {
  private day = '';
  private tokensToday = 0;
  /** Start times of executions in the rolling window, oldest first. */
  private executions: number[] = [];

  constructor(private readonly clock: Clock = Date.now) {}

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
    return { ok: true };
  }

  /** Adds model usage to today's total. */
  recordTokens(promptTokens: number, completionTokens: number): void {
    this.todaysTokens(this.clock());
    this.tokensToday += promptTokens + completionTokens;
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
