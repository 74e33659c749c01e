/**
 * Policies (interface §2.4, §4.4, §3, §6): create, list, read, delete, and the effective policy
 * of an agent (src/domain/policy.ts).
 *
 * Unexpired policies are kept in memory, indexed by agent and by workspace, so the effective
 * policy of an agent costs no store read beyond its primary workspace. Expired policies stay
 * stored (listed with includeExpired=true) and simply stop counting.
 *
 * On create and delete, every connected agent whose effective policy changes gets
 * update_capabilities and a fresh certificate_offer at once (the AgentCertification port);
 * `sentTo` lists exactly those DIDs. The affected agents of a workspace policy are found with
 * one query (the workspace's primary memberships), never one store round trip per agent.
 * Offline agents get the new terms when they next connect (the gateway compares their stored
 * certificate with `termsOf`).
 *
 * In a cluster every node keeps the same cache and re-certifies its own connected agents: a
 * change is stored, then gathered from every other node (`policy.changed`: each applies it to its
 * cache, re-certifies its agents whose terms changed, and answers their DIDs), so `sentTo` is the
 * union of what every node sent within the gather's deadline (CLUSTER_REQUEST_TIMEOUT_MS). A node
 * that did not answer in time (or missed the message) catches up at its next refresh (every
 * minute, and when its bus is back after an outage): it re-reads the policies and re-certifies
 * its agents for each change it finds; its agents that reconnect meanwhile get the new terms at
 * their handshake, which compares their certificate's terms with `termsOf`.
 *
 * Whoever follows which agents' terms changed (the fleet summary counts the agents whose stored
 * certificate is out of date) hears it through `onTermsChanged`: on every create and delete, here
 * or from another node, and when a policy expires (a timer armed for the next expiry; an expiry
 * re-certifies nobody, the agents get their new terms at their next handshake).
 */
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import { capabilityList, timestamp } from '../domain/views.js';
import type { ServiceCore } from './core.js';
import type { AgentCertification, PeerNodes } from './ports.js';
import type { AgentDoc, PolicyDoc, WorkspaceAgentDoc } from '../store/collections.js';
import type { Capability } from '../domain/capabilities.js';
import type { Principal } from '../domain/principal.js';
import { effectivePolicy, isExpired, newerFirst, termsFor, type PolicyResourceLimits } from '../domain/policy.js';
import type { CertificateTerms } from '../domain/certificate.js';
import type { Filter } from '../store/types.js';
import { resolveWorkspace } from './workspaces.js';
import { badRequest, notFound } from '../domain/errors.js';

/** resourceLimits of a policy (interface §2.4). */
export const ResourceLimitsView = z
  .strictObject({
    maxTokensPerDay: z.number().int().min(1).optional(),
    maxRequestsPerHour: z.number().int().min(1).optional(),
    allowedDomains: z.array(z.string()).optional(),
  })
  .meta({ id: 'ResourceLimits' });

/** A policy (interface §2.4). */
export const PolicyView = z
  .strictObject({
    id: z.string(),
    agentDid: z.string().nullable().meta({ description: 'null for a workspace-scoped policy' }),
    workspaceId: z.string().nullable(),
    capabilities: capabilityList,
    resourceLimits: ResourceLimitsView.nullable(),
    expiresAt: timestamp.nullable(),
    createdBy: z.string(),
    createdAt: timestamp,
  })
  .meta({ id: 'Policy' });
export type PolicyView = z.infer<typeof PolicyView>;

export function toPolicyView(p: PolicyDoc): PolicyView {
  return {
    id: p._id,
    agentDid: p.agentDid,
    workspaceId: p.workspaceId,
    capabilities: p.capabilities,
    resourceLimits: p.resourceLimits,
    expiresAt: p.expiresAt,
    createdBy: p.createdBy,
    createdAt: p.createdAt,
  };
}

export interface NewPolicy {
  agentDid?: string;
  workspaceId?: string;
  capabilities: Capability[];
  resourceLimits?: PolicyResourceLimits | null;
  expiresAt?: string | null;
}

/** How often a node of a cluster re-reads the policies (to catch a change whose message it missed). */
const CLUSTER_REFRESH_MS = 60_000;
/** The longest delay a timer takes (about 24.8 days); a later expiry re-arms the timer when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A membership, as far as the choice of the primary workspace goes. */
export type PrimaryChoice = Pick<WorkspaceAgentDoc, 'workspaceId' | 'isPrimary' | 'joinedAt'>;

/** The agent's primary workspace among its memberships (the earliest joined when none is marked); null without any. */
export function primaryWorkspace(memberships: readonly PrimaryChoice[]): string | null {
  let first: PrimaryChoice | null = null;
  for (const m of memberships) {
    if (m.isPrimary) return m.workspaceId;
    if (first === null || m.joinedAt < first.joinedAt) first = m;
  }
  return first?.workspaceId ?? null;
}

/** Told the agents whose terms may have changed (they may be offline, or unknown to this node's sockets). */
export type TermsListener = (dids: readonly string[]) => Promise<void> | void;

export class PolicyService {
  private byAgent = new Map<string, PolicyDoc[]>();
  private byWorkspace = new Map<string, PolicyDoc[]>();
  /** The unexpired policies that have an expiry (the fleet summary counts those expiring soon). */
  private readonly expiring = new Map<string, PolicyDoc>();
  /** The unexpired policies that have an expiry, for the expiry timer (`expiring` is pruned as it is read). */
  private readonly toExpire = new Map<string, PolicyDoc>();
  private expiryTimer: NodeJS.Timeout | undefined;
  private expiryAt = Infinity;
  private readonly termsListeners: TermsListener[] = [];
  /** The policies indexed, by id. */
  private byId = new Map<string, PolicyDoc>();
  private stopped = false;
  /** Bumped on every change of the policy set (lets a handshake notice a change made meanwhile). */
  version = 0;
  private refreshTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: ServiceCore,
    private readonly certification: AgentCertification,
    private readonly peers?: PeerNodes,
  ) {
    if (peers?.clustered) {
      peers.onGather('policy.changed', (data) => this.changedElsewhere(data as { op: 'create' | 'delete'; policy: PolicyDoc }));
      peers.onBroadcast('policy.agent-forgotten', (data) => this.forgetLocally((data as { did: string }).did));
      peers.onResync(() => this.refresh());
    }
  }

  /** Loads the unexpired policies into memory (in a cluster, and re-reads them every minute). */
  async load(): Promise<void> {
    for (const p of await this.unexpired()) this.index(p);
    if (this.peers?.clustered) {
      this.refreshTimer = setInterval(() => this.refresh().catch((err: unknown) => this.ctx.log.error({ err }, 're-reading the policies failed')), CLUSTER_REFRESH_MS);
      this.refreshTimer.unref();
    }
    this.armExpiry();
  }

  stop(): void {
    if (this.refreshTimer) clearInterval(this.refreshTimer);
    this.stopped = true;
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
  }

  /** Runs `fn` with the agents whose terms may have changed: a policy created or deleted (here or on another node) or expired. */
  onTermsChanged(fn: TermsListener): void {
    this.termsListeners.push(fn);
  }

  /** Tells the terms listeners; their failures are logged (each listener repairs its own). */
  private async termsChanged(dids: readonly string[]): Promise<void> {
    if (dids.length === 0) return;
    await Promise.all(
      this.termsListeners.map(async (fn) => {
        try {
          await fn(dids);
        } catch (err) {
          this.ctx.log.error({ err }, 'a listener of changed certificate terms failed');
        }
      }),
    );
  }

  /** Arms the timer for the next expiry of `toExpire`. */
  private armExpiry(): void {
    let next = Infinity;
    for (const p of this.toExpire.values()) next = Math.min(next, Date.parse(p.expiresAt!));
    this.armAt(next);
  }

  /** Arms the expiry timer for `at` (ms; Infinity: none). A policy deleted meanwhile leaves it armed: it then finds nothing. */
  private armAt(at: number): void {
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    this.expiryTimer = undefined;
    this.expiryAt = at;
    if (at === Infinity || this.stopped) return;
    this.expiryTimer = setTimeout(() => {
      this.expiryTimer = undefined;
      this.expired().catch((err: unknown) => this.ctx.log.error({ err }, 'handling expired policies failed'));
    }, Math.min(Math.max(at - Date.now(), 0), MAX_TIMER_MS));
    this.expiryTimer.unref();
  }

  /** Policies whose expiry has come: the agents they applied to have other terms now. */
  private async expired(): Promise<void> {
    const now = Date.now();
    const gone: PolicyDoc[] = [];
    for (const p of this.toExpire.values()) if (isExpired(p, now)) gone.push(p);
    for (const p of gone) this.toExpire.delete(p._id);
    if (gone.length > 0) this.version++;
    this.armExpiry();
    await Promise.all(gone.map((p) => this.tellExpired(p, 0)));
  }

  /** Tells the terms listeners who an expired policy applied to; a failed read is tried again later, backing off up to a minute. */
  private async tellExpired(p: PolicyDoc, attempt: number): Promise<void> {
    if (this.stopped) return;
    let dids: string[];
    try {
      dids = await this.affectedBy(p);
    } catch (err) {
      const delay = Math.min(1000 * 2 ** attempt, CLUSTER_REFRESH_MS);
      this.ctx.log.error({ err, policyId: p._id, retryInMs: delay }, 'reading the agents of an expired policy failed');
      setTimeout(() => void this.tellExpired(p, attempt + 1), delay).unref();
      return;
    }
    await this.termsChanged(dids);
  }

  private unexpired(): Promise<PolicyDoc[]> {
    const now = new Date().toISOString();
    return this.ctx.c.policies.find({ $or: [{ expiresAt: null }, { expiresAt: { $gt: now } }] });
  }

  /**
   * Cluster mode: re-reads the policies and re-certifies this node's agents for every policy that
   * came or went without this node hearing of it.
   */
  async refresh(): Promise<void> {
    const docs = await this.unexpired();
    const before = new Map<string, PolicyDoc>();
    for (const list of [...this.byAgent.values(), ...this.byWorkspace.values()]) for (const p of list) before.set(p._id, p);
    const after = new Map(docs.map((p) => [p._id, p]));
    const changed = [...docs.filter((p) => !before.has(p._id)), ...[...before.values()].filter((p) => !after.has(p._id))];
    if (changed.length === 0) return;
    this.byAgent = new Map();
    this.byWorkspace = new Map();
    this.byId = new Map();
    this.expiring.clear();
    this.toExpire.clear();
    for (const p of docs) this.index(p);
    this.armExpiry();
    this.version++;
    for (const p of changed) await this.reissueFor(p);
  }

  /** A policy created or deleted on another node: into this node's cache, and this node's agents re-certified. */
  private async changedElsewhere(change: { op: 'create' | 'delete'; policy: PolicyDoc }): Promise<string[]> {
    const { op, policy } = change;
    this.unindex(policy);
    if (op === 'create') this.index(policy);
    this.version++;
    return this.reissueFor(policy);
  }

  /** This node's re-certifications, and (in a cluster) every other node's: the union of their DIDs. */
  private async reissueEverywhere(op: 'create' | 'delete', policy: PolicyDoc): Promise<string[]> {
    const here = this.reissueFor(policy);
    if (!this.peers?.clustered) return here;
    const [mine, elsewhere] = await Promise.all([here, this.peers.gather<string[]>('policy.changed', { op, policy })]);
    return [...new Set([...mine, ...elsewhere.answers.flat()])];
  }

  /** Whether the policy is known here and not expired (a certificate carrying another is out of date). */
  inForce(policyId: string, now = Date.now()): boolean {
    const p = this.byId.get(policyId);
    return p !== undefined && !isExpired(p, now);
  }

  /** Whether any unexpired workspace-scoped policy exists (else an agent's workspace cannot matter). */
  hasWorkspacePolicies(): boolean {
    return this.byWorkspace.size > 0;
  }

  /** The effective policy of an agent whose primary workspace is `primaryWorkspaceId`. */
  effective(agentDid: string, primaryWorkspaceId: string | null, now = Date.now()): PolicyDoc | null {
    return effectivePolicy(this.byAgent.get(agentDid), primaryWorkspaceId ? this.byWorkspace.get(primaryWorkspaceId) : undefined, now);
  }

  /** The terms an agent's certificate must carry now (its effective policy, else its approved capabilities). */
  async termsOf(agent: Pick<AgentDoc, '_id' | 'capabilities'>): Promise<CertificateTerms> {
    return termsFor(this.effective(agent._id, await this.primaryIfItMatters(agent._id)), agent.capabilities);
  }

  /** The same as `termsOf`, for an agent whose memberships were read already (no store read). */
  termsWith(agent: Pick<AgentDoc, '_id' | 'capabilities'>, memberships: readonly PrimaryChoice[], now = Date.now()): CertificateTerms {
    return termsFor(this.effective(agent._id, primaryWorkspace(memberships), now), agent.capabilities);
  }

  /** The agent's primary workspace; null without any workspace policy, when it cannot matter (the read is spared). */
  private async primaryIfItMatters(did: string): Promise<string | null> {
    if (!this.hasWorkspacePolicies()) return null;
    return primaryWorkspace(await this.ctx.c.workspaceAgents.find({ agentDid: did }, { projection: { workspaceId: 1, isPrimary: 1, joinedAt: 1 } }));
  }

  async create(input: NewPolicy, by: Principal): Promise<{ policy: PolicyDoc; sentTo: string[] }> {
    const { c } = this.ctx;
    if (!input.agentDid && !input.workspaceId) throw badRequest('set agentDid, workspaceId or both', 'scope_required');
    if (input.expiresAt && Date.parse(input.expiresAt) <= Date.now()) throw badRequest('expiresAt must be in the future', 'validation_failed');
    let workspaceId: string | null = null;
    if (input.workspaceId) {
      const ws = await resolveWorkspace(c, input.workspaceId);
      if (!ws) throw notFound(`no workspace ${input.workspaceId}`);
      workspaceId = ws._id;
    }
    if (input.agentDid && !(await c.agents.findById(input.agentDid))) throw notFound(`no agent ${input.agentDid}`);
    const policy: PolicyDoc = {
      _id: newId(),
      agentDid: input.agentDid ?? null,
      workspaceId,
      capabilities: [...new Set(input.capabilities)],
      resourceLimits: input.resourceLimits ?? null,
      expiresAt: input.expiresAt ? new Date(input.expiresAt).toISOString() : null,
      createdBy: by.did,
      createdAt: new Date().toISOString(),
    };
    await c.policies.insertOne(policy);
    this.index(policy);
    this.version++;
    const sentTo = await this.reissueEverywhere('create', policy);
    await this.ctx.audit.record(by, {
      action: 'policy.create',
      targetType: 'policy',
      target: policy._id,
      details: { agentDid: policy.agentDid, workspaceId: policy.workspaceId, capabilities: policy.capabilities, sentTo: sentTo.length },
    });
    return { policy, sentTo };
  }

  async remove(id: string, by: Principal): Promise<{ sentTo: string[] }> {
    const { c } = this.ctx;
    const policy = await c.policies.findById(id);
    if (!policy) throw notFound(`no policy ${id}`);
    await c.policies.deleteOne({ _id: id });
    this.unindex(policy);
    this.version++;
    const sentTo = await this.reissueEverywhere('delete', policy);
    await this.ctx.audit.record(by, {
      action: 'policy.delete',
      targetType: 'policy',
      target: id,
      details: { agentDid: policy.agentDid, workspaceId: policy.workspaceId, sentTo: sentTo.length },
    });
    return { sentTo };
  }

  /** Deletes an agent's agent-scoped policies (the agent is being deleted: nobody is re-certified). */
  async forgetAgent(agentDid: string): Promise<number> {
    const n = await this.ctx.c.policies.deleteMany({ agentDid });
    this.forgetLocally(agentDid);
    // Lost: the other nodes drop them at their next refresh (an agent that no longer exists is certified by none).
    if (this.peers?.clustered) this.peers.broadcast('policy.agent-forgotten', { did: agentDid });
    return n;
  }

  private forgetLocally(agentDid: string): void {
    for (const p of this.byAgent.get(agentDid) ?? []) {
      this.expiring.delete(p._id);
      this.toExpire.delete(p._id);
      this.byId.delete(p._id);
    }
    if (this.byAgent.delete(agentDid)) this.version++;
  }

  async get(id: string): Promise<PolicyDoc> {
    const policy = await this.ctx.c.policies.findById(id);
    if (!policy) throw notFound(`no policy ${id}`);
    return policy;
  }

  async list(q: { agentDid?: string; workspaceId?: string; includeExpired?: boolean }): Promise<PolicyDoc[]> {
    const filter: Filter = {};
    if (q.agentDid) filter.agentDid = q.agentDid;
    if (q.workspaceId) {
      const ws = await resolveWorkspace(this.ctx.c, q.workspaceId);
      filter.workspaceId = ws?._id ?? q.workspaceId;
    }
    if (!q.includeExpired) filter.$or = [{ expiresAt: null }, { expiresAt: { $gt: new Date().toISOString() } }];
    const docs = await this.ctx.c.policies.find(filter);
    return docs.sort(newerFirst);
  }

  /**
   * Connected agents the policy applies to get their new terms (agents whose terms did not
   * change are skipped). Agent-scoped: that agent. Workspace-scoped: the agents whose primary
   * workspace it is.
   */
  private async reissueFor(policy: PolicyDoc): Promise<string[]> {
    const now = Date.now();
    if (policy.agentDid) {
      const did = policy.agentDid;
      const primary = await this.primaryIfItMatters(did);
      const [sentTo] = await Promise.all([
        this.certification.reissue([did], (_did, approved) => termsFor(this.effective(did, primary, now), approved), this.version),
        this.termsChanged([did]),
      ]);
      return sentTo;
    }
    if (!policy.workspaceId) return [];
    const workspaceId = policy.workspaceId;
    const dids = await this.affectedBy(policy);
    const [sentTo] = await Promise.all([
      this.certification.reissue(dids, (did, approved) => termsFor(this.effective(did, workspaceId, now), approved), this.version),
      this.termsChanged(dids),
    ]);
    return sentTo;
  }

  /** The agents a policy applies to: its agent, or the agents whose primary workspace is its workspace (one read). */
  private async affectedBy(policy: PolicyDoc): Promise<string[]> {
    if (policy.agentDid) return [policy.agentDid];
    if (!policy.workspaceId) return [];
    const members = await this.ctx.c.workspaceAgents.find({ workspaceId: policy.workspaceId, isPrimary: true }, { projection: { agentDid: 1 } });
    return members.map((m) => m.agentDid);
  }

  private index(p: PolicyDoc): void {
    if (isExpired(p, Date.now())) return;
    const add = (m: Map<string, PolicyDoc[]>, k: string) => {
      const list = m.get(k);
      if (list) list.push(p);
      else m.set(k, [p]);
    };
    if (p.agentDid) add(this.byAgent, p.agentDid);
    else if (p.workspaceId) add(this.byWorkspace, p.workspaceId);
    this.byId.set(p._id, p);
    if (p.expiresAt !== null) {
      this.expiring.set(p._id, p);
      this.toExpire.set(p._id, p);
      const at = Date.parse(p.expiresAt);
      if (at < this.expiryAt) this.armAt(at);
    }
  }

  private unindex(p: PolicyDoc): void {
    const drop = (m: Map<string, PolicyDoc[]>, k: string) => {
      const list = m.get(k)?.filter((x) => x._id !== p._id);
      if (list && list.length > 0) m.set(k, list);
      else m.delete(k);
    };
    if (p.agentDid) drop(this.byAgent, p.agentDid);
    else if (p.workspaceId) drop(this.byWorkspace, p.workspaceId);
    this.byId.delete(p._id);
    this.expiring.delete(p._id);
    this.toExpire.delete(p._id);
  }

  /** Policies in force now that expire before `until` (ms); those found expired leave the list. */
  expiringBefore(until: number, now = Date.now()): PolicyDoc[] {
    const out: PolicyDoc[] = [];
    for (const p of this.expiring.values()) {
      const at = Date.parse(p.expiresAt!);
      if (at <= now) this.expiring.delete(p._id);
      else if (at <= until) out.push(p);
    }
    return out;
  }
}
