/**
 * The fleet at a glance (GET /api/fleet/summary): counters kept as the data changes, so an answer
 * costs a few map reads whatever the fleet size, never a scan of the fleet.
 *
 * Per agent it keeps one small record (status, online, offered a certificate not co-signed yet,
 * holding a certificate whose terms are out of date, its workspaces), and from those the
 * counters: of the whole fleet, per workspace, and per set of workspaces an agent belongs to (few
 * distinct sets in practice), from which a caller's distinct count over several workspaces is
 * summed without counting an agent twice. The records change on
 * the events of the areas that own the data: a registration, a decision or a deletion (the
 * fleet's hooks: the record is read again from the store), an agent joining or leaving a workspace
 * (the workspace service's hook), its actor told it connected, disconnected, was offered a
 * certificate or stored one (the agent actors' delivery hook), the terms of agents changed by a
 * policy created, deleted or expired (the policy service's hook: their stored certificates are
 * compared with their new terms, src/services/stale-certificates.ts). Runs come from the
 * executor's status hook; policies expiring soon from the policy service's list of policies with
 * an expiry. All of it is read from the store once at start.
 *
 * In a cluster (docs/fleet.md, "In a cluster") every node keeps the store facts (statuses,
 * memberships, runs, out-of-date certificates) of the whole fleet: a change made on a node is
 * announced (a broadcast, and the store's change log for one the bus lost), and the others read
 * the record again (a policy change reaches every node's policy service, which tells its
 * summary); they are computed from the store again only when this node missed announcements for
 * good (docs/cluster.md, "What each node reads"). The socket facts (online, offered a certificate)
 * are each node's own agents' (those whose socket it holds) and are summed across the nodes at
 * request time; an agent both offered and out of date counts once, as out of date, on every node.
 */
import { z } from 'zod';
import type { Principal } from '../domain/principal.js';
import type { AgentDoc } from '../store/collections.js';
import type { RunStatusChange } from './workflow-runs.js';
import type { ServiceCore } from './core.js';
import type { PolicyService } from './policies.js';
import type { PeerNodes } from './ports.js';
import { visibleWorkspaceIds } from './workspaces.js';
import { AGENT_TERMS_FIELDS, MEMBERSHIP_FIELDS, byAgent, heldTerms, isStale, staleAmong, type MembershipRow } from './stale-certificates.js';

const DAY_MS = 86_400_000;
/** In a cluster: how long a summary waits for the other nodes' socket counters. */
const SOCKETS_GATHER_MS = 2000;
/** A failed comparison of certificates after a policy change is tried again after this, doubling up to a minute. */
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 60_000;
/** The broadcast of store changes (`StoreNews`) and the gather of socket counters (`SocketCounts`). */
const NEWS_TOPIC = 'fleet-summary';
const SOCKETS_TOPIC = 'fleet-summary.sockets';

/** What a node tells the others changed in the store: read it again there. */
interface StoreNews {
  agents?: string[];
  /** Agents that stored a certificate with their current terms: no longer out of date. */
  stored?: string[];
  runs?: string[];
  workspaceDeleted?: string;
}

/** A node's socket counters: per set of workspaces, its agents online, and offered new terms whose stored certificate is not out of date (those every node counts). */
interface SocketCounts {
  groups: Array<[workspaces: string[], online: number, offered: number]>;
}

const counts = z.object({ total: z.number().int(), online: z.number().int(), pending: z.number().int(), rejected: z.number().int() });

/** The answer of GET /api/fleet/summary (the route's response schema; the type is inferred from it). */
export const fleetSummaryView = z.object({
  scope: z.enum(['server', 'workspaces']),
  agents: counts,
  workspaces: z.array(z.object({ id: z.string(), slug: z.string(), name: z.string(), total: z.number().int(), online: z.number().int() })),
  registrationsPending: z.number().int().nullable(),
  certificatesAwaitingReissue: z.number().int(),
  policiesExpiringSoon: z.number().int(),
  runs: z.object({ running: z.number().int(), failedLast24h: z.number().int() }),
  at: z.string(),
});
export type FleetSummaryView = z.infer<typeof fleetSummaryView>;

/** What is kept per agent (packed into one small integer: see `pack`). */
interface AgentFacts {
  status: AgentDoc['status'];
  online: boolean;
  /** Offered a new certificate and not co-signed yet. */
  reissue: boolean;
  /** Active, and its current stored certificate carries other terms than it would be given now. */
  stale: boolean;
  /** Its workspaces' ids, sorted; `group` is the entry of that set. */
  group: Group;
}

/** The counters of the agents that belong to one set of workspaces. */
interface Group {
  /** Its place in `groupList` (what an agent's packed facts name). */
  index: number;
  workspaces: readonly string[];
  total: number;
  online: number;
  pending: number;
  rejected: number;
  /** Offered a new certificate or holding an out-of-date one (an agent both counts once). */
  awaiting: number;
  /** Offered a new certificate and not holding an out-of-date one: the socket part of `awaiting`, which other nodes add. */
  offered: number;
}

interface WorkspaceCounts {
  total: number;
  online: number;
}

/** Runs of one workspace: those running, and the failed ones with when they failed (ms). */
interface RunCounts {
  running: Set<string>;
  failed: Map<string, number>;
}

export class FleetSummary {
  /** Per agent its facts packed in a small integer: no object per agent (18,000 of them add up). */
  private readonly agents = new Map<string, number>();
  private readonly groups = new Map<string, Group>();
  private readonly groupList: Group[] = [];
  private readonly workspaces = new Map<string, WorkspaceCounts>();
  private runs = new Map<string, RunCounts>();
  /** Store reads of a record (an agent's, a run's) in progress, one after another per record. */
  private readonly reading = new Map<string, Promise<void>>();
  /**
   * While the store facts are computed again: the agents read again meanwhile (their read is as
   * new as the computation's, or newer) and the run changes applied meanwhile (applied again on top).
   */
  private recomputing: { agents: Set<string>; runs: RunStatusChange[] } | null = null;
  /**
   * Reads of several agents' certificates in progress: each collects the agents that stored a
   * certificate meanwhile, whose answer may be older than that; they are read again after it.
   */
  private readonly certificateReads = new Set<Set<string>>();
  /** In a cluster: agents whose certificate is no longer out of date, told the other nodes once per turn of the event loop. */
  private storedNews: string[] = [];
  private recomputation: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly ctx: ServiceCore,
    private readonly policies: PolicyService,
    private readonly peers?: PeerNodes,
  ) {
    if (peers?.clustered) {
      peers.onBroadcast(NEWS_TOPIC, (data) => this.heard(data as StoreNews));
      peers.onGather(SOCKETS_TOPIC, () => this.socketCounts());
      peers.onChangesLost(() => this.recompute());
    }
  }

  /** Reads the counters from the store, once. */
  async start(): Promise<void> {
    await this.readStore();
  }

  /** No more reads (the store is closing); waits for a computation in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.recomputation;
  }

  /**
   * In a cluster: computes the store facts again from the store (announcements were missed),
   * keeping this node's socket facts. One at a time; a failed one is tried again a minute later.
   */
  recompute(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.recomputation ??= this.readStore()
      .catch((err: unknown) => {
        this.ctx.log.error({ err, retryInMs: RETRY_MAX_MS }, 'fleet summary: reading the fleet failed; will retry');
        setTimeout(() => void this.recompute(), RETRY_MAX_MS).unref();
      })
      .finally(() => {
        this.recomputation = null;
      });
    return this.recomputation;
  }

  /** Reads agents, memberships and runs from the store and puts them in place of what is kept. */
  private async readStore(): Promise<void> {
    const { c } = this.ctx;
    const during = (this.recomputing = { agents: new Set<string>(), runs: [] });
    const stored = new Set<string>();
    this.certificateReads.add(stored);
    try {
      const memberships = byAgent((await c.workspaceAgents.find({}, { projection: MEMBERSHIP_FIELDS })) as MembershipRow[]);
      const agents = await c.agents.find({}, { projection: AGENT_TERMS_FIELDS });
      // One read of every certificate, whatever the fleet size.
      const held = await heldTerms(c);
      const since = new Date(Date.now() - DAY_MS).toISOString();
      const runs = await c.workflowRuns.find(
        { $or: [{ status: 'running' }, { status: 'failed', completedAt: { $gte: since } }] },
        { projection: { workspaceId: 1, status: 1, completedAt: 1 } },
      );

      const present = new Set<string>();
      const now = Date.now();
      for (const a of agents) {
        present.add(a._id);
        if (during.agents.has(a._id) || stored.has(a._id)) continue;
        const was = this.facts(a._id);
        const mine = memberships.get(a._id) ?? [];
        this.put(a._id, {
          status: a.status,
          online: was?.online ?? false,
          reissue: was?.reissue ?? false,
          stale: isStale(this.policies, a, mine, held.get(a._id), now),
          group: this.groupOf(mine.map((m) => m.workspaceId)),
        });
      }
      for (const did of stored) if (!during.agents.has(did)) void this.reread(did);
      for (const did of [...this.agents.keys()]) if (!present.has(did) && !during.agents.has(did)) this.put(did, null);

      this.runs = new Map();
      for (const r of runs) this.applyRun({ runId: r._id, workspaceId: r.workspaceId, status: r.status, at: r.completedAt });
      for (const change of during.runs) this.applyRun(change);
    } finally {
      if (this.recomputing === during) this.recomputing = null;
      this.certificateReads.delete(stored);
    }
  }

  // -------------------------------------------------------------------------------------------
  // Changes

  /** The agent's record changed in the store (registered, decided, deleted, joined or left a workspace): read it again, here and on the other nodes. */
  agentChanged(did: string): Promise<void> {
    this.tell({ agents: [did] });
    return this.reread(did);
  }

  private reread(did: string): Promise<void> {
    return this.inTurn(`agent:${did}`, () => this.reload(did), { did });
  }

  /** Runs the reads of one record one after another, so an older answer never lands after a newer one; failures are logged. */
  private inTurn(key: string, read: () => Promise<void>, about: object): Promise<void> {
    const next = (this.reading.get(key) ?? Promise.resolve())
      .then(read)
      .catch((err: unknown) => this.ctx.log.error({ err, ...about }, 'fleet summary: reading the store failed'))
      .finally(() => {
        if (this.reading.get(key) === next) this.reading.delete(key);
      });
    this.reading.set(key, next);
    return next;
  }

  /** Its actor was told it connected or disconnected (by this node, which holds its socket). */
  connection(did: string, online: boolean): void {
    const f = this.facts(did);
    if (f === undefined) {
      // Told before its record was read: the read keeps this flag.
      this.put(did, { status: 'active', online, reissue: false, stale: false, group: this.groupOf([]) });
      this.recomputing?.agents.add(did);
      void this.reread(did);
    } else if (!online && f.reissue && this.peers?.clustered) {
      // A node counts the sockets it holds: an agent gone from here may co-sign on another node, which counts it then.
      this.put(did, { ...f, online, reissue: false });
    } else if (online && f.reissue) {
      // A new handshake: its certificate is the one in force, an offer made to an earlier socket is moot.
      this.put(did, { ...f, online, reissue: false });
    } else if (f.online !== online) this.put(did, { ...f, online });
  }

  /** Its actor was told a new certificate is offered (true) or stored (false). */
  reissue(did: string, pending: boolean): void {
    const f = this.facts(did);
    if (f !== undefined && f.reissue !== pending) this.put(did, { ...f, reissue: pending });
  }

  /**
   * The agent's actor was told the certificate in force (`policyId`: the policy it carries), stored
   * at its handshake or co-signed after a policy change. It carries the terms it was offered, which
   * are its current ones — a policy change since then offers it newer terms, and the agent's
   * `CERTIFICATE_STORED` comes with the last offer only. So it is no longer out of date, here and on
   * the other nodes, without a store read (ten thousand agents re-certified at once cost no read
   * each); unless its policy expired since the offer, when its record is read again. A read of many
   * certificates under way reads it again after.
   */
  certificateStored(did: string, policyId: string | null): void {
    if (policyId !== null && !this.policies.inForce(policyId)) {
      for (const stored of this.certificateReads) stored.add(did);
      void this.agentChanged(did);
      return;
    }
    if (!this.clearStale(did)) return;
    if (this.peers?.clustered) {
      if (this.storedNews.length === 0) setImmediate(() => this.tell({ stored: this.storedNews.splice(0) }));
      this.storedNews.push(did);
    }
  }

  /** Clears an agent's out-of-date bit; whether it was set. */
  private clearStale(did: string): boolean {
    for (const stored of this.certificateReads) stored.add(did);
    const f = this.facts(did);
    if (!f?.stale) return false;
    this.put(did, { ...f, stale: false });
    return true;
  }

  /**
   * The terms of these agents may have changed (a policy created, deleted or expired: the policy
   * service's hook, on every node): their stored certificates are compared with their terms now.
   * A failed read is tried again later (and in a cluster repaired by the next computation).
   */
  async termsChanged(dids: readonly string[], attempt = 0): Promise<void> {
    if (this.stopped || dids.length === 0) return;
    const stored = new Set<string>();
    this.certificateReads.add(stored);
    try {
      const stale = await staleAmong(this.ctx.c, this.policies, dids);
      for (const [did, s] of stale) {
        if (stored.has(did)) {
          void this.reread(did);
          continue;
        }
        const f = this.facts(did);
        if (f !== undefined && f.stale !== s) this.put(did, { ...f, stale: s });
      }
    } catch (err) {
      const delay = Math.min(RETRY_FIRST_MS * 2 ** attempt, RETRY_MAX_MS);
      this.ctx.log.error({ err, agents: dids.length, retryInMs: delay }, 'fleet summary: comparing certificates with new terms failed');
      setTimeout(() => void this.termsChanged(dids, attempt + 1), delay).unref();
    } finally {
      this.certificateReads.delete(stored);
    }
  }

  /** A workspace is gone: its agents' sets lose it (here and on the other nodes). */
  workspaceDeleted(workspaceId: string): void {
    this.tell({ workspaceDeleted: workspaceId });
    this.forgetWorkspace(workspaceId);
  }

  private forgetWorkspace(workspaceId: string): void {
    for (const did of [...this.agents.keys()]) {
      const f = this.facts(did)!;
      if (f.group.workspaces.includes(workspaceId)) this.put(did, { ...f, group: this.groupOf(f.group.workspaces.filter((w) => w !== workspaceId)) });
    }
    this.workspaces.delete(workspaceId);
    this.runs.delete(workspaceId);
  }

  /** A run started, ended or was found ended (`at`: when it ended; `workspaceId` null: the one it was counted running in). */
  runStatus(run: RunStatusChange): void {
    this.tell({ runs: [run.runId] });
    if (run.workspaceId === null && this.peers?.clustered && this.runWorkspace(run.runId) === null) {
      // Started through another node and its news lost or still on its way: its record says where it belongs.
      void this.rereadRun(run.runId);
      return;
    }
    this.recomputing?.runs.push(run);
    this.applyRun(run);
  }

  private applyRun(run: RunStatusChange): void {
    const workspaceId = run.workspaceId ?? this.runWorkspace(run.runId);
    if (workspaceId === null) return; // never counted running here: nothing to move
    let r = this.runs.get(workspaceId);
    if (!r) this.runs.set(workspaceId, (r = { running: new Set(), failed: new Map() }));
    if (run.status === 'running') r.running.add(run.runId);
    else r.running.delete(run.runId);
    if (run.status === 'failed') {
      const at = run.at ? Date.parse(run.at) : Date.now();
      if (at > Date.now() - DAY_MS) r.failed.set(run.runId, at);
    }
  }

  /** The workspace a run is counted running in; null when it is not. */
  private runWorkspace(runId: string): string | null {
    for (const [w, counts] of this.runs) if (counts.running.has(runId)) return w;
    return null;
  }

  /** A run changed on another node: its record, read again, says what it is now (a repeated or late read changes nothing). */
  private rereadRun(runId: string): Promise<void> {
    return this.inTurn(
      `run:${runId}`,
      async () => {
        const run = await this.ctx.c.workflowRuns.findById(runId);
        // A run not found (its workflow deleted) counts nowhere.
        const change: RunStatusChange = run
          ? { runId, workspaceId: run.workspaceId, status: run.status, at: run.completedAt }
          : { runId, workspaceId: null, status: 'cancelled', at: null };
        this.recomputing?.runs.push(change);
        this.applyRun(change);
      },
      { runId },
    );
  }

  /** In a cluster: has the other nodes read what changed in the store (from the change log if the bus loses it). */
  private tell(news: StoreNews): void {
    if (this.peers?.clustered) this.peers.announce(NEWS_TOPIC, news);
  }

  /** Another node changed these records. */
  private heard(news: StoreNews): void {
    for (const did of news.agents ?? []) void this.reread(did);
    for (const did of news.stored ?? []) this.clearStale(did);
    for (const runId of news.runs ?? []) void this.rereadRun(runId);
    if (news.workspaceDeleted !== undefined) this.forgetWorkspace(news.workspaceDeleted);
  }

  /** This node's socket counters, for another node's summary. */
  private socketCounts(): SocketCounts {
    const groups: SocketCounts['groups'] = [];
    for (const g of this.groups.values()) if (g.online > 0 || g.offered > 0) groups.push([[...g.workspaces], g.online, g.offered]);
    return { groups };
  }

  private async reload(did: string): Promise<void> {
    const { c } = this.ctx;
    const [agent, memberships, held] = await Promise.all([
      c.agents.findById(did),
      c.workspaceAgents.find({ agentDid: did }, { projection: MEMBERSHIP_FIELDS }),
      heldTerms(c, [did]),
    ]);
    this.recomputing?.agents.add(did);
    if (!agent) {
      this.put(did, null);
      return;
    }
    const was = this.facts(did);
    this.put(did, {
      status: agent.status,
      online: was?.online ?? false,
      reissue: was?.reissue ?? false,
      stale: isStale(this.policies, agent, memberships, held.get(did)),
      group: this.groupOf(memberships.map((m) => m.workspaceId)),
    });
  }

  /** Replaces an agent's record (null: removes it), moving its counts. */
  private put(did: string, next: AgentFacts | null): void {
    const was = this.facts(did);
    if (was) this.count(was, -1);
    if (next) {
      this.agents.set(did, pack(next));
      this.count(next, 1);
    } else this.agents.delete(did);
  }

  private facts(did: string): AgentFacts | undefined {
    const packed = this.agents.get(did);
    if (packed === undefined) return undefined;
    return {
      status: STATUSES[packed & 3]!,
      online: (packed & 4) !== 0,
      reissue: (packed & 8) !== 0,
      stale: (packed & 16) !== 0,
      group: this.groupList[packed >>> GROUP_SHIFT]!,
    };
  }

  private count(f: AgentFacts, by: 1 | -1): void {
    const g = f.group;
    g.total += by;
    if (f.online) g.online += by;
    if (f.status === 'pending') g.pending += by;
    if (f.status === 'rejected') g.rejected += by;
    if (f.reissue || f.stale) g.awaiting += by;
    if (f.reissue && !f.stale) g.offered += by;
    for (const w of g.workspaces) {
      let ws = this.workspaces.get(w);
      if (!ws) this.workspaces.set(w, (ws = { total: 0, online: 0 }));
      ws.total += by;
      if (f.online) ws.online += by;
    }
  }

  private groupOf(workspaceIds: readonly string[]): Group {
    const sorted = [...new Set(workspaceIds)].sort();
    const key = sorted.join(' ');
    let g = this.groups.get(key);
    if (!g) {
      g = { index: this.groupList.length, workspaces: sorted, total: 0, online: 0, pending: 0, rejected: 0, awaiting: 0, offered: 0 };
      this.groups.set(key, g);
      this.groupList.push(g);
    }
    return g;
  }

  // -------------------------------------------------------------------------------------------
  // Reading

  /** The summary of what the principal may see: the whole fleet for a global admin, else the agents of its workspaces. */
  async summary(principal: Principal, now = Date.now()): Promise<FleetSummaryView> {
    const { c } = this.ctx;
    const visible = await visibleWorkspaceIds(c, principal);
    const all = visible === 'all';
    const mine = new Set(all ? [] : visible);
    const inScope = (g: { workspaces: readonly string[] }) => all || g.workspaces.some((w) => mine.has(w));
    const [wsDocs, elsewhere] = await Promise.all([
      c.workspaces.find(all ? {} : { _id: { $in: [...mine] } }, { projection: { slug: 1, name: 1 } }),
      this.otherNodesSockets(),
    ]);
    const agents = { total: 0, online: 0, pending: 0, rejected: 0 };
    let reissue = 0;
    for (const g of this.groups.values()) {
      if (g.total === 0 || !inScope(g)) continue;
      agents.total += g.total;
      agents.online += g.online;
      agents.pending += g.pending;
      agents.rejected += g.rejected;
      reissue += g.awaiting;
    }
    // The other nodes' agents online and offered new terms (each agent's socket is on one node; those out of date are counted above).
    const onlineElsewhere = new Map<string, number>();
    for (const [workspaces, online, offered] of elsewhere) {
      if (!inScope({ workspaces })) continue;
      agents.online += online;
      reissue += offered;
      for (const w of workspaces) onlineElsewhere.set(w, (onlineElsewhere.get(w) ?? 0) + online);
    }
    wsDocs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const workspaces = wsDocs.map((w) => ({
      id: w._id,
      slug: w.slug,
      name: w.name,
      total: this.workspaces.get(w._id)?.total ?? 0,
      online: (this.workspaces.get(w._id)?.online ?? 0) + (onlineElsewhere.get(w._id) ?? 0),
    }));

    const runs = { running: 0, failedLast24h: 0 };
    for (const [workspaceId, r] of this.runs) {
      for (const [id, at] of r.failed) if (at <= now - DAY_MS) r.failed.delete(id);
      if (!all && !mine.has(workspaceId)) continue;
      runs.running += r.running.size;
      runs.failedLast24h += r.failed.size;
    }

    let policiesExpiringSoon = 0;
    for (const p of this.policies.expiringBefore(now + DAY_MS, now)) {
      if (all || (p.workspaceId !== null && mine.has(p.workspaceId))) policiesExpiringSoon++;
      else if (p.agentDid !== null) {
        const f = this.facts(p.agentDid);
        if (f && inScope(f.group)) policiesExpiringSoon++;
      }
    }
    const globalAdmin = principal.kind === 'user' && principal.isAdmin;
    return {
      scope: all ? 'server' : 'workspaces',
      agents,
      workspaces,
      registrationsPending: globalAdmin ? this.pendingTotal() : null,
      certificatesAwaitingReissue: reissue,
      policiesExpiringSoon,
      runs,
      at: new Date(now).toISOString(),
    };
  }

  /** In a cluster: the other live nodes' socket counters; a node that does not answer in time is left out (and logged by the gather). */
  private async otherNodesSockets(): Promise<SocketCounts['groups']> {
    if (!this.peers?.clustered) return [];
    const { answers } = await this.peers.gather<SocketCounts>(SOCKETS_TOPIC, null, SOCKETS_GATHER_MS);
    return answers.flatMap((a) => a.groups);
  }

  /** Pending registrations: one per pending agent (registering again answers the pending one). */
  private pendingTotal(): number {
    let n = 0;
    for (const g of this.groups.values()) n += g.pending;
    return n;
  }

  /** An agent's workspaces as last told (for attributing its token usage to them). */
  workspacesOf(did: string): readonly string[] {
    const packed = this.agents.get(did);
    return packed === undefined ? [] : this.groupList[packed >>> GROUP_SHIFT]!.workspaces;
  }
}

const STATUSES: ReadonlyArray<AgentDoc['status']> = ['active', 'pending', 'rejected'];

/** Where the group's index starts in an agent's packed facts. */
const GROUP_SHIFT = 5;

/** Status in bits 0-1, online bit 2, offered re-issue bit 3, out-of-date certificate bit 4, the group's index above (a small integer, kept unboxed by V8). */
function pack(f: AgentFacts): number {
  return STATUSES.indexOf(f.status) | (f.online ? 4 : 0) | (f.reissue ? 8 : 0) | (f.stale ? 16 : 0) | (f.group.index << GROUP_SHIFT);
}
