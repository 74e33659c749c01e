/**
 * Intents (interface §5.6): a person asks a connected agent to perform an action. The server
 * forwards an `intent {intentId, action, params, requestedBy}` frame and waits for the agent's
 * `intent_result {intentId, ok, output?, error?}`.
 *
 * Who may: a global admin; anyone else needs a workspace role of operator or higher in one of the
 * agent's workspaces AND an unexpired grant covering the capability on that agent or on all
 * agents (src/services/grants.ts). The agent then applies its own four gates (policy, §6).
 *
 * Outcomes: the agent's answer (200), agent offline (409), no answer within the timeout (504),
 * agent disconnected before answering (502). Every intent is audited with its action and outcome,
 * never its parameters (they may hold secrets); so is every one refused before it was sent (no
 * such agent, no role, no grant), with the reason.
 */
import { nanoid } from 'nanoid';
import type { AppContext } from '../server.js';
import type { Capability } from '../domain/capabilities.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { IntentResultFrame } from '../domain/agent-protocol.js';
import type { AgentIntents, IntentRequest, IntentResult } from './agent-push.js';
import type { AgentGateway, IntentSink } from '../ws/agent-gateway.js';
import { atLeast } from '../domain/permissions.js';
import { agentWorkspaceIds } from './workspaces.js';
import { hasGrant } from './grants.js';
import { AppError, badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import { CAPABILITIES, isCapability } from '../domain/capabilities.js';

export type IntentAnswer = IntentResult;

interface Pending {
  did: string;
  resolve(answer: IntentAnswer): void;
  reject(err: AppError): void;
}

export class IntentService implements IntentSink, AgentIntents {
  private readonly pending = new Map<string, Pending>();

  constructor(
    private readonly ctx: AppContext,
    private readonly gateway: AgentGateway,
  ) {
    gateway.intents = this;
  }

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
   * Sends an intent with every check (AgentIntents): the action is a capability (400), the agent
   * exists and the caller may see it (404), role and grant (403), the agent is online (409), the
   * answer comes in time (504; default INTENT_TIMEOUT_MS, at most INTENT_MAX_TIMEOUT_MS).
   */
  async send(who: UserPrincipal, did: string, request: Omit<IntentRequest, 'requestedBy'>): Promise<IntentAnswer> {
    if (!isCapability(request.action)) throw badRequest(`unknown action '${request.action}'; an action is a capability (${CAPABILITIES.join(', ')})`, 'unknown_action');
    const action = request.action as Capability;
    const { intentTimeoutMs, intentMaxTimeoutMs } = this.ctx.config;
    const timeoutMs = Math.min(Math.max(request.timeoutMs ?? intentTimeoutMs, 1), intentMaxTimeoutMs);
    try {
      await this.authorize(who, did, action);
    } catch (err) {
      if (err instanceof AppError) await this.audit(who, did, { action, outcome: err.code, reason: err.message });
      throw err;
    }
    return this.dispatch(who, did, action, request.params, timeoutMs);
  }

  private async dispatch(who: UserPrincipal, did: string, action: Capability, params: Record<string, unknown>, timeoutMs: number): Promise<IntentAnswer> {
    const intentId = nanoid();
    const started = Date.now();
    let outcome = 'ok';
    try {
      const answer = await new Promise<IntentAnswer>((resolve, reject) => {
        const timer = setTimeout(() => {
          this.pending.delete(intentId);
          reject(new AppError(504, 'intent_timeout', `the agent did not answer within ${timeoutMs} ms`));
        }, timeoutMs);
        const settle = <T>(fn: (v: T) => void) => (v: T) => {
          clearTimeout(timer);
          this.pending.delete(intentId);
          fn(v);
        };
        this.pending.set(intentId, { did, resolve: settle(resolve), reject: settle(reject) });
        if (!this.gateway.push(did, { type: 'intent', intentId, action, params, requestedBy: who.did })) {
          this.pending.get(intentId)?.reject(conflict('the agent is not connected', 'agent_offline'));
        }
      });
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

  onResult(did: string, frame: IntentResultFrame): void {
    const p = this.pending.get(frame.intentId);
    if (!p || p.did !== did) return; // late (timed out) or not this agent's
    const answer: IntentAnswer = { intentId: frame.intentId, ok: frame.ok };
    if (frame.output !== undefined) answer.output = frame.output;
    if (frame.error !== undefined) answer.error = frame.error;
    p.resolve(answer);
  }

  agentGone(did: string): void {
    for (const p of [...this.pending.values()]) {
      if (p.did === did) p.reject(new AppError(502, 'agent_disconnected', 'the agent disconnected before answering'));
    }
  }
}
