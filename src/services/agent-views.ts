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

/** What AgentViews derives once from a set of the roster's rows. */
interface SnapshotViews {
  dids: string[];
  orders: Map<string, Int32Array>;
  online: number;
  /** The presence's `changes` when `online` was counted (undefined: not yet). */
  onlineAt: number | undefined;
}

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
    const all = await this.roster.all();
    // Which rows match (by their number in `all`); without a filter, all of them, and nothing is built.
    let match: Uint8Array | null = null;
    let dids = this.didsOf(all);
    if (visible !== 'all' || re || caps) {
      match = new Uint8Array(all.length);
      const some: string[] = [];
      for (let i = 0; i < all.length; i++) {
        const r = all[i]!;
        if (visible !== 'all' && !visible.has(r.did)) continue;
        if (re && !re.test(r.name) && !re.test(r.did)) continue;
        if (caps && !caps.every((cap) => r.capabilities.includes(cap))) continue;
        match[i] = 1;
        some.push(r.did);
      }
      dids = some;
    }
    // The whole list in a fixed order, and a presence that says when it changed: the online count
    // is kept until an agent comes or goes, and only the page's rows are asked about.
    const changes = this.presence.changes;
    const whole = match === null && q.online === undefined && q.sortBy !== 'lastSeen' && changes !== undefined;
    const kept = whole ? this.ofSnapshot(all) : null;
    /** The last frame of each online row's socket (ms), by row number (whole: left empty). */
    let live: Array<number | undefined> = [];
    let online = 0;
    if (kept && kept.onlineAt === changes) online = kept.online;
    else {
      const activeOfMatching = await this.presence.lastActive(dids);
      live = match ? new Array(all.length) : activeOfMatching;
      for (let i = 0, k = 0; i < all.length; i++) {
        if (match && !match[i]) continue;
        const t = activeOfMatching[k++];
        if (match) live[i] = t;
        if (t !== undefined) online++;
      }
      if (kept) {
        kept.online = online;
        kept.onlineAt = changes;
      }
    }
    if (q.online !== undefined) {
      match ??= new Uint8Array(all.length).fill(1);
      for (let i = 0; i < all.length; i++) if (match[i] && (live[i] !== undefined) !== q.online) match[i] = 0;
    }
    let total = all.length;
    if (match) {
      total = 0;
      for (let i = 0; i < all.length; i++) total += match[i]!;
    }
    const from = (q.page - 1) * q.pageSize;
    const to = q.page * q.pageSize;
    const asc = q.sortDir === 'asc';
    let page: number[];
    if (q.sortBy === 'lastSeen') {
      // Keys from live sockets, which change with every frame: one page in order without sorting the
      // whole fleet (src/domain/page-select.ts); ties by DID.
      const rows: number[] = [];
      for (let i = 0; i < all.length; i++) if (!match || match[i]) rows.push(i);
      const seen = Float64Array.from(rows, (i) => live[i] ?? all[i]!.lastSeen);
      const picked = selectPage(rows.length, from, to, (a, b) => (seen[a] !== seen[b] ? seen[a]! < seen[b]! === asc : all[rows[a]!]!.did < all[rows[b]!]!.did));
      page = picked.map((k) => rows[k]!);
    } else {
      // Name and registration time change only with a new row (and so a new `all`): the order is
      // made once per set of rows, and a page is read off it.
      const order = this.orderOf(all, q.sortBy, asc);
      page = [];
      for (let i = 0, seen = 0; i < order.length && seen < to; i++) {
        const row = order[i]!;
        if (match && !match[row]) continue;
        if (seen++ >= from) page.push(row);
      }
    }
    const pageDids = page.map((i) => all[i]!.did);
    const [workspaces, certificates, pageLive] = await Promise.all([
      this.primaryWorkspaces(pageDids),
      this.fleet.certificates.currentOf(pageDids),
      whole ? this.presence.lastActive(pageDids) : page.map((i) => live[i]),
    ]);
    return {
      agents: page.map((i, k): AgentListItem => {
        const r = all[i]!;
        const at = pageLive[k];
        return this.item(r, at !== undefined, this.lastSeenOf(r, at), workspaces.get(r.did) ?? null, certificates.get(r.did) ?? null);
      }),
      total,
      page: q.page,
      pageSize: q.pageSize,
      totalPages: Math.ceil(total / q.pageSize),
      online,
    };
  }

  /**
   * Each set of rows' DIDs, its orders by name and by registration time (made once per set), and
   * how many of its agents were online at which presence `changes`.
   */
  private readonly bySnapshot = new WeakMap<readonly RosterRow[], SnapshotViews>();

  private ofSnapshot(all: readonly RosterRow[]): SnapshotViews {
    let made = this.bySnapshot.get(all);
    if (!made) this.bySnapshot.set(all, (made = { dids: all.map((r) => r.did), orders: new Map(), online: 0, onlineAt: undefined }));
    return made;
  }

  private didsOf(all: readonly RosterRow[]): string[] {
    return this.ofSnapshot(all).dids;
  }

  /** Row numbers of `all` in the list's order by name or registration time; ties by DID (ascending either way). */
  private orderOf(all: readonly RosterRow[], by: 'name' | 'registeredAt', asc: boolean): Int32Array {
    const { orders } = this.ofSnapshot(all);
    const name = `${by} ${asc}`;
    let order = orders.get(name);
    if (!order) {
      const key = by === 'name' ? (r: RosterRow) => r.nameKey : (r: RosterRow) => r.registeredAt;
      order = Int32Array.from(all, (_, i) => i).sort((a, b) => {
        const ka = key(all[a]!);
        const kb = key(all[b]!);
        if (ka !== kb) return ka < kb === asc ? -1 : 1;
        return all[a]!.did < all[b]!.did ? -1 : 1;
      });
      orders.set(name, order);
    }
    return order;
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
