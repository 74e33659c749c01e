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
 * - Storing co-signed certificates (batched, src/services/certificates.ts) and agent sessions
 *   (src/services/agent-sessions.ts).
 * - Decommissioning an agent: its socket is dropped through the AgentLink port first.
 * - lastSeen, written in batches every AGENT_LAST_SEEN_WRITE_SECONDS: the connected agents
 *   active since the last batch (the AgentPresence port), and those that disconnected meanwhile.
 *   Whether an agent is online is never stored; it is the gateway's live state.
 */
import { fromPromise } from 'xstate';
import type { AgentDoc, RegistrationDoc, WorkspaceDoc } from '../store/collections.js';
import type { Capability } from '../domain/capabilities.js';
import type { BulkUpdateOp } from '../store/types.js';
import type { Principal, UserPrincipal } from '../domain/principal.js';
import { AGENT_ACTOR_KIND, agentMachine, type AgentActorEvent, type ApprovalInput, type RejectionInput } from '../actors/agent.js';
import { CLOSE } from '../domain/agent-protocol.js';
import { can } from '../domain/permissions.js';
import { CertificateStore } from './certificates.js';
import { AgentSessions } from './agent-sessions.js';
import { addAgentToWorkspace, agentWorkspaceIds, memberRole, primaryWorkspaceOf } from './workspaces.js';
import {
  createRegistration,
  latestRegistrationOf,
  pendingRegistrationOf,
  publishRegistration,
  type RegistrationInput,
  type RegistrationOrigin,
  type RegistrationOutcome,
  toPendingRegistrationView,
  type PendingRegistrationPage,
} from './registrations.js';
import { PendingRegistrations } from './registration-limits.js';
import { AppError, badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import type { PolicyService } from './policies.js';
import type { ServiceCore } from './core.js';
import type { AgentActors } from './agent-actors.js';
import type { AgentLink, AgentPresence, FeedPublisher } from './ports.js';
import { removeActor } from './actor-commands.js';

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
const LAST_SEEN_CHUNK = 100;

export class FleetService {
  readonly certificates: CertificateStore;
  readonly agentSessions: AgentSessions;
  /** The places of pending registrations, within AGENT_PENDING_REGISTRATIONS_MAX and its per-address limit. */
  readonly pending: PendingRegistrations;
  private readonly decisionListeners = new Set<DecisionListener>();
  private readonly deletedHooks: AgentDeletedHook[] = [];
  private readonly changedHooks: Array<(did: string) => void> = [];
  private readonly seenHooks: Array<(did: string, at: number) => void> = [];
  /** lastSeen values of disconnected agents waiting to be written (read as the freshest value until then). */
  private readonly lastSeenPending = new Map<string, string>();
  private lastSeenTimer: NodeJS.Timeout | undefined;
  private lastSeenWriting: Promise<void> | null = null;

  private readonly policies: PolicyService;
  private readonly agentActors: AgentActors;
  private readonly agents: AgentLink;
  private readonly presence: AgentPresence;
  private readonly feed: FeedPublisher | undefined;
  /** The default workspace as it was at start (its id never changes): where unplaced agents go. */
  private readonly defaultWorkspace: WorkspaceDoc;
  /** Cluster mode: other nodes write lastSeen too. */
  private readonly clustered: boolean;

  constructor(
    private readonly ctx: ServiceCore,
    deps: { policies: PolicyService; agentActors: AgentActors; agents: AgentLink; presence: AgentPresence; defaultWorkspace: WorkspaceDoc; feed?: FeedPublisher },
  ) {
    this.feed = deps.feed;
    this.policies = deps.policies;
    this.agentActors = deps.agentActors;
    this.agents = deps.agents;
    this.presence = deps.presence;
    this.defaultWorkspace = deps.defaultWorkspace;
    this.clustered = ctx.config.cluster !== undefined;
    const onError = (err: unknown, what: string) => ctx.log.error({ err }, `fleet: ${what} failed`);
    this.certificates = new CertificateStore(ctx.c, onError);
    this.agentSessions = new AgentSessions(ctx.c, ctx.config.sessionTtlMs, (m) => ctx.identity.sign(m));
    this.pending = new PendingRegistrations(ctx.config.agentPendingRegistrationsMax, ctx.config.agentPendingRegistrationsPerAddressMax);
  }

  /** Defines the agent actor kind, restores online actors as offline, starts the lastSeen writer. */
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
      input: (id) => ({ did: id, status: this.agentActors.startStatus(id) }),
      idleMs: ctx.config.agentActorIdleMs,
      writeDelayMs: ctx.config.agentActorWriteDelayMs,
    });
    // A process that stopped without closing its sockets (a crash) left online snapshots behind.
    // In a cluster the same is done for each shard this node takes (its owner may have died).
    if (!ctx.placement.clustered) await this.settleOnline();
    else ctx.placement.onAcquired((shard) => this.settleOnline(shard));
    ctx.placement.handle('agent.decide', async (data) => {
      const { registrationId, event, target } = data as { registrationId: string; event: AgentActorEvent; target: 'active' | 'rejected' };
      const reg = await ctx.c.registrations.findById(registrationId);
      if (!reg) throw notFound(`no registration ${registrationId}`);
      if (reg.status !== 'pending') throw conflict(`registration ${registrationId} is already ${reg.status}`, 'already_decided');
      await this.decideHere(reg, event, target);
      return null;
    });
    this.lastSeenTimer = setInterval(
      () => this.writeLastSeen().catch((err: unknown) => ctx.log.error({ err }, 'writing lastSeen failed')),
      ctx.config.agentLastSeenWriteMs,
    );
    this.lastSeenTimer.unref();
  }

  /**
   * Agent actors stored as online whose agent is connected nowhere are told they are offline (all
   * of them at start in one process; in a cluster those of a shard this node takes).
   */
  private async settleOnline(shard?: number): Promise<void> {
    const { ctx } = this;
    const online = await ctx.actors.restoreAll(
      AGENT_ACTOR_KIND,
      (p) => {
        const value = (p as { value?: { active?: { connection?: string } } }).value;
        return value?.active?.connection === 'online';
      },
      shard,
    );
    for (const did of online) if (shard === undefined || !this.agents.isOnline(did)) await ctx.actors.send(AGENT_ACTOR_KIND, did, { type: 'DISCONNECTED' });
  }

  async stop(): Promise<void> {
    if (this.lastSeenTimer) clearInterval(this.lastSeenTimer);
    await this.agentActors.drain();
    await this.writeLastSeen();
    await this.certificates.flush();
  }

  onDecision(listener: DecisionListener): void {
    this.decisionListeners.add(listener);
  }

  // -------------------------------------------------------------------------------------------
  // Registration and decisions

  /**
   * Registers an agent (a pending registration and agent record), or answers its pending one.
   * `auditAs`: who asked, when the registration is to be audited (over HTTP).
   */
  async register(input: RegistrationInput, origin: RegistrationOrigin, auditAs?: Principal | 'system'): Promise<RegistrationOutcome> {
    const outcome = await createRegistration(this.ctx.c, input, origin, this.defaultWorkspace, this.pending);
    if (outcome.created) {
      const { agent, registration } = outcome;
      await this.agentActors.ensure(agent._id, 'pending');
      this.emitChanged(agent._id);
      this.ctx.log.info(
        { agent: agent.name, agentDid: agent._id, registrationId: registration._id, requestedCapabilities: agent.requestedCapabilities },
        `agent "${agent.name}" registered and awaits approval: approve it with '${this.ctx.config.stewardCommand} registrations approve ${registration._id} --capabilities ${agent.requestedCapabilities.join(',')}', or on the dashboard's Registrations screen`,
      );
      publishRegistration(this.feed, registration, 'pending');
    }
    if (outcome.created && auditAs) {
      const { agent } = outcome;
      await this.ctx.audit.record(auditAs, {
        action: 'agent.register',
        targetType: 'agent',
        target: agent._id,
        details: { name: agent.name, requestedCapabilities: agent.requestedCapabilities, via: origin.via },
      });
    }
    return outcome;
  }

  /** The agent record of a DID (any status); null for an unknown agent. */
  agent(did: string): Promise<AgentDoc | null> {
    return this.ctx.c.agents.findById(did);
  }

  /** The id of a pending agent's registration (what its socket is told while it waits). */
  async pendingRegistrationId(agent: AgentDoc): Promise<string> {
    const reg = await pendingRegistrationOf(this.ctx.c, agent._id);
    return reg?._id ?? agent.registrationId ?? 'unknown';
  }

  /** Why a rejected agent was rejected (what its socket is told before it is closed). */
  async rejectionReason(did: string): Promise<string> {
    return (await latestRegistrationOf(this.ctx.c, did))?.reason ?? 'rejected';
  }

  /** Pending registrations, oldest first, one page at a time. */
  async pendingRegistrations(page: number, pageSize: number): Promise<PendingRegistrationPage> {
    const filter = { status: 'pending' };
    const [total, pending] = await Promise.all([
      this.ctx.c.registrations.count(filter),
      this.ctx.c.registrations.find(filter, { sort: { requestedAt: 1, _id: 1 }, skip: (page - 1) * pageSize, limit: pageSize }),
    ]);
    return { registrations: pending.map(toPendingRegistrationView), total, page, pageSize, totalPages: Math.ceil(total / pageSize) };
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
    publishRegistration(this.feed, reg, 'approved');
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
    publishRegistration(this.feed, reg, 'rejected');
  }

  /**
   * Sends a decision to the agent's actor and waits for its outcome. The state check and the send
   * happen in one synchronous step, so a concurrent second decision finds the actor no longer
   * pending (409).
   */
  private async decide(reg: RegistrationDoc, event: AgentActorEvent, target: 'active' | 'rejected'): Promise<void> {
    if (!this.ctx.placement.clustered) return this.decideHere(reg, event, target);
    // Cluster mode: on the node that holds the agent's actor (this one too, through the placement,
    // so a release of the shard waits for it). Lost there or back: 504, and the registration's
    // status (one conditional update) says whether the decision was made.
    await this.ctx.placement.run(`${AGENT_ACTOR_KIND}:${reg.agentDid}`, 'agent.decide', { registrationId: reg._id, event, target }, DECISION_TIMEOUT_MS + 1000);
  }

  private async decideHere(reg: RegistrationDoc, event: AgentActorEvent, target: 'active' | 'rejected'): Promise<void> {
    const actor = await this.agentActors.actorOf(reg.agentDid, 'pending');
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
        else if (value === 'pending') this.undecided(reg._id).then(finish, finish);
      };
      sub = actor.subscribe({ next: check, error: (err: unknown) => finish(err) });
      actor.send(event);
    });
    // A decision is not left to the write delay: after a crash the actor must not be pending again.
    await this.ctx.actors.persist(AGENT_ACTOR_KIND, reg.agentDid);
  }

  /**
   * The registration is decided by one conditional update (`status: pending` → decided), made
   * first: of two decisions racing — two nodes of a cluster, or a retry — exactly one matches, and
   * the other changes nothing and fails (its actor goes back to pending; `decide` answers 409).
   */
  /** Why a decision went back to pending: another decision won (409), or it could not be recorded (503). */
  private async undecided(registrationId: string): Promise<AppError> {
    const now = await this.ctx.c.registrations.findById(registrationId).catch(() => null);
    if (now && now.status !== 'pending') return conflict(`registration ${registrationId} is already ${now.status}`, 'already_decided');
    return new AppError(503, 'decision_failed', 'the decision could not be recorded; try again');
  }

  private async recordApproval(input: ApprovalInput): Promise<void> {
    const { c } = this.ctx;
    const reg = await pendingRegistrationOf(c, input.did);
    if (!reg) throw new Error(`no pending registration for ${input.did}`);
    const decidedAt = new Date().toISOString();
    const r = await c.registrations.updateOne(
      { _id: reg._id, status: 'pending' },
      { $set: { status: 'approved', approvedCapabilities: input.capabilities, decidedAt, decidedBy: input.by } },
    );
    if (r.matched === 0) throw new Error(`registration ${reg._id} was decided meanwhile`);
    await c.agents.updateOne({ _id: input.did }, { $set: { status: 'active', capabilities: input.capabilities } });
    await addAgentToWorkspace(c, input.did, reg.workspaceId, true);
    this.pending.release(input.did);
  }

  private async recordRejection(input: RejectionInput): Promise<void> {
    const { c } = this.ctx;
    const reg = await pendingRegistrationOf(c, input.did);
    if (!reg) throw new Error(`no pending registration for ${input.did}`);
    const decidedAt = new Date().toISOString();
    const r = await c.registrations.updateOne(
      { _id: reg._id, status: 'pending' },
      { $set: { status: 'rejected', reason: input.reason, decidedAt, decidedBy: input.by } },
    );
    if (r.matched === 0) throw new Error(`registration ${reg._id} was decided meanwhile`);
    await c.agents.updateOne({ _id: input.did }, { $set: { status: 'rejected' } });
    this.pending.release(input.did);
  }

  /** Runs `fn` after an agent's record was created, decided or deleted (its status or existence changed). */
  onAgentChanged(fn: (did: string) => void): void {
    this.changedHooks.push(fn);
  }

  private emitChanged(did: string): void {
    for (const fn of this.changedHooks) {
      try {
        fn(did);
      } catch (err) {
        this.ctx.log.error({ err, did }, 'agent change listener failed');
      }
    }
  }

  private emitDecision(did: string, decision: Decision): void {
    this.emitChanged(did);
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
   * DELETE /api/agents/:id: a global admin, or an admin of the agent's primary workspace, may
   * decommission it; an agent outside every workspace of the caller answers as an unknown one.
   */
  async decommission(person: UserPrincipal, did: string): Promise<void> {
    const { c } = this.ctx;
    const agent = await c.agents.findById(did);
    if (!agent) throw notFound(`no agent ${did}`);
    if (!person.isAdmin) {
      const theirs = await c.workspaceMembers.count({ userId: person.userId, workspaceId: { $in: await agentWorkspaceIds(c, agent._id) } });
      if (theirs === 0) throw notFound(`no agent ${did}`);
      const primary = await primaryWorkspaceOf(c, agent._id);
      const role = primary ? await memberRole(c, person.userId, primary._id) : null;
      if (!can({ isGlobalAdmin: false, workspaceRole: role }, 'manageWorkspaceAgents')) {
        throw forbidden("deleting an agent needs the admin role in the agent's primary workspace (or global admin)");
      }
    }
    await this.deleteAgent(agent._id, person);
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
    this.agents.drop(did, CLOSE.rejected, 'decommissioned');
    this.lastSeenPending.delete(did);
    this.agentActors.forget(did);
    await ctx.sessions.endAllOf(did, 'the agent was removed');
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
    await removeActor(ctx, AGENT_ACTOR_KIND, did);
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
  // lastSeen

  /** Records the last activity of an agent that disconnected; written in the next batch. */
  seen(did: string, at: number): void {
    this.lastSeenPending.set(did, new Date(at).toISOString());
    for (const fn of this.seenHooks) fn(did, at);
  }

  /** Runs `fn` each time a disconnected agent's last activity is recorded (before it is written). */
  onSeen(fn: (did: string, at: number) => void): void {
    this.seenHooks.push(fn);
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
      const live = this.presence.collectActive();
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
        // In a cluster an agent may have moved on to another node, which writes a later value: never go back.
        if (value !== undefined) ops.push({ filter: { _id: dids[i]! }, update: this.clustered ? { $max: { lastSeen: value } } : { $set: { lastSeen: value } } });
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
