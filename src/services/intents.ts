/**
 * Intents (interface §5.6): a person asks a connected agent to perform an action. The server
 * forwards an `intent {intentId, action, params, requestedBy}` frame and waits for the agent's
 * `intent_result {intentId, ok, output?, error?}` (the AgentLink port's request/answer).
 *
 * Who may: a global admin; anyone else needs a workspace role of operator or higher in one of the
 * agent's workspaces AND an unexpired grant covering the capability on that agent or on all
 * agents (src/services/grants.ts). The agent then applies its own four gates (policy, §6).
 *
 * Outcomes: the agent's answer (200), agent offline (409), no answer within the timeout (504),
 * agent disconnected before answering (502). Every intent is audited with its action and outcome,
 * never its parameters (they may hold secrets); so is every one refused before it was sent (no
 * such agent, no role, no grant), with the reason. Workflows send their agent steps through
 * `send` too, with the same checks.
 */
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import type { ServiceCore } from './core.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { AgentLink, IntentOutcome, IntentResult } from './ports.js';
import { CAPABILITIES, isCapability, type Capability } from '../domain/capabilities.js';
import { atLeast } from '../domain/permissions.js';
import { AppError, badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import { agentWorkspaceIds } from './workspaces.js';
import { hasGrant } from './grants.js';

/** The agent's `intent_result` as POST /api/agents/{did}/intents answers it. */
export const IntentAnswer = z
  .strictObject({
    intentId: z.string(),
    ok: z.boolean(),
    output: z.unknown().optional().meta({ description: 'Any JSON value the agent answered' }),
    error: z.string().optional(),
  })
  .meta({ id: 'IntentResult' });
export type IntentAnswer = z.infer<typeof IntentAnswer>;

/** What a caller asks of an agent. */
export interface IntentAsk {
  action: string;
  params: Record<string, unknown>;
  /** Default INTENT_TIMEOUT_MS, at most INTENT_MAX_TIMEOUT_MS. */
  timeoutMs?: number;
}

export class IntentService {
  constructor(
    private readonly ctx: ServiceCore,
    private readonly agents: AgentLink,
  ) {}

  /** Throws 404 (unknown, or not visible to `who`) or 403 (no role, no grant) unless `who` may send `action` to the agent. */
  async authorize(who: UserPrincipal, did: string, action: Capability): Promise<void> {
    const { c } = this.ctx;
    const agent = await c.agents.findById(did);
    if (!agent || agent.status !== 'active') throw notFound(`no agent ${did}`);
    if (who.isAdmin) return;
    const workspaceIds = await agentWorkspaceIds(c, did);
    const roles = workspaceIds.length
      ? await c.workspaceMembers.find({ userId: who.userId, workspaceId: { $in: workspaceIds } }, { projection: { role: 1 } })
      : [];
    // An agent outside every workspace of the caller answers as an unknown one (docs/api.md).
    if (roles.length === 0) throw notFound(`no agent ${did}`);
    if (!roles.some((m) => atLeast(m.role, 'operator'))) {
      throw forbidden("sending intents needs the operator role (or higher) in one of the agent's workspaces");
    }
    if (!(await hasGrant(c, who.userId, did, action))) {
      throw forbidden(`no unexpired grant covers '${action}' on this agent`);
    }
  }

  /**
   * Sends an intent with every check: the action is a capability (400), the agent exists and the
   * caller may see it (404), role and grant (403), the agent is online (409), the answer comes in
   * time (504), the agent stays connected until it answers (502).
   */
  async send(who: UserPrincipal, did: string, ask: IntentAsk): Promise<IntentAnswer> {
    if (!isCapability(ask.action)) throw badRequest(`unknown action '${ask.action}'; an action is a capability (${CAPABILITIES.join(', ')})`, 'unknown_action');
    const action = ask.action;
    const { intentTimeoutMs, intentMaxTimeoutMs } = this.ctx.config;
    const timeoutMs = Math.min(Math.max(ask.timeoutMs ?? intentTimeoutMs, 1), intentMaxTimeoutMs);
    try {
      await this.authorize(who, did, action);
    } catch (err) {
      if (err instanceof AppError) await this.audit(who, did, { action, outcome: err.code, reason: err.message });
      throw err;
    }
    const intentId = newId();
    const started = Date.now();
    let outcome = 'ok';
    try {
      const answer = answerOf(await this.agents.request(did, { intentId, action, params: ask.params, requestedBy: who.did }, timeoutMs), timeoutMs);
      if (!answer.ok) outcome = 'refused';
      return answer;
    } catch (err) {
      outcome = err instanceof AppError ? err.code : 'error';
      throw err;
    } finally {
      await this.audit(who, did, { intentId, action, outcome, durationMs: Date.now() - started });
    }
  }

  /** The `intent.send` audit entry of an intent to `did`, sent or refused. */
  private audit(who: UserPrincipal, did: string, details: Record<string, unknown>): Promise<void> {
    return this.ctx.audit.record(who, { action: 'intent.send', targetType: 'agent', target: did, details });
  }
}

/** The agent's answer, or the error that says why there is none. */
function answerOf(outcome: IntentOutcome, timeoutMs: number): IntentResult {
  if ('answered' in outcome) return outcome.answered;
  switch (outcome.failed) {
    case 'offline':
      throw conflict('the agent is not connected', 'agent_offline');
    case 'timeout':
      throw new AppError(504, 'intent_timeout', `the agent did not answer within ${timeoutMs} ms`);
    case 'disconnected':
      throw new AppError(502, 'agent_disconnected', 'the agent disconnected before answering');
  }
}
