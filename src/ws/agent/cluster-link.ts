/**
 * The agent ports across a cluster: AgentLink and AgentPresence routed to the node that holds
 * each agent's socket, on top of this process's connection map (connections.ts).
 *
 * - Routing: a node listens on `agent.<hash of the DID>` for each agent with an authenticated
 *   socket on it (any phase: a pending agent waits there for its decision). Pushes and drops are
 *   published there; an intent is a request there, answered with the agent's outcome.
 * - Presence: where each ready agent is, known to every node. A node announces its agents coming
 *   online and going offline (batched, on `bcast.presence`) and stores them (`agent_presence`:
 *   the DID, the node's `<id>/<incarnation>`, since when). Every node keeps the map in memory, so
 *   `isOnline` stays synchronous; it is read from the store at start and after the bus was down.
 *   An entry counts only while its node's lease runs: a node that dies leaves its agents marked
 *   until its lease ends, then they read offline (and its entries are removed).
 * - One socket per agent cluster-wide: a node that hears its agent came online on another node,
 *   later than on itself, ends its own socket (4409), as a newer socket replaces an older one in
 *   one process; an agent in its offline grace period here ends it here, without its actor being
 *   told it went offline (the other node told it it connected).
 *
 * At most once (docs/cluster.md): a push lost on the way is not repeated (the agent gets the
 * current state at its next handshake); a lost intent request or reply is a timeout (504); a lost
 * presence announcement leaves that agent's entry stale until its next connect, the store read
 * after an outage, or its node's lease end; a lost drop leaves a decommissioned agent's socket
 * open until its next handshake, which finds the agent gone and refuses it.
 */
import type { Logger } from '../../log.js';
import { BusNoRespondersError, BusTimeoutError, BusUnavailableError, BusPayloadError, type Bus, type BusMessage, type Unsubscribe } from '../../cluster/bus.js';
import type { Subjects } from '../../cluster/subjects.js';
import type { Collection } from '../../store/types.js';
import type { AgentPresenceDoc } from '../../store/cluster-docs.js';
import type { AgentLink, AgentPresence, PeerNodes, IntentOutcome, IntentRequest, LiveSeen, PushFrame, ReadyListener } from '../../services/ports.js';
import type { Decision } from '../../services/fleet.js';
import { CLOSE } from '../../domain/agent-protocol.js';
import type { AgentConnections, ConnectionObserver } from './connections.js';

/** How long presence changes are gathered before they are announced and stored. */
const PRESENCE_FLUSH_MS = 50;
/** Presence documents per store call. */
const PRESENCE_CHUNK = 500;
/** What an intent's bus request waits beyond the intent's own timeout (the reply's way back). */
const INTENT_REPLY_MARGIN_MS = 2000;

type AgentCommand =
  | { op: 'push'; did: string; frame: PushFrame }
  | { op: 'drop'; did: string; code: number; reason: string }
  | { op: 'decision'; did: string; decision: Decision }
  | { op: 'intent'; did: string; intent: IntentRequest; timeoutMs: number };

interface PresenceNews {
  node: string;
  up: Array<[string, number]>;
  down: string[];
}

export interface ClusterLinkDeps {
  local: AgentConnections;
  bus: Bus;
  subjects: Subjects;
  /** This process's `<nodeId>/<incarnation>`. */
  nodeKey: string;
  presence: Collection<AgentPresenceDoc>;
  /** Presence news goes out as announcements (a broadcast, and the change log for a node that missed it). */
  peers: Pick<PeerNodes, 'announce' | 'onBroadcast'>;
  /** Keys of the nodes whose leases run, as last read. */
  liveKeys(): ReadonlySet<string>;
  log: Logger;
  /** A registration decision for an agent whose socket waits here. */
  decided(did: string, decision: Decision): void;
  /**
   * An agent ready here, or in its offline grace period here, is ready on another node now: its
   * socket here was replaced, or its grace period ends here without its actor being told it went
   * offline (the other node told it it connected).
   */
  movedAway?(did: string): void;
}

export class ClusterAgentLink implements AgentLink, AgentPresence, ConnectionObserver {
  /** Agents ready on other nodes: the node's key, and since when. */
  private readonly remote = new Map<string, { node: string; since: number }>();
  /** Agents ready here, and since when. */
  private readonly localSince = new Map<string, number>();
  private readonly subs = new Map<string, Unsubscribe>();
  private up = new Map<string, number>();
  private down = new Set<string>();
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly d: ClusterLinkDeps) {
    d.local.observe(this);
  }

  /** Hears the other nodes' presence news, then reads where every agent is from the store. */
  async start(): Promise<void> {
    this.d.peers.onBroadcast('presence', (data, via) => (via === 'bus' ? this.heard(data as PresenceNews) : this.reread(data as PresenceNews)));
    await this.sync();
  }

  /** Stops announcing (at shutdown, once the sockets are closed: their offline news is flushed first). */
  async stop(): Promise<void> {
    await this.flush();
    this.stopped = true;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    for (const unsubscribe of this.subs.values()) unsubscribe();
    this.subs.clear();
  }

  // -------------------------------------------------------------------------------------------
  // The ports

  isOnline(did: string): boolean {
    return this.d.local.isOnline(did) || this.remoteNode(did) !== undefined;
  }

  push(did: string, frame: PushFrame): boolean {
    if (this.d.local.isOnline(did)) return this.d.local.push(did, frame);
    if (this.remoteNode(did) === undefined) return false;
    return this.send({ op: 'push', did, frame });
  }

  async request(did: string, intent: IntentRequest, timeoutMs: number): Promise<IntentOutcome> {
    if (this.d.local.isOnline(did) || this.remoteNode(did) === undefined) return this.d.local.request(did, intent, timeoutMs);
    const command: AgentCommand = { op: 'intent', did, intent, timeoutMs };
    try {
      return (await this.d.bus.request(this.d.subjects.agent(did), command, { timeoutMs: timeoutMs + INTENT_REPLY_MARGIN_MS })) as IntentOutcome;
    } catch (err) {
      // Nobody listens: the agent left that node meanwhile. A timeout: the request or its answer
      // was lost, or the node is slow; the agent may have acted, as with a timeout in one process.
      if (err instanceof BusNoRespondersError) return { failed: 'offline' };
      if (err instanceof BusTimeoutError) return { failed: 'timeout' };
      if (err instanceof BusUnavailableError) return { failed: 'unavailable' };
      throw err;
    }
  }

  drop(did: string, code: number, reason: string): void {
    this.d.local.drop(did, code, reason);
    // Wherever else it may be connected, even mid-handshake (not yet in the presence map).
    this.send({ op: 'drop', did, code, reason });
  }

  onReady(listener: ReadyListener): () => void {
    return this.d.local.onReady(listener);
  }

  async lastActive(dids: readonly string[]): Promise<Array<number | undefined>> {
    const out = await this.d.local.lastActive(dids);
    for (let i = 0; i < dids.length; i++) {
      if (out[i] !== undefined) continue;
      const r = this.remote.get(dids[i]!);
      // An agent on another node: its last frame is that node's; since when it is connected stands in.
      if (r && this.d.liveKeys().has(r.node)) out[i] = r.since;
    }
    return out;
  }

  collectActive(): LiveSeen {
    return this.d.local.collectActive();
  }

  /** Tells the socket of `did`, wherever it waits, that its registration was decided. */
  relayDecision(did: string, decision: Decision): void {
    if (this.d.local.current(did)) return; // the handshake here hears it directly
    this.send({ op: 'decision', did, decision });
  }

  /** Ready agents on other nodes (for metrics and tests). */
  remoteCount(): number {
    return this.remote.size;
  }

  // -------------------------------------------------------------------------------------------
  // This process's sockets (ConnectionObserver)

  held(did: string): void {
    if (this.stopped || this.subs.has(did)) return;
    this.subs.set(
      did,
      this.d.bus.subscribe(this.d.subjects.agent(did), (msg) => this.command(did, msg)),
    );
  }

  released(did: string): void {
    this.subs.get(did)?.();
    this.subs.delete(did);
  }

  online(did: string): void {
    const since = Date.now();
    this.localSince.set(did, since);
    this.down.delete(did);
    this.up.set(did, since);
    this.scheduleFlush();
  }

  offline(did: string): void {
    this.localSince.delete(did);
    this.up.delete(did);
    this.down.add(did);
    this.scheduleFlush();
  }

  // -------------------------------------------------------------------------------------------
  // Commands for agents whose socket is here

  private command(did: string, msg: BusMessage): void {
    const c = msg.data as AgentCommand | undefined;
    if (!c || c.did !== did) return; // another DID with the same subject hash: not ours
    const { local } = this.d;
    switch (c.op) {
      case 'push':
        local.push(did, c.frame);
        return;
      case 'drop':
        local.drop(did, c.code, c.reason);
        return;
      case 'decision':
        this.d.decided(did, c.decision);
        return;
      case 'intent':
        if (!msg.respond) return;
        local.request(did, c.intent, c.timeoutMs).then(
          (outcome) => msg.respond!(outcome),
          (err: unknown) => {
            this.d.log.error({ err, did }, 'an intent from another node failed here');
            msg.respond!({ failed: 'disconnected' } satisfies IntentOutcome);
          },
        );
        return;
    }
  }

  private send(command: AgentCommand): boolean {
    try {
      return this.d.bus.publish(this.d.subjects.agent(command.did), command);
    } catch (err) {
      if (!(err instanceof BusPayloadError)) throw err;
      this.d.log.error({ err, did: command.did, op: command.op }, 'a frame for an agent on another node is too large for the bus');
      return false;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Presence

  private remoteNode(did: string): string | undefined {
    const r = this.remote.get(did);
    return r !== undefined && this.d.liveKeys().has(r.node) ? r.node : undefined;
  }

  private heard(news: PresenceNews | undefined): void {
    if (!news || news.node === this.d.nodeKey) return;
    for (const did of news.down ?? []) if (this.remote.get(did)?.node === news.node) this.remote.delete(did);
    for (const [did, since] of news.up ?? []) this.place(did, news.node, since);
  }

  /** `did` is ready on `node` since `since`: kept when newer than what is known; a socket here that is older is replaced. */
  private place(did: string, node: string, since: number): void {
    const known = this.remote.get(did);
    if (known && known.since > since) return;
    const mine = this.localSince.get(did);
    if (mine !== undefined) {
      if (mine > since) return;
      this.d.local.drop(did, CLOSE.replaced, 'replaced by a newer connection on another node');
      this.d.movedAway?.(did);
    } else if (this.d.local.returned(did) !== undefined) {
      // It left here and came back elsewhere within its grace period: this node's "offline" would now be stale news.
      this.d.movedAway?.(did);
    }
    this.remote.set(did, { node, since });
  }

  /**
   * News this node missed on the bus, read from the change log (later news of the same agents may
   * have come since): where those agents are now is read from the store.
   */
  private async reread(news: PresenceNews | undefined): Promise<void> {
    if (!news || news.node === this.d.nodeKey) return;
    const dids = [...new Set([...(news.down ?? []), ...(news.up ?? []).map(([did]) => did)])];
    const live = this.d.liveKeys();
    for (let i = 0; i < dids.length; i += PRESENCE_CHUNK) {
      const chunk = dids.slice(i, i + PRESENCE_CHUNK);
      const docs = new Map((await this.d.presence.find({ _id: { $in: chunk } })).map((d) => [d._id, d]));
      for (const did of chunk) {
        const doc = docs.get(did);
        if (doc && doc.node !== this.d.nodeKey && live.has(doc.node)) this.place(did, doc.node, doc.since);
        else this.remote.delete(did);
      }
    }
  }

  /** Reads where every agent is (at start, and when this node missed announcements for good). */
  async sync(): Promise<void> {
    const live = this.d.liveKeys();
    const docs = await this.d.presence.find({});
    const seen = new Set<string>();
    for (const doc of docs) {
      if (doc.node === this.d.nodeKey || !live.has(doc.node)) continue;
      seen.add(doc._id);
      this.place(doc._id, doc.node, doc.since);
    }
    for (const did of [...this.remote.keys()]) if (!seen.has(did)) this.remote.delete(did);
  }

  /** Nodes whose leases ended: their agents read offline now, and their entries go. */
  async nodesLeft(left: readonly string[], readAt: number, marginMs: number): Promise<void> {
    if (left.length === 0) return;
    const gone = new Set(left);
    for (const [did, r] of this.remote) if (gone.has(r.node)) this.remote.delete(did);
    // Only entries older than the read, so a node that joined since is never taken for a gone one.
    await this.d.presence.deleteMany({ node: { $in: [...gone] }, since: { $lt: readAt - marginMs } });
  }

  private scheduleFlush(): void {
    if (this.flushTimer || this.stopped) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      this.flush().catch((err: unknown) => this.d.log.error({ err }, 'announcing agent presence failed'));
    }, PRESENCE_FLUSH_MS);
    this.flushTimer.unref();
  }

  /** Announces and stores the presence changes gathered; what the store refused is tried again later. */
  private flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => this.flush());
    if (this.up.size === 0 && this.down.size === 0) return Promise.resolve();
    const up = this.up;
    const down = this.down;
    this.up = new Map();
    this.down = new Set();
    this.flushing = (async () => {
      const ups = [...up];
      const downs = [...down];
      const stored = this.store(ups, downs);
      // Broadcast now, in the change log once stored (a node that reads it there finds it in the
      // store); in chunks (a storm of connects would not fit the bus's largest message at once).
      for (let i = 0; i < Math.max(ups.length, downs.length); i += PRESENCE_CHUNK) {
        this.d.peers.announce('presence', { node: this.d.nodeKey, up: ups.slice(i, i + PRESENCE_CHUNK), down: downs.slice(i, i + PRESENCE_CHUNK) } satisfies PresenceNews, stored);
      }
      try {
        await stored;
      } catch (err) {
        this.d.log.warn({ err, up: up.size, down: down.size }, 'storing agent presence failed; will retry');
        // Newer news of the same agents wins over what is put back.
        for (const [did, since] of up) if (!this.down.has(did) && !this.up.has(did) && this.localSince.get(did) === since) this.up.set(did, since);
        for (const did of down) if (!this.up.has(did) && !this.localSince.has(did)) this.down.add(did);
        if (!this.stopped) setTimeout(() => this.scheduleFlush(), 1000).unref();
      }
    })().finally(() => (this.flushing = null));
    return this.flushing;
  }

  /** Stores presence changes: this node's agents up (since when), and down. */
  private async store(ups: Array<[string, number]>, downs: string[]): Promise<void> {
    for (let i = 0; i < ups.length; i += PRESENCE_CHUNK) {
      await this.d.presence.bulkUpdate(
        ups.slice(i, i + PRESENCE_CHUNK).map(([did, since]) => ({ filter: { _id: did }, update: { $set: { node: this.d.nodeKey, since } }, upsert: true })),
      );
    }
    for (let i = 0; i < downs.length; i += PRESENCE_CHUNK) {
      await this.d.presence.deleteMany({ _id: { $in: downs.slice(i, i + PRESENCE_CHUNK) }, node: this.d.nodeKey });
    }
  }
}
