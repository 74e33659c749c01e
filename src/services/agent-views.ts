/**
 * What the agents API shows (interface §2.5, §4.5): the list with its filters, paging and
 * visibility, the detail, and the search. Only active agents are agents here; pending and
 * rejected ones are registrations.
 *
 * Visibility: a global admin sees every agent; anyone else the agents that belong (primary or
 * not) to a workspace they are a member of. An agent the caller cannot see answers 404, as an
 * unknown one does.
 *
 * The list is computed from the matching agents in memory: `isOnline` and the online count come
 * from the live sockets (the AgentPresence port; never stored), and the lastSeen of a connected
 * agent is its last frame. That costs one read of the matching agents per request (a projection of a few
 * fields), which is fine up to tens of thousands of agents.
 */
import { z } from 'zod';
import type { ServiceCore } from './core.js';
import type { AgentPresence } from './ports.js';
import type { AgentDoc, PolicyDoc, WorkspaceDoc } from '../store/collections.js';
import type { Capability } from '../domain/capabilities.js';
import type { Principal } from '../domain/principal.js';
import type { Filter } from '../store/types.js';
import type { FleetService } from './fleet.js';
import type { PolicyService } from './policies.js';
import type { TokenUsage } from './token-usage.js';
import type { StoredCertificate } from './certificates.js';
import { CertificateView, type Certificate } from '../domain/certificate.js';
import { capabilityList, pageFields, timestamp } from '../domain/views.js';
import { resolveWorkspace, visibleWorkspaceIds } from './workspaces.js';
import { PolicyView, toPolicyView } from './policies.js';
import { TokenStats } from './token-usage.js';
import { escapeRegex } from '../domain/regex.js';
import { notFound } from '../domain/errors.js';

export const AGENTS_PAGE_SIZE_DEFAULT = 20;
export const AGENTS_PAGE_SIZE_MAX = 100;
export const SEARCH_LIMIT = 20;

export interface AgentListQuery {
  q?: string;
  online?: boolean;
  workspace?: string;
  capabilities?: Capability[];
  page: number;
  pageSize: number;
  sortBy: 'name' | 'registeredAt' | 'lastSeen';
  sortDir: 'asc' | 'desc';
}

export const WorkspaceRef = z.strictObject({ id: z.string(), name: z.string(), slug: z.string(), color: z.string() }).meta({ id: 'WorkspaceRef' });
export type WorkspaceRef = z.infer<typeof WorkspaceRef>;

/** An agent of the list (interface §2.5). */
export const AgentListItem = z
  .strictObject({
    id: z.string().meta({ description: "The agent's DID" }),
    name: z.string(),
    capabilities: capabilityList.meta({ description: 'Approved at registration' }),
    capabilitiesInForce: capabilityList.nullable().meta({
      description:
        'What the agent enforces now: the capabilities of its current co-signed certificate (none once the policy it carries has expired); null before its first certificate',
    }),
    llmProvider: z.string().nullable(),
    llmModel: z.string().nullable(),
    isOnline: z.boolean(),
    registeredAt: timestamp,
    lastSeen: timestamp.nullable(),
    workspace: WorkspaceRef.nullable().meta({ description: 'Its primary workspace' }),
  })
  .meta({ id: 'AgentListItem' });
export type AgentListItem = z.infer<typeof AgentListItem>;

/** GET /api/agents: a page, and `online`, the number of online agents among all matching ones. */
export const AgentPage = z.strictObject({ agents: z.array(AgentListItem), ...pageFields, online: z.number().int().min(0) });
export type AgentPage = z.infer<typeof AgentPage>;

/** GET /api/agents/{id}: the list fields and the detail's (docs/fleet.md). */
export const AgentDetail = AgentListItem.extend({
  llmSystemPrompt: z.string(),
  publicKey: z.string(),
  version: z.string(),
  workspaces: z.array(WorkspaceRef.extend({ isPrimary: z.boolean() })),
  policy: PolicyView.extend({ scope: z.enum(['agent', 'workspace']) })
    .nullable()
    .meta({ description: 'Its effective policy and the scope it comes from; null when none applies' }),
  certificate: z
    .strictObject({ certificate: CertificateView, serverSignature: z.string(), agentSignature: z.string(), acceptedAt: timestamp })
    .nullable()
    .meta({ description: 'Its current co-signed certificate; null before the first' }),
  tokenUsage: TokenStats,
}).meta({ id: 'AgentDetail' });
export type AgentDetail = z.infer<typeof AgentDetail>;

/** GET /api/agents/search. */
export const AgentSearch = z.strictObject({ agents: z.array(z.strictObject({ did: z.string(), name: z.string(), capabilities: capabilityList })) });
export type AgentSearch = z.infer<typeof AgentSearch>;

const LIST_FIELDS = { name: 1, capabilities: 1, llmProvider: 1, llmModel: 1, registeredAt: 1, lastSeen: 1 } as const;

export class AgentViews {
  private readonly fleet: FleetService;
  private readonly policies: PolicyService;
  private readonly tokens: TokenUsage;
  private readonly presence: AgentPresence;

  constructor(
    private readonly ctx: ServiceCore,
    deps: { fleet: FleetService; policies: PolicyService; tokens: TokenUsage; presence: AgentPresence },
  ) {
    this.fleet = deps.fleet;
    this.policies = deps.policies;
    this.tokens = deps.tokens;
    this.presence = deps.presence;
  }

  /** DIDs of the agents the principal may see, or 'all'. */
  async visibleAgents(principal: Principal): Promise<Set<string> | 'all'> {
    const ws = await visibleWorkspaceIds(this.ctx.c, principal);
    if (ws === 'all') return 'all';
    if (ws.length === 0) return new Set();
    const members = await this.ctx.c.workspaceAgents.find({ workspaceId: { $in: ws } }, { projection: { agentDid: 1 } });
    return new Set(members.map((m) => m.agentDid));
  }

  /** The active agent if the principal may see it, else 404. */
  async visibleAgent(principal: Principal, did: string): Promise<AgentDoc> {
    const agent = await this.ctx.c.agents.findById(did);
    if (!agent || agent.status !== 'active') throw notFound(`no agent ${did}`);
    const visible = await this.visibleAgents(principal);
    if (visible !== 'all' && !visible.has(did)) throw notFound(`no agent ${did}`);
    return agent;
  }

  async list(principal: Principal, q: AgentListQuery): Promise<AgentPage> {
    const { c } = this.ctx;
    let visible = await this.visibleAgents(principal);
    if (q.workspace !== undefined) {
      const ws = await resolveWorkspace(c, q.workspace);
      const seeable = ws && (visible === 'all' || (await visibleWorkspaceIds(c, principal)).includes(ws._id));
      if (!ws || !seeable) throw notFound(`no workspace ${q.workspace}`);
      const inWs = new Set((await c.workspaceAgents.find({ workspaceId: ws._id }, { projection: { agentDid: 1 } })).map((m) => m.agentDid));
      visible = visible === 'all' ? inWs : new Set([...inWs].filter((d) => (visible as Set<string>).has(d)));
    }
    const filter: Filter = { status: 'active' };
    if (q.q) {
      const re = escapeRegex(q.q);
      filter.$or = [{ name: { $regex: re, $options: 'i' } }, { _id: { $regex: re, $options: 'i' } }];
    }
    if (q.capabilities && q.capabilities.length > 0) filter.capabilities = { $all: q.capabilities };
    let agents = await c.agents.find(filter, { projection: LIST_FIELDS });
    if (visible !== 'all') {
      const v = visible;
      agents = agents.filter((a) => v.has(a._id));
    }
    const live = await this.presence.lastActive(agents.map((a) => a._id));
    type Row = { a: (typeof agents)[number]; online: boolean; live: number | undefined };
    const rows: Row[] = agents.map((a, i) => ({ a, online: live[i] !== undefined, live: live[i] }));
    const online = rows.reduce((n, r) => n + (r.online ? 1 : 0), 0);
    const filtered = q.online === undefined ? rows : rows.filter((r) => r.online === q.online);
    const dir = q.sortDir === 'asc' ? 1 : -1;
    // Each row's sort key made once (a fleet's page sorts tens of thousands of rows).
    const keyOf =
      q.sortBy === 'name'
        ? (r: Row) => r.a.name.toLowerCase()
        : q.sortBy === 'registeredAt'
          ? (r: Row) => r.a.registeredAt
          : (r: Row) => this.lastSeenOf(r.a, r.live) ?? '';
    const keyed = filtered.map((r) => ({ r, k: keyOf(r) }));
    keyed.sort((x, y) => {
      if (x.k !== y.k) return x.k < y.k ? -dir : dir;
      return x.r.a._id < y.r.a._id ? -1 : x.r.a._id > y.r.a._id ? 1 : 0;
    });
    const total = keyed.length;
    const pageRows = keyed.slice((q.page - 1) * q.pageSize, q.page * q.pageSize).map((x) => x.r);
    const dids = pageRows.map((r) => r.a._id);
    const [workspaces, certificates] = await Promise.all([this.primaryWorkspaces(dids), this.fleet.certificates.currentOf(dids)]);
    return {
      agents: pageRows.map((r): AgentListItem => this.item(r.a, r.online, this.lastSeenOf(r.a, r.live), workspaces.get(r.a._id) ?? null, certificates.get(r.a._id) ?? null)),
      total,
      page: q.page,
      pageSize: q.pageSize,
      totalPages: Math.ceil(total / q.pageSize),
      online,
    };
  }

  async detail(principal: Principal, did: string): Promise<AgentDetail> {
    const agent = await this.visibleAgent(principal, did);
    const { c } = this.ctx;
    const memberships = await c.workspaceAgents.find({ agentDid: did }, { sort: { joinedAt: 1 } });
    const wsDocs = memberships.length ? await c.workspaces.find({ _id: { $in: memberships.map((m) => m.workspaceId) } }) : [];
    const byId = new Map(wsDocs.map((w) => [w._id, w]));
    const primary = memberships.find((m) => m.isPrimary) ?? memberships[0];
    const policy = this.policies.effective(did, primary?.workspaceId ?? null);
    const [stored, tokenUsage, [live]] = await Promise.all([this.fleet.certificates.current(did), this.tokens.ofAgent(did), this.presence.lastActive([did])]);
    const certificate = stored
      ? { certificate: stored.certificate, serverSignature: stored.serverSignature, agentSignature: stored.agentSignature, acceptedAt: stored.acceptedAt }
      : null;
    // Its other workspaces are listed where the caller may see them; the primary one always is (it is the list item's `workspace`).
    const seen = await visibleWorkspaceIds(c, principal);
    const shown = memberships.filter((m) => byId.has(m.workspaceId) && (m.isPrimary || seen === 'all' || seen.includes(m.workspaceId)));
    return {
      ...this.item(agent, live !== undefined, this.lastSeenOf(agent, live), primary && byId.has(primary.workspaceId) ? wsRef(byId.get(primary.workspaceId)!) : null, stored),
      llmSystemPrompt: agent.llmSystemPrompt ?? '',
      publicKey: agent.publicKey,
      version: agent.version,
      workspaces: shown.map((m) => ({ ...wsRef(byId.get(m.workspaceId)!), isPrimary: m.isPrimary })),
      policy: policy ? policyRef(policy) : null,
      certificate,
      tokenUsage,
    };
  }

  async search(principal: Principal, text: string | undefined): Promise<AgentSearch> {
    const filter: Filter = { status: 'active' };
    if (text) {
      const re = escapeRegex(text);
      filter.$or = [{ name: { $regex: re, $options: 'i' } }, { _id: { $regex: re, $options: 'i' } }];
    }
    const visible = await this.visibleAgents(principal);
    const found = await this.ctx.c.agents.find(filter, { projection: { name: 1, capabilities: 1 }, sort: { name: 1 } });
    const agents = (visible === 'all' ? found : found.filter((a) => visible.has(a._id))).slice(0, SEARCH_LIMIT);
    return { agents: agents.map((a) => ({ did: a._id, name: a.name, capabilities: a.capabilities })) };
  }

  /** `live`: the last frame of its ready socket (ms), when it is online. */
  private lastSeenOf(a: Pick<AgentDoc, '_id' | 'lastSeen'>, live: number | undefined): string | null {
    if (live !== undefined) return new Date(live).toISOString();
    return this.fleet.pendingLastSeen(a._id) ?? a.lastSeen ?? null;
  }

  private item(
    a: Pick<AgentDoc, '_id' | 'name' | 'capabilities' | 'registeredAt' | 'llmProvider' | 'llmModel'>,
    online: boolean,
    lastSeen: string | null,
    workspace: WorkspaceRef | null,
    certificate: StoredCertificate | null,
  ): AgentListItem {
    return {
      id: a._id,
      name: a.name,
      capabilities: a.capabilities,
      capabilitiesInForce: certificate ? inForce(certificate.certificate) : null,
      llmProvider: a.llmProvider ?? null,
      llmModel: a.llmModel ?? null,
      isOnline: online,
      registeredAt: a.registeredAt,
      lastSeen,
      workspace,
    };
  }

  /** Primary workspace of each agent of a page. */
  private async primaryWorkspaces(dids: string[]): Promise<Map<string, WorkspaceRef>> {
    const out = new Map<string, WorkspaceRef>();
    if (dids.length === 0) return out;
    const { c } = this.ctx;
    const memberships = await c.workspaceAgents.find({ agentDid: { $in: dids } }, { sort: { joinedAt: 1 } });
    const primary = new Map<string, string>();
    for (const m of memberships) if (m.isPrimary || !primary.has(m.agentDid)) primary.set(m.agentDid, m.workspaceId);
    const wsDocs = await c.workspaces.find({ _id: { $in: [...new Set(primary.values())] } });
    const byId = new Map(wsDocs.map((w) => [w._id, w]));
    for (const [did, wsId] of primary) {
      const ws = byId.get(wsId);
      if (ws) out.set(did, wsRef(ws));
    }
    return out;
  }
}

/** A certificate's capabilities while its policy has not expired (the agent's gate 2 refuses everything after). */
function inForce(cert: Certificate): Capability[] {
  return cert.policyExpiresAt !== null && Date.parse(cert.policyExpiresAt) <= Date.now() ? [] : cert.capabilities;
}

function wsRef(w: WorkspaceDoc): WorkspaceRef {
  return { id: w._id, name: w.name, slug: w.slug, color: w.color };
}

/** The agent detail's `policy`: its effective policy with the scope it comes from (docs/fleet.md). */
function policyRef(p: PolicyDoc) {
  return { ...toPolicyView(p), scope: p.agentDid ? ('agent' as const) : ('workspace' as const) };
}
