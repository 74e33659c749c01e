/**
 * The active agents' list fields, kept in memory as they change, so that a page of
 * `GET /api/agents` filters and orders rows already at hand instead of reading the fleet from the
 * store on every request (docs/fleet.md, "The agents list").
 *
 * It is read from the store once at start. An agent's row is read again when the areas that own
 * its record say it changed (registered, decided, deleted: the fleet's hooks; its LLM settings:
 * the LLM configuration's hook), one store read per burst of changes. Its lastSeen follows the
 * fleet's record of each disconnection at once (the store's copy is written in batches). A read
 * waits for changes already announced, so whoever changed an agent sees the change in the list.
 *
 * In a cluster, a node's changes are announced to the others (a broadcast, and the store's change
 * log for one the bus lost), which read those rows again; every row is read again only when this
 * node missed announcements for good (docs/cluster.md, "What each node reads").
 */
import type { ServiceCore } from './core.js';
import type { PeerNodes } from './ports.js';
import type { AgentDoc } from '../store/collections.js';
import type { Capability } from '../domain/capabilities.js';

const FIELDS = { status: 1, name: 1, capabilities: 1, llmProvider: 1, llmModel: 1, registeredAt: 1, lastSeen: 1 } as const;
/** Reads of changed agents, and broadcasts of them, at most this many DIDs each (a bus message stays well under NATS's 1 MiB). */
const READ_CHUNK = 1000;
/** A failed read is tried again after this long, doubling up to RETRY_MAX_MS while it keeps failing. */
const RETRY_MS = 500;
const RETRY_MAX_MS = 30_000;
/** In a cluster: disconnections told to the other nodes together, this long after the first. */
const SEEN_BROADCAST_MS = 500;

type Listed = Pick<AgentDoc, '_id' | 'status' | 'name' | 'capabilities' | 'llmProvider' | 'llmModel' | 'registeredAt' | 'lastSeen'>;

/** One active agent of the list. */
export class RosterRow {
  /** The name lowercased, the list's name order (the name itself when it has no capitals). */
  readonly nameKey: string;
  constructor(
    readonly did: string,
    readonly name: string,
    readonly capabilities: readonly Capability[],
    readonly llmProvider: string | null,
    readonly llmModel: string | null,
    readonly registeredAt: string,
    /** Its last activity as recorded when it last disconnected (ms); -Infinity: never connected. */
    public lastSeen: number,
  ) {
    const lower = name.toLowerCase();
    this.nameKey = lower === name ? name : lower;
  }
}

export class AgentRoster {
  private readonly rows = new Map<string, RosterRow>();
  /** The rows as an array, made again after a change (reads iterate it). */
  private snapshot: RosterRow[] | null = null;
  /** One array per distinct capability set, shared by the rows that hold it. */
  private readonly capabilitySets = new Map<string, readonly Capability[]>();
  /** Agents announced changed and not read yet, and the read in progress. */
  private dirty = new Set<string>();
  private reading: Promise<void> | null = null;
  /**
   * In a cluster, the read of every row (announcements were missed for good), and while it runs
   * the agents read since it began: their rows are newer than what it brings, which it leaves be.
   * Pages never wait for it.
   */
  private reloading: Promise<void> | null = null;
  private readSinceReload: Set<string> | null = null;
  /** Agents whose read failed, read again when `retryTimer` fires. */
  private readonly failed = new Set<string>();
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs = RETRY_MS;
  private stopped = false;
  private seenToTell: { dids: string[]; ms: number[] } | null = null;

  constructor(
    private readonly ctx: ServiceCore,
    private readonly peers?: PeerNodes,
  ) {
    if (peers?.clustered) {
      peers.onBroadcast('agent-roster', (data) => void this.read((data as { dids: string[] }).dids));
      peers.onBroadcast('agent-roster.seen', (data) => {
        const { dids, ms } = data as { dids: string[]; ms: number[] };
        for (let i = 0; i < dids.length; i++) this.seenHere(dids[i]!, ms[i]!);
      });
      peers.onChangesLost(() => this.reloadAll());
    }
  }

  /** Reads every active agent, once at start. */
  async start(): Promise<void> {
    await this.loadAll();
  }

  /** No more reads (the store is closing); waits for the one in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await Promise.all([this.reading, this.reloading]);
  }

  /** The rows, after the changes announced so far have been read (or failed to be: see `retry`). */
  async all(): Promise<readonly RosterRow[]> {
    while (this.reading) await this.reading;
    return (this.snapshot ??= [...this.rows.values()]);
  }

  /** These agents' records changed in the store: read them again (and have the other nodes do so). */
  changed(dids: readonly string[]): Promise<void> {
    if (this.peers?.clustered) {
      for (let i = 0; i < dids.length; i += READ_CHUNK) this.peers.announce('agent-roster', { dids: dids.slice(i, i + READ_CHUNK) });
    }
    return this.read(dids);
  }

  /** An agent disconnected, last active at `ms`. */
  seen(did: string, ms: number): void {
    this.seenHere(did, ms);
    if (!this.peers?.clustered) return;
    if (!this.seenToTell) {
      const batch = (this.seenToTell = { dids: [], ms: [] });
      setTimeout(() => this.tellSeen(batch), SEEN_BROADCAST_MS).unref();
    }
    this.seenToTell.dids.push(did);
    this.seenToTell.ms.push(ms);
    if (this.seenToTell.dids.length >= READ_CHUNK) this.tellSeen(this.seenToTell);
  }

  /** Sends a batch of disconnections to the other nodes, once (when full, or when its time is up). */
  private tellSeen(batch: { dids: string[]; ms: number[] }): void {
    if (this.seenToTell !== batch) return;
    this.seenToTell = null;
    this.peers!.announce('agent-roster.seen', batch);
  }

  private seenHere(did: string, ms: number): void {
    const row = this.rows.get(did);
    if (row && ms > row.lastSeen) row.lastSeen = ms;
  }

  private read(dids: readonly string[]): Promise<void> {
    if (this.stopped) return Promise.resolve();
    for (const did of dids) this.dirty.add(did);
    return this.schedule();
  }

  private reloadAll(): void {
    if (this.stopped || this.reloading) return;
    const readSince = (this.readSinceReload = new Set());
    this.reloading = this.ctx.c.agents
      .find({ status: 'active' }, { projection: FIELDS })
      .then((found) => this.replaceAll(found, readSince))
      .catch((err: unknown) => {
        this.ctx.log.error({ err, retryInMs: RETRY_MAX_MS }, 'agents list: reading the agents failed; will retry');
        setTimeout(() => this.reloadAll(), RETRY_MAX_MS).unref();
      })
      .finally(() => {
        this.readSinceReload = null;
        this.reloading = null;
      });
  }

  /** One read at a time, so an older answer never overwrites a newer one. */
  private schedule(): Promise<void> {
    this.reading ??= this.drain().finally(() => {
      this.reading = null;
    });
    return this.reading;
  }

  /** Reads the agents announced changed, a chunk at a time, until none is left. */
  private async drain(): Promise<void> {
    while (this.dirty.size > 0) {
      const dids = [...this.dirty].slice(0, READ_CHUNK);
      for (const did of dids) this.dirty.delete(did);
      try {
        const found = await this.ctx.c.agents.find({ _id: { $in: dids } }, { projection: FIELDS });
        const byId = new Map(found.map((a) => [a._id, a]));
        for (const did of dids) {
          this.put(did, byId.get(did));
          this.readSinceReload?.add(did);
        }
        this.retryMs = RETRY_MS;
      } catch (err) {
        // The rows stay as they were meanwhile: a list asked for now is not held up by a store that fails.
        this.ctx.log.error({ err, agents: dids.length, retryInMs: this.retryMs }, 'agents list: reading changed agents failed; will retry');
        this.retry(dids);
      }
    }
  }

  private retry(dids: readonly string[]): void {
    for (const did of dids) this.failed.add(did);
    if (this.retryTimer || this.stopped) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      const again = [...this.failed];
      this.failed.clear();
      void this.read(again);
    }, this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
  }

  private async loadAll(): Promise<void> {
    this.replaceAll(await this.ctx.c.agents.find({ status: 'active' }, { projection: FIELDS }), new Set());
  }

  /** Every row from a read of all active agents, except those read again since it began (`keep`). */
  private replaceAll(found: readonly Listed[], keep: ReadonlySet<string>): void {
    const present = new Set<string>();
    for (const a of found) {
      present.add(a._id);
      if (!keep.has(a._id)) this.put(a._id, a);
    }
    for (const did of [...this.rows.keys()]) if (!present.has(did) && !keep.has(did)) this.put(did, undefined);
  }

  /** Sets an agent's row from its record (none, or not active: no row). */
  private put(did: string, a: Listed | undefined): void {
    this.snapshot = null;
    if (!a || a.status !== 'active') {
      this.rows.delete(did);
      return;
    }
    const stored = a.lastSeen ? Date.parse(a.lastSeen) : -Infinity;
    const was = this.rows.get(did)?.lastSeen ?? -Infinity;
    this.rows.set(
      did,
      new RosterRow(did, a.name, this.capabilitySet(a.capabilities), a.llmProvider ?? null, a.llmModel ?? null, a.registeredAt, Math.max(stored, was)),
    );
  }

  private capabilitySet(caps: readonly Capability[]): readonly Capability[] {
    const key = caps.join(',');
    let set = this.capabilitySets.get(key);
    if (!set) this.capabilitySets.set(key, (set = Object.freeze([...caps])));
    return set;
  }
}
