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
 */
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import { capabilityList, timestamp } from '../domain/views.js';
import type { ServiceCore } from './core.js';
import type { AgentCertification } from './ports.js';
import type { AgentDoc, PolicyDoc } from '../store/collections.js';
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

export class PolicyService {
  private readonly byAgent = new Map<string, PolicyDoc[]>();
  private readonly byWorkspace = new Map<string, PolicyDoc[]>();
  /** The unexpired policies that have an expiry (the fleet summary counts those expiring soon). */
  private readonly expiring = new Map<string, PolicyDoc>();
  /** Bumped on every change of the policy set (lets a handshake notice a change made meanwhile). */
  version = 0;

  constructor(
    private readonly ctx: ServiceCore,
    private readonly certification: AgentCertification,
  ) {}

  /** Loads the unexpired policies into memory. */
  async load(): Promise<void> {
    const now = new Date().toISOString();
    const docs = await this.ctx.c.policies.find({ $or: [{ expiresAt: null }, { expiresAt: { $gt: now } }] });
    for (const p of docs) this.index(p);
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

  /** The agent's primary workspace; null without any workspace policy, when it cannot matter (the read is spared). */
  private async primaryIfItMatters(did: string): Promise<string | null> {
    if (!this.hasWorkspacePolicies()) return null;
    const all = await this.ctx.c.workspaceAgents.find({ agentDid: did }, { projection: { workspaceId: 1, isPrimary: 1, joinedAt: 1 } });
    if (all.length === 0) return null;
    return (all.find((m) => m.isPrimary) ?? all.sort((a, b) => (a.joinedAt < b.joinedAt ? -1 : 1))[0]!).workspaceId;
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
    const sentTo = await this.reissueFor(policy);
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
    const sentTo = await this.reissueFor(policy);
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
    for (const p of this.byAgent.get(agentDid) ?? []) this.expiring.delete(p._id);
    if (this.byAgent.delete(agentDid)) this.version++;
    return n;
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
      return this.certification.reissue([did], (_did, approved) => termsFor(this.effective(did, primary, now), approved), this.version);
    }
    if (!policy.workspaceId) return [];
    const workspaceId = policy.workspaceId;
    const members = await this.ctx.c.workspaceAgents.find({ workspaceId, isPrimary: true }, { projection: { agentDid: 1 } });
    return this.certification.reissue(
      members.map((m) => m.agentDid),
      (did, approved) => termsFor(this.effective(did, workspaceId, now), approved),
      this.version,
    );
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
    if (p.expiresAt !== null) this.expiring.set(p._id, p);
  }

  private unindex(p: PolicyDoc): void {
    const drop = (m: Map<string, PolicyDoc[]>, k: string) => {
      const list = m.get(k)?.filter((x) => x._id !== p._id);
      if (list && list.length > 0) m.set(k, list);
      else m.delete(k);
    };
    if (p.agentDid) drop(this.byAgent, p.agentDid);
    else if (p.workspaceId) drop(this.byWorkspace, p.workspaceId);
    this.expiring.delete(p._id);
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
