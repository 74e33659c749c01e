/**
 * The fleet: the agents' domain operations that the gateway, the routes and the policy service
 * share.
 *
 * - Defines the agent actor kind on the actor host (src/actors/agent.ts) and provides its IO
 *   (recording an approval or a rejection). After a restart every agent actor that was online is
 *   restored and told it is offline: agents are offline until they reconnect.
 * - Registration, approval and rejection (the decisions go through the agent's actor, which
 *   serialises them: of two concurrent decisions, the second gets 409), within the limits on
 *   pending registrations (src/services/registration-limits.ts).
 * - The certificate terms of an agent (its effective policy, src/domain/policy.ts), issuing and
 *   signing certificates, storing co-signed ones (batched, src/services/certificates.ts), and
 *   agent sessions (src/services/agent-sessions.ts).
 * - lastSeen, written in batches every AGENT_LAST_SEEN_WRITE_SECONDS: the connected agents
 *   active since the last batch, and those that disconnected meanwhile. Whether an agent is online
 *   is never stored; it is the gateway's live state.
 */
import { fromPromise, type AnyActorRef } from 'xstate';
import type { AppContext } from '../server.js';
import type { AgentDoc, RegistrationDoc } from '../store/collections.js';
import type { Capability } from '../domain/capabilities.js';
import type { BulkUpdateOp } from '../store/types.js';
import type { Principal } from '../domain/principal.js';
import { AGENT_ACTOR_KIND, agentMachine, type AgentActorEvent, type ApprovalInput, type RejectionInput } from '../actors/agent.js';
import { certificateBytes, newCertificate, type Certificate, type CertificateTerms } from '../domain/certificate.js';
import { termsFor } from '../domain/policy.js';
import { CLOSE } from '../domain/agent-protocol.js';
import { yieldToLoop } from '../domain/time-slice.js';
import { CertificateStore } from './certificates.js';
import { AgentSessions } from './agent-sessions.js';
import { addAgentToWorkspace } from './workspaces.js';
import {
  createRegistration,
  pendingRegistrationOf,
  type RegistrationInput,
  type RegistrationOrigin,
  type RegistrationOutcome,
} from './registrations.js';
import { PendingRegistrations } from './registration-limits.js';
import { AppError, badRequest, conflict, notFound } from '../domain/errors.js';
import type { PolicyService } from './policies.js';

export interface IssuedCertificate {
  certificate: Certificate;
  bytes: Buffer;
  serverSignature: string;
}

/** What the gateway learns when a registration is decided. */
export type Decision = { status: 'approved' } | { status: 'rejected'; reason: string };

export interface DecisionListener {
  (did: string, decision: Decision): void;
}

/**
 * Runs after an agent was decommissioned (DELETE /api/agents/:id), once the fleet's own records
 * are gone; `agent` is the document as it was. Areas that keep per-agent data subscribe here.
 */
export type AgentDeletedHook = (agent: AgentDoc) => Promise<void> | void;

const DECISION_TIMEOUT_MS = 15_000;
/** Actor events delivered per turn of the event loop (dropped ones are not counted). */
const TELL_CHUNK = 128;
/** How long "reissue offered" waits for the co-signature that would make it moot. */
const OFFER_HOLD_MS = 1000;

/** Connected agents' lastSeen (ms), DIDs and times at the same index. */
export interface LiveSeen {
  dids: string[];
  ms: number[];
}

interface Told {
  did: string;
  event: AgentActorEvent;
  status: AgentDoc['status'];
  dropped: boolean;
  /** performance.now() before which a held event is not delivered (0: at once). */
  due: number;
}
const LAST_SEEN_CHUNK = 100;

export class FleetService {
  readonly certificates: CertificateStore;
  readonly agentSessions: AgentSessions;
  /** The places of pending registrations, within AGENT_PENDING_REGISTRATIONS_MAX and its per-address limit. */
  readonly pending: PendingRegistrations;
  /** Set by PolicyService at construction. */
  policies!: PolicyService;
  private readonly decisionListeners = new Set<DecisionListener>();
  private readonly deletedHooks: AgentDeletedHook[] = [];
  /** Set by the gateway: ends the agent's socket with `code` and forgets it (no offline event reaches its actor). */
  dropConnection: (did: string, code: number, reason: string) => void = () => undefined;
  /** Where a brand-new actor starts, read synchronously by the actor kind's `input`. */
  private readonly bootStatus = new Map<string, AgentDoc['status']>();
  /** lastSeen values of disconnected agents waiting to be written (read as the freshest value until then). */
  private readonly lastSeenPending = new Map<string, string>();
  /**
   * Set by the gateway: the connected agents active since they were last collected (their DIDs and
   * lastSeen ms, at the same index), each marked collected.
   */
  collectLiveSeen: () => LiveSeen = () => ({ dids: [], ms: [] });
  private lastSeenTimer: NodeJS.Timeout | undefined;
  private lastSeenWriting: Promise<void> | null = null;

  constructor(private readonly ctx: AppContext) {
    const onError = (err: unknown, what: string) => ctx.log.error({ err }, `fleet: ${what} failed`);
    this.certificates = new CertificateStore(ctx.c, onError);
    this.agentSessions = new AgentSessions(ctx.c, ctx.config.sessionTtlMs, (m) => ctx.identity.sign(m));
    this.pending = new PendingRegistrations(ctx.config.agentPendingRegistrationsMax, ctx.config.agentPendingRegistrationsPerAddressMax);
  }

  /** Defines the agent actor kind, restores online actors as offline, installs the agent lookup. */
  async start(): Promise<void> {
    const { ctx } = this;
    await this.pending.load(ctx.c);
    ctx.actors.define(AGENT_ACTOR_KIND, {
      machine: agentMachine.provide({
        actors: {
          recordApproval: fromPromise<void, ApprovalInput>(({ input }) => this.recordApproval(input)),
          recordRejection: fromPromise<void, RejectionInput>(({ input }) => this.recordRejection(input)),
        },
      }),
      input: (id) => ({ did: id, status: this.bootStatus.get(id) ?? 'pending' }),
      idleMs: ctx.config.agentActorIdleMs,
      writeDelayMs: ctx.config.agentActorWriteDelayMs,
    });
    // A process that stopped without closing its sockets (a crash) left online snapshots behind.
    const online = await ctx.actors.restoreAll(AGENT_ACTOR_KIND, (p) => {
      const value = (p as { value?: { active?: { connection?: string } } }).value;
      return value?.active?.connection === 'online';
    });
    for (const did of online) await ctx.actors.send(AGENT_ACTOR_KIND, did, { type: 'DISCONNECTED' });
    ctx.agentLookup = async (did) => {
      const agent = await ctx.c.agents.findById(did);
      return agent && agent.status === 'active' ? { name: agent.name } : null;
    };
    this.lastSeenTimer = setInterval(
      () => this.writeLastSeen().catch((err: unknown) => ctx.log.error({ err }, 'writing lastSeen failed')),
      ctx.config.agentLastSeenWriteMs,
    );
    this.lastSeenTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.lastSeenTimer) clearInterval(this.lastSeenTimer);
    await this.drainTold();
    await this.writeLastSeen();
    await this.certificates.flush();
  }

  onDecision(listener: DecisionListener): void {
    this.decisionListeners.add(listener);
  }

  // -------------------------------------------------------------------------------------------
  // Actors

  /** The agent's actor; `status` says where a brand-new one starts (an agent stored without a snapshot). */
  async actorOf(did: string, status?: AgentDoc['status']): Promise<AnyActorRef> {
    if (status) this.bootStatus.set(did, status);
    try {
      return (await this.ctx.actors.get(AGENT_ACTOR_KIND, did)) as AnyActorRef;
    } finally {
      if (status) this.bootStatus.delete(did);
    }
  }

  /**
   * Tells an agent's actor what happened on its socket. Socket events are queued and delivered
   * in order, a chunk per turn of the event loop, so that a burst (ten thousand re-certifications)
   * does not starve the sockets themselves. "Reissue offered" is held back for
   * `OFFER_HOLD_MS` before it is delivered (and so is everything queued after it, to keep the
   * order): when the agent co-signs within that time, which is the common case, the certificate
   * is stored before the offer was delivered and the offer is dropped, so the actor goes
   * straight to the new certificate (one transition and one snapshot write instead of two). An
   * agent that is slow to co-sign shows `reissuePending` once the hold is over.
   * Failures are logged; the actor is not essential to the socket.
   */
  tell(did: string, event: AgentActorEvent, status: AgentDoc['status'] = 'active'): void {
    const item: Told = { did, event, status, dropped: false, due: 0 };
    if (event.type === 'CERTIFICATE_STORED') {
      const offered = this.offered.get(did);
      if (offered && (offered.event as { serial: string }).serial === event.serial) offered.dropped = true;
    } else if (event.type === 'REISSUE_OFFERED') {
      item.due = performance.now() + OFFER_HOLD_MS;
      this.offered.set(did, item);
    }
    this.told.push(item);
    if (!this.telling) {
      this.telling = true;
      setImmediate(this.deliver);
    }
  }

  /** Delivers every queued actor event (held offers too); resolves once all are handed over. */
  async drainTold(): Promise<void> {
    this.draining = true;
    if (this.holdTimer) {
      // Waiting out a hold: deliver now instead.
      clearTimeout(this.holdTimer);
      this.holdTimer = null;
      setImmediate(this.deliver);
    }
    try {
      while (this.told.length > 0 || this.telling) await yieldToLoop();
    } finally {
      this.draining = false;
    }
  }

  private readonly told: Told[] = [];
  private readonly offered = new Map<string, Told>();
  private telling = false;
  private draining = false;
  private told0 = 0;
  private holdTimer: NodeJS.Timeout | null = null;
  private readonly deliver = (): void => {
    this.holdTimer = null;
    const now = performance.now();
    let delivered = 0;
    while (this.told0 < this.told.length && delivered < TELL_CHUNK) {
      const item = this.told[this.told0]!;
      if (!item.dropped && item.due > now && !this.draining) {
        // A held offer heads the queue: wait for it (the events behind it keep their order).
        this.compactTold();
        this.holdTimer = setTimeout(this.deliver, Math.max(1, Math.ceil(item.due - now)));
        return;
      }
      this.told0++;
      if (this.offered.get(item.did) === item) this.offered.delete(item.did);
      if (item.dropped) continue;
      delivered++;
      // An actor in memory takes the event at once; one still to be loaded (or made) after the
      // load. The events of one agent keep their order either way: a load completes, and its
      // events are handed over, before the next turn's delivery can find the actor in memory.
      const live = this.ctx.actors.getLive(AGENT_ACTOR_KIND, item.did);
      if (live) {
        try {
          live.send(item.event as never);
        } catch (err) {
          this.ctx.log.warn({ err, did: item.did, event: item.event.type }, 'agent actor refused an event');
        }
      } else {
        this.actorOf(item.did, item.status).then(
          (actor) => actor.send(item.event),
          (err: unknown) => this.ctx.log.warn({ err, did: item.did, event: item.event.type }, 'agent actor unavailable'),
        );
      }
    }
    this.compactTold();
    if (this.told.length > 0) setImmediate(this.deliver);
    else this.telling = false;
  };

  /** Drops delivered items from the head of the queue. */
  private compactTold(): void {
    if (this.told0 === 0) return;
    this.told.splice(0, this.told0);
    this.told0 = 0;
  }

  // -------------------------------------------------------------------------------------------
  // Registration and decisions

  async register(input: RegistrationInput, origin: RegistrationOrigin): Promise<RegistrationOutcome> {
    const outcome = await createRegistration(this.ctx.c, input, origin, this.ctx.defaultWorkspace, this.pending);
    if (outcome.created) await this.actorOf(outcome.agent._id, 'pending');
    return outcome;
  }

  async approve(registrationId: string, capabilities: Capability[], by: Principal): Promise<{ agentId: string }> {
    const reg = await this.ctx.c.registrations.findById(registrationId);
    if (!reg) throw notFound(`no registration ${registrationId}`);
    if (reg.status !== 'pending') throw conflict(`registration ${registrationId} is already ${reg.status}`, 'already_decided');
    const requested = new Set(reg.requestedCapabilities);
    const outside = capabilities.filter((c) => !requested.has(c));
    if (outside.length > 0) {
      throw badRequest(`capabilities not requested by the agent: ${outside.join(', ')}`, 'capabilities_not_requested');
    }
    await this.decide(reg, { type: 'APPROVE', capabilities: [...new Set(capabilities)], by: by.did }, 'active');
    await this.ctx.audit.record(by, {
      action: 'registration.approve',
      targetType: 'agent',
      target: reg.agentDid,
      details: { registrationId, capabilities },
    });
    this.emitDecision(reg.agentDid, { status: 'approved' });
    return { agentId: reg.agentDid };
  }

  async reject(registrationId: string, reason: string, by: Principal): Promise<void> {
    const reg = await this.ctx.c.registrations.findById(registrationId);
    if (!reg) throw notFound(`no registration ${registrationId}`);
    if (reg.status !== 'pending') throw conflict(`registration ${registrationId} is already ${reg.status}`, 'already_decided');
    await this.decide(reg, { type: 'REJECT', reason, by: by.did }, 'rejected');
    await this.ctx.audit.record(by, {
      action: 'registration.reject',
      targetType: 'agent',
      target: reg.agentDid,
      details: { registrationId, reason },
    });
    this.emitDecision(reg.agentDid, { status: 'rejected', reason });
  }

  /**
   * Sends a decision to the agent's actor and waits for its outcome. The state check and the send
   * happen in one synchronous step, so a concurrent second decision finds the actor no longer
   * pending (409).
   */
  private async decide(reg: RegistrationDoc, event: AgentActorEvent, target: 'active' | 'rejected'): Promise<void> {
    const actor = await this.actorOf(reg.agentDid, 'pending');
    const before = actor.getSnapshot() as { value: unknown; status: string };
    if (before.value !== 'pending' || before.status !== 'active') {
      throw conflict(`registration ${reg._id} is already being decided or decided`, 'already_decided');
    }
    await new Promise<void>((resolve, reject) => {
      let sub: { unsubscribe(): void } | undefined;
      const timer = setTimeout(() => finish(new AppError(503, 'decision_timeout', 'the decision could not be recorded in time; try again')), DECISION_TIMEOUT_MS);
      const finish = (err?: unknown) => {
        clearTimeout(timer);
        sub?.unsubscribe();
        if (err) reject(err);
        else resolve();
      };
      const check = (snap: { value: unknown; status: string }) => {
        const value = snap.value;
        if (target === 'rejected' ? value === 'rejected' : typeof value === 'object' && value !== null && 'active' in value) finish();
        else if (value === 'pending') finish(new AppError(503, 'decision_failed', 'the decision could not be recorded; try again'));
      };
      sub = actor.subscribe({ next: check, error: (err: unknown) => finish(err) });
      actor.send(event);
    });
    // A decision is not left to the write delay: after a crash the actor must not be pending again.
    await this.ctx.actors.persist(AGENT_ACTOR_KIND, reg.agentDid);
  }

  private async recordApproval(input: ApprovalInput): Promise<void> {
    const { c } = this.ctx;
    const reg = await pendingRegistrationOf(c, input.did);
    if (!reg) throw new Error(`no pending registration for ${input.did}`);
    const decidedAt = new Date().toISOString();
    await c.agents.updateOne({ _id: input.did }, { $set: { status: 'active', capabilities: input.capabilities } });
    await addAgentToWorkspace(c, input.did, reg.workspaceId, true);
    await c.registrations.updateOne(
      { _id: reg._id, status: 'pending' },
      { $set: { status: 'approved', approvedCapabilities: input.capabilities, decidedAt, decidedBy: input.by } },
    );
    this.pending.release(input.did);
  }

  private async recordRejection(input: RejectionInput): Promise<void> {
    const { c } = this.ctx;
    const reg = await pendingRegistrationOf(c, input.did);
    if (!reg) throw new Error(`no pending registration for ${input.did}`);
    const decidedAt = new Date().toISOString();
    await c.agents.updateOne({ _id: input.did }, { $set: { status: 'rejected' } });
    await c.registrations.updateOne(
      { _id: reg._id, status: 'pending' },
      { $set: { status: 'rejected', reason: input.reason, decidedAt, decidedBy: input.by } },
    );
    this.pending.release(input.did);
  }

  private emitDecision(did: string, decision: Decision): void {
    for (const l of this.decisionListeners) {
      try {
        l(did, decision);
      } catch (err) {
        this.ctx.log.error({ err, did }, 'decision listener failed');
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // Decommissioning

  /** Runs `fn` after an agent is deleted (see AgentDeletedHook). A failing hook is logged; the deletion stands. */
  onAgentDeleted(fn: AgentDeletedHook): void {
    this.deletedHooks.push(fn);
  }

  /**
   * Decommissions an agent, whatever its status (active, pending or rejected): closes its socket
   * with 4403, ends its session, deletes its document, workspace memberships, agent-scoped
   * policies, certificates, registrations, grants naming it and its actor snapshot, then runs the
   * onAgentDeleted hooks (skills overrides, token usage, channel memberships, ...). The same key
   * registering afterwards starts over as a new pending registration. 404 for an unknown agent.
   */
  async deleteAgent(did: string, by: Principal): Promise<AgentDoc> {
    const { ctx } = this;
    const { c } = ctx;
    const agent = await c.agents.findById(did);
    if (!agent) throw notFound(`no agent ${did}`);
    // The socket first, so no frame of this agent is handled while its records go.
    this.dropConnection(did, CLOSE.rejected, 'decommissioned');
    this.lastSeenPending.delete(did);
    for (const item of this.told) if (item.did === did) item.dropped = true;
    await ctx.sessions.endAllOf(did);
    this.agentSessions.forget(did);
    await c.agents.deleteOne({ _id: did });
    await this.certificates.flush(); // a certificate being stored now must not outlive the agent
    const [memberships, policies, certificates, registrations, grants] = await Promise.all([
      c.workspaceAgents.deleteMany({ agentDid: did }),
      this.policies.forgetAgent(did),
      c.certificates.deleteMany({ agentDid: did }),
      c.registrations.deleteMany({ agentDid: did }),
      c.grants.deleteMany({ agentDid: did }),
    ]);
    this.pending.release(did);
    await ctx.actors.remove(AGENT_ACTOR_KIND, did);
    for (const fn of this.deletedHooks) {
      try {
        await fn(agent);
      } catch (err) {
        ctx.log.error({ err, did }, 'agent-deleted hook failed');
      }
    }
    await ctx.audit.record(by, {
      action: 'agent.delete',
      targetType: 'agent',
      target: did,
      details: { name: agent.name, status: agent.status, memberships, policies, certificates, registrations, grants },
    });
    return agent;
  }

  // -------------------------------------------------------------------------------------------
  // Certificates

  /** The terms an agent's certificate must carry now (its effective policy, else its approved capabilities). */
  async termsOf(agent: Pick<AgentDoc, '_id' | 'capabilities'>): Promise<CertificateTerms> {
    // Without any workspace policy the primary workspace cannot matter: spare the read.
    const primary = this.policies.hasWorkspacePolicies() ? await this.primaryWorkspaceId(agent._id) : null;
    return termsFor(this.policies.effective(agent._id, primary), agent.capabilities);
  }

  async primaryWorkspaceId(did: string): Promise<string | null> {
    const all = await this.ctx.c.workspaceAgents.find({ agentDid: did }, { projection: { workspaceId: 1, isPrimary: 1, joinedAt: 1 } });
    if (all.length === 0) return null;
    return (all.find((m) => m.isPrimary) ?? all.sort((a, b) => (a.joinedAt < b.joinedAt ? -1 : 1))[0]!).workspaceId;
  }

  /** A new certificate with the given terms, signed by the server. */
  async issue(subject: string, subjectPublicKey: string, terms: CertificateTerms): Promise<IssuedCertificate> {
    const certificate = newCertificate({ subject, subjectPublicKey, issuer: this.ctx.identity.did, terms });
    const bytes = certificateBytes(certificate);
    return { certificate, bytes, serverSignature: await this.ctx.identity.signOffThread(bytes) };
  }

  // -------------------------------------------------------------------------------------------
  // lastSeen

  /** Records the last activity of an agent that disconnected; written in the next batch. */
  seen(did: string, at: number): void {
    this.lastSeenPending.set(did, new Date(at).toISOString());
  }

  /** A lastSeen newer than the stored one, when a write is pending. */
  pendingLastSeen(did: string): string | undefined {
    return this.lastSeenPending.get(did);
  }

  /**
   * Writes pending lastSeen values (of agents that disconnected), then those of connected agents
   * active since the last write, a chunk per store call. The round works from two flat lists
   * (DIDs, and times), and a chunk's values are made just before it is written: a round over a
   * large fleet makes little garbage and keeps little alive while it waits on the store.
   */
  writeLastSeen(): Promise<void> {
    if (this.lastSeenWriting) return this.lastSeenWriting;
    this.lastSeenWriting = (async () => {
      const pending = [...this.lastSeenPending.keys()];
      if (!(await this.writeSeen(pending, (i) => this.lastSeenPending.get(pending[i]!)))) return;
      const live = this.collectLiveSeen();
      await this.writeSeen(live.dids, (i) => new Date(live.ms[i]!).toISOString());
    })().finally(() => {
      this.lastSeenWriting = null;
    });
    return this.lastSeenWriting;
  }

  /**
   * Writes lastSeen for `dids` (the value of the i-th from `at(i)`; none: skipped), a chunk per
   * store call. A value written is no longer pending (unless a newer one came meanwhile); after a
   * failure, the chunk's values are kept pending for the next round and false is returned.
   */
  private async writeSeen(dids: readonly string[], at: (i: number) => string | undefined): Promise<boolean> {
    const values: string[] = [];
    for (let from = 0; from < dids.length; from += LAST_SEEN_CHUNK) {
      const to = Math.min(dids.length, from + LAST_SEEN_CHUNK);
      const ops: BulkUpdateOp[] = [];
      values.length = 0;
      for (let i = from; i < to; i++) {
        const value = at(i);
        values.push(value ?? '');
        if (value !== undefined) ops.push({ filter: { _id: dids[i]! }, update: { $set: { lastSeen: value } } });
      }
      try {
        await this.ctx.c.agents.bulkUpdate(ops);
      } catch (err) {
        this.ctx.log.error({ err }, 'writing lastSeen failed; will retry');
        // Keep what the chunk carried for the next round, unless a newer value is already waiting.
        for (let i = from; i < to; i++) {
          if (values[i - from] !== '' && !this.lastSeenPending.has(dids[i]!)) this.lastSeenPending.set(dids[i]!, values[i - from]!);
        }
        return false;
      }
      for (let i = from; i < to; i++) if (this.lastSeenPending.get(dids[i]!) === values[i - from]) this.lastSeenPending.delete(dids[i]!);
    }
    return true;
  }
}
