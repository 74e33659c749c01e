/**
 * One node of a cluster as the server runs it: its bus, its membership, its shards, where its
 * actors live (placement.ts) and its peers (peers.ts), started and stopped in the order the
 * composition root needs:
 *
 *   start:  cluster indexes → membership (the node's lease) → peers (its subject) → … the
 *           services are built and started … → shards (ownership; actors restored per shard)
 *   stop:   shards released (their actors written out first, so others take them at once) →
 *           membership (the node's document removed) → bus
 *
 * It also keeps the list of live nodes fresh (read every third of the lease), which the peers'
 * gathers and the agents' presence use; and it hands its shards over to the other nodes when it
 * has been cut off from the bus for `busLossReleaseMs` while they are not (standby), taking its
 * share again once the bus is back.
 */
import { ensureClusterIndexes, type Collections } from '../store/collections.js';
import type { ClusterNodeDoc } from '../store/cluster-docs.js';
import type { Store } from '../store/types.js';
import type { Bus, BusLog } from './bus.js';
import { systemClock, type Clock, type Timer } from './clock.js';
import { Membership, type ClusterLog } from './membership.js';
import { Peers } from './peers.js';
import { ShardPlacement } from './placement.js';
import { ShardManager } from './shards.js';
import { StoreClock } from './store-clock.js';
import { ChangeLog } from './change-log.js';
import { clusterSubjects, type Subjects } from './subjects.js';

export interface ClusterNodeOptions {
  bus: Bus;
  c: Pick<Collections, 'clusterNodes' | 'clusterShards' | 'clusterClaims' | 'agentPresence' | 'tokenLedger'> & Partial<Pick<Collections, 'changeLog'>>;
  storeKind: Store['kind'];
  nodeId: string;
  clusterName: string;
  shardCount: number;
  leaseMs: number;
  marginMs: number;
  /** Deadline of a command to another node and of a gather. */
  requestTimeoutMs: number;
  /** Cut off from the bus this long, the node hands its shards over (CLUSTER_BUS_LOSS_RELEASE_MS). Default: the lease. */
  busLossReleaseMs?: number;
  /** How often the change log is read (CLUSTER_CHANGE_POLL_MS); it is kept only when `c.changeLog` is given. */
  changePollMs?: number;
  log: ClusterLog & BusLog;
  /**
   * The store's time: leases, claims and every cluster timestamp are judged on that one clock,
   * carried forward on `clock` between readings (store-clock.ts). Absent: on `clock` itself (tests
   * that drive one clock for every node).
   */
  storeTime?: () => Promise<number>;
  clock?: Clock;
  meta?: Record<string, string>;
}

/** A node's `<id>/<incarnation>`: names one process, so what a dead process left is told apart from its successor's. */
export const nodeKeyOf = (n: Pick<ClusterNodeDoc, '_id' | 'incarnation'>) => `${n._id}/${n.incarnation}`;

export interface ClusterStatus {
  nodeId: string;
  bus: Bus['status'];
  /** Whether this node's lease is fresh. */
  member: boolean;
  /** This node's clock minus the store's (ms), and the error of that figure; absent without a store clock. */
  storeClock?: { offsetMs: number; errorMs: number };
  nodes: number;
  ownedShards: number;
  shards: number;
  /** Cut off from the bus past busLossReleaseMs: the node has handed its shards over. */
  standby: boolean;
  busLossReleaseMs: number;
}

export class ClusterNode {
  readonly subjects: Subjects;
  readonly membership: Membership;
  readonly shards: ShardManager;
  readonly peers: Peers;
  /** The change log announcements go through (absent where the node is built without one, as in some tests). */
  private readonly changes: ChangeLog | undefined;
  readonly placement: ShardPlacement;
  readonly bus: Bus;
  readonly nodeId: string;
  /** The cluster's clock (the store's, when `storeTime` is given): for everything leased or claimed among the nodes. */
  readonly clock: Clock;
  private readonly storeClock: StoreClock | undefined;
  private live: ClusterNodeDoc[] = [];
  private liveKeySet = new Set<string>();
  private readonly liveListeners = new Set<(live: ReadonlySet<string>, left: string[]) => void>();
  private refreshTimer: Timer | undefined;
  private busLossTimer: Timer | undefined;
  private running = false;

  constructor(private readonly o: ClusterNodeOptions) {
    this.bus = o.bus;
    this.nodeId = o.nodeId;
    this.storeClock = o.storeTime ? new StoreClock({ time: o.storeTime, log: o.log, syncEveryMs: Math.floor(o.leaseMs / 3), ...(o.clock ? { base: o.clock } : {}) }) : undefined;
    this.clock = this.storeClock ?? o.clock ?? systemClock;
    this.subjects = clusterSubjects(o.clusterName);
    this.membership = new Membership({
      nodes: o.c.clusterNodes,
      nodeId: o.nodeId,
      shards: o.shardCount,
      leaseMs: o.leaseMs,
      marginMs: o.marginMs,
      log: o.log,
      clock: this.clock,
      meta: o.meta,
    });
    let placement: ShardPlacement | undefined;
    this.shards = new ShardManager({
      shards: o.c.clusterShards,
      membership: this.membership,
      shardCount: o.shardCount,
      leaseMs: o.leaseMs,
      marginMs: o.marginMs,
      log: o.log,
      clock: this.clock,
      beforeRelease: (shard) => placement!.beforeRelease(shard),
    });
    this.placement = placement = new ShardPlacement({ bus: o.bus, subjects: this.subjects, shards: this.shards, log: o.log, timeoutMs: o.requestTimeoutMs });
    this.peers = new Peers({
      bus: o.bus,
      subjects: this.subjects,
      nodeId: o.nodeId,
      nodeKey: this.nodeKey,
      liveNodeIds: () => this.live.map((n) => n._id),
      log: o.log,
      gatherTimeoutMs: o.requestTimeoutMs,
    });
    if (o.c.changeLog) {
      const peers = this.peers;
      this.changes = new ChangeLog({
        log: o.c.changeLog,
        from: this.nodeKey,
        pollMs: o.changePollMs ?? 5000,
        // A writer has this long to land the entries it numbered; a node paused longer has lost its lease anyway.
        gapWaitMs: 2 * o.leaseMs,
        deliver: (topic, data) => void peers.deliverLogged(topic, data),
        onLost: () => peers.changesLost(),
        logger: o.log,
      });
      peers.useChangeLog(this.changes);
    }
  }

  /** Reads the change log every period from now on: call once every handler of an announcement is in place. */
  followChanges(): void {
    this.changes?.follow();
  }

  /** `<nodeId>/<incarnation>` of this process. */
  get nodeKey(): string {
    return `${this.nodeId}/${this.membership.incarnation}`;
  }

  get leaseMs(): number {
    return this.o.leaseMs;
  }

  get marginMs(): number {
    return this.o.marginMs;
  }

  /** The store's clock read, indexes, the node's lease (waiting out a previous process with the same id), its subject. */
  async start(): Promise<void> {
    await this.storeClock?.start();
    await ensureClusterIndexes(this.o.c, this.o.storeKind);
    await this.changes?.start();
    await this.membership.start();
    this.running = true;
    await this.refreshLive();
    this.peers.start();
    this.scheduleRefresh();
    this.bus.onStatus((status) => this.busStatusChanged(status));
  }

  /** Takes this node's share of the shards (their actors are restored as each is taken). */
  async startShards(): Promise<void> {
    await this.shards.start();
  }

  /** Gives every shard back, after writing its actors out, so the other nodes take them at once. */
  async stopShards(): Promise<void> {
    this.placement.stopServing();
    await this.shards.stop();
  }

  /** Leaves the cluster: the node's document goes, then the bus is drained and closed. */
  async stop(): Promise<void> {
    this.running = false;
    this.refreshTimer?.cancel();
    this.busLossTimer?.cancel();
    this.storeClock?.stop();
    this.peers.stop();
    await this.changes?.stop();
    await this.membership.stop().catch((err: unknown) => this.o.log.warn({ err }, 'removing this node from the cluster failed; its lease will run out'));
    await this.bus.close();
  }

  /** Ids of the nodes whose leases run, as last read (this one included). */
  liveNodeIds(): string[] {
    return this.live.map((n) => n._id);
  }

  /** `<id>/<incarnation>` of the live nodes, as last read. */
  liveKeys(): ReadonlySet<string> {
    return this.liveKeySet;
  }

  /** Calls `fn` when the live nodes change, with the keys of the nodes that left. */
  onLiveChange(fn: (live: ReadonlySet<string>, left: string[]) => void): void {
    this.liveListeners.add(fn);
  }

  status(): ClusterStatus {
    return {
      nodeId: this.nodeId,
      bus: this.bus.status,
      member: this.membership.isAlive(),
      ...(this.storeClock ? { storeClock: this.storeClock.status() } : {}),
      nodes: this.live.length,
      ownedShards: this.shards.ownedShards().size,
      shards: this.o.shardCount,
      standby: this.shards.inStandby,
      busLossReleaseMs: this.busLossReleaseMs,
    };
  }

  private get busLossReleaseMs(): number {
    return this.o.busLossReleaseMs ?? this.o.leaseMs;
  }

  /** Standby once the bus has been away for busLossReleaseMs; back at once when it reconnects. */
  private busStatusChanged(status: Bus['status']): void {
    if (!this.running) return;
    if (status === 'connected') {
      this.busLossTimer?.cancel();
      this.busLossTimer = undefined;
      if (this.shards.inStandby) {
        this.o.log.info({ nodeId: this.nodeId }, 'the cluster bus is back; this node takes its share of the shards again');
        void this.setStandby(false);
      }
      return;
    }
    this.busLossTimer ??= this.clock.after(this.busLossReleaseMs, () => {
      this.busLossTimer = undefined;
      if (!this.running || this.bus.status === 'connected') return;
      this.o.log.warn(
        { nodeId: this.nodeId, busLossReleaseMs: this.busLossReleaseMs, ownedShards: this.shards.ownedShards().size },
        'cut off from the cluster bus: this node hands its shards over to the connected nodes until the bus is back',
      );
      return this.setStandby(true);
    });
  }

  private async setStandby(standby: boolean): Promise<void> {
    try {
      await this.membership.setStandby(standby);
      await this.shards.setStandby(standby);
    } catch (err) {
      this.o.log.error({ err, standby }, 'changing standby failed');
    }
  }

  /** Reads the live nodes now (also done every third of the lease). */
  async refreshLive(): Promise<void> {
    let live: ClusterNodeDoc[];
    try {
      live = await this.membership.liveNodes();
    } catch (err) {
      this.o.log.warn({ err }, 'reading the live nodes failed; keeping the last list');
      return;
    }
    const keys = new Set(live.map(nodeKeyOf));
    const left = [...this.liveKeySet].filter((k) => !keys.has(k));
    const joined = [...keys].some((k) => !this.liveKeySet.has(k));
    this.live = live;
    this.liveKeySet = keys;
    if (left.length === 0 && !joined) return;
    for (const fn of this.liveListeners) {
      try {
        fn(keys, left);
      } catch (err) {
        this.o.log.error({ err }, 'a live-nodes listener failed');
      }
    }
  }

  private scheduleRefresh(): void {
    if (!this.running) return;
    this.refreshTimer = this.clock.after(Math.floor(this.o.leaseMs / 3), () => this.refreshLive().then(() => this.scheduleRefresh()));
  }
}
