/**
 * What the agents API shows (interface §2.5, §4.5): the list with its filters, paging and
 * visibility, the detail, and the search. Only active agents are agents here; pending and
 * rejected ones are registrations.
 *
 * Visibility: a global admin sees every agent; anyone else the agents that belong (primary or
 * not) to a workspace they are a member of. An agent the caller cannot see answers 404, as an
 * unknown one does.
 *
 * The list and the search filter the rows the agent roster keeps in memory (agent-roster.ts; no
 * store read of the fleet per request) and order only the page asked for: `isOnline` and the
 * online count come from the live sockets (the AgentPresence port; never stored), and the
 * lastSeen of a connected agent is its last frame.
 */
import { z } from 'zod';
import type { ServiceCore } from './core.js';
import type { AgentPresence } from './ports.js';
import type { AgentDoc, PolicyDoc, WorkspaceDoc } from '../store/collections.js';
import type { Capability } from '../domain/capabilities.js';
import type { Principal } from '../domain/principal.js';
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
import { selectPage } from '../domain/page-select.js';
import { RosterRow, type AgentRoster } from './agent-roster.js';
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

export class AgentViews {
  private readonly fleet: FleetService;
  private readonly policies: PolicyService;
  private readonly tokens: TokenUsage;
  private readonly presence: AgentPresence;
  private readonly roster: AgentRoster;

  constructor(
    private readonly ctx: ServiceCore,
    deps: { fleet: FleetService; policies: PolicyService; tokens: TokenUsage; presence: AgentPresence; roster: AgentRoster },
  ) {
    this.roster = deps.roster;
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
    const re = q.q ? new RegExp(escapeRegex(q.q), 'i') : null;
    const caps = q.capabilities && q.capabilities.length > 0 ? q.capabilities : null;
    const matching: RosterRow[] = [];
    for (const r of await this.roster.all()) {
      if (visible !== 'all' && !visible.has(r.did)) continue;
      if (re && !re.test(r.name) && !re.test(r.did)) continue;
      if (caps && !caps.every((cap) => r.capabilities.includes(cap))) continue;
      matching.push(r);
    }
    const active = await this.presence.lastActive(matching.map((r) => r.did));
    let online = 0;
    for (const t of active) if (t !== undefined) online++;
    let rows = matching;
    let live = active;
    if (q.online !== undefined) {
      rows = [];
      live = [];
      for (let i = 0; i < matching.length; i++) {
        if ((active[i] !== undefined) !== q.online) continue;
        rows.push(matching[i]!);
        live.push(active[i]);
      }
    }
    // One page in order without sorting the whole fleet (src/domain/page-select.ts); ties by DID.
    const asc = q.sortDir === 'asc';
    const byDid = (a: number, b: number) => rows[a]!.did < rows[b]!.did;
    let before: (a: number, b: number) => boolean;
    if (q.sortBy === 'lastSeen') {
      const seen = Float64Array.from(rows, (r, i) => live[i] ?? r.lastSeen);
      before = (a, b) => (seen[a] !== seen[b] ? seen[a]! < seen[b]! === asc : byDid(a, b));
    } else {
      const key = q.sortBy === 'name' ? (r: RosterRow) => r.nameKey : (r: RosterRow) => r.registeredAt;
      before = (a, b) => {
        const ka = key(rows[a]!);
        const kb = key(rows[b]!);
        return ka !== kb ? ka < kb === asc : byDid(a, b);
      };
    }
    const page = selectPage(rows.length, (q.page - 1) * q.pageSize, q.page * q.pageSize, before);
    const dids = page.map((i) => rows[i]!.did);
    const [workspaces, certificates] = await Promise.all([this.primaryWorkspaces(dids), this.fleet.certificates.currentOf(dids)]);
    return {
      agents: page.map((i): AgentListItem => {
        const r = rows[i]!;
        return this.item(r, live[i] !== undefined, this.lastSeenOf(r, live[i]), workspaces.get(r.did) ?? null, certificates.get(r.did) ?? null);
      }),
      total: rows.length,
      page: q.page,
      pageSize: q.pageSize,
      totalPages: Math.ceil(rows.length / q.pageSize),
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
    const re = text ? new RegExp(escapeRegex(text), 'i') : null;
    const visible = await this.visibleAgents(principal);
    const found = (await this.roster.all()).filter((r) => (visible === 'all' || visible.has(r.did)) && (!re || re.test(r.name) || re.test(r.did)));
    const page = selectPage(found.length, 0, SEARCH_LIMIT, (a, b) => {
      const x = found[a]!;
      const y = found[b]!;
      return x.name !== y.name ? x.name < y.name : x.did < y.did;
    });
    return { agents: page.map((i) => ({ did: found[i]!.did, name: found[i]!.name, capabilities: [...found[i]!.capabilities] })) };
  }

  /** `live`: the last frame of its ready socket (ms), when it is online. */
  private lastSeenOf(a: AgentDoc | RosterRow, live: number | undefined): string | null {
    if (live !== undefined) return new Date(live).toISOString();
    if (a instanceof RosterRow) return a.lastSeen === -Infinity ? null : new Date(a.lastSeen).toISOString();
    return this.fleet.pendingLastSeen(a._id) ?? a.lastSeen ?? null;
  }

  private item(a: AgentDoc | RosterRow, online: boolean, lastSeen: string | null, workspace: WorkspaceRef | null, certificate: StoredCertificate | null): AgentListItem {
    return {
      id: a instanceof RosterRow ? a.did : a._id,
      name: a.name,
      capabilities: [...a.capabilities],
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
