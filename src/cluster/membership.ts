/**
 * Cluster membership in the store: each node keeps a document in `cluster_nodes` whose lease it
 * renews every third of the lease; a node whose lease ran out is gone. Leases are judged on the
 * clock given (the store's: store-clock.ts), so the nodes' own clocks may disagree.
 *
 * A node id belongs to one process at a time. Each start draws a random incarnation; a start
 * that finds its id held by a live incarnation waits for that lease to end (the previous process
 * crashed and will not renew it) and is refused with NodeIdInUseError if it is renewed meanwhile
 * (another process runs with the same id). A node whose document was taken over by a newer
 * incarnation (it could not renew for a whole lease) learns it at its next renewal: `evicted`.
 */
import { randomBytes } from 'node:crypto';
import { DuplicateKeyError, type Collection } from '../store/types.js';
import { iso, systemClock, type Clock, type Timer } from './clock.js';
import type { ClusterNodeDoc } from '../store/cluster-docs.js';

/** What the cluster modules log (a pino logger fits). */
export interface ClusterLog {
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  debug?(obj: object, msg: string): void;
}

/** Another live process holds this node id. */
export class NodeIdInUseError extends Error {
  constructor(
    readonly nodeId: string,
    readonly leaseUntil: string,
  ) {
    super(`node id "${nodeId}" is in use by another running process (its lease runs until ${leaseUntil}); give each node its own STEWARD_NODE_ID`);
    this.name = 'NodeIdInUseError';
  }
}

export interface MembershipOptions {
  nodes: Collection<ClusterNodeDoc>;
  nodeId: string;
  /** The shard count this node runs with (recorded for the others to check). */
  shards: number;
  leaseMs: number;
  /** The node counts itself alive until this long before its stored lease ends. */
  marginMs: number;
  log: ClusterLog;
  clock?: Clock;
  meta?: Record<string, string>;
}

export class Membership {
  readonly nodeId: string;
  readonly incarnation = randomBytes(9).toString('base64url');
  private readonly clock: Clock;
  private validUntil = 0;
  private timer: Timer | undefined;
  private running = false;
  private renewing: Promise<boolean> | undefined;
  private standby = false;
  private readonly evictedListeners = new Set<() => void>();

  constructor(private readonly options: MembershipOptions) {
    if (!(options.marginMs >= 0 && options.marginMs * 3 < options.leaseMs)) throw new Error('the lease margin must be below a third of the lease');
    this.nodeId = options.nodeId;
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Registers the node and starts renewing its lease. Waits out the lease of a previous process
   * with the same node id (at most one lease); throws NodeIdInUseError when that lease is renewed.
   */
  async start(): Promise<void> {
    await this.register();
    this.running = true;
    this.schedule();
  }

  /** Whether this node may count itself a member now (its last renewal is fresh enough). */
  isAlive(): boolean {
    return this.clock.now() < this.validUntil;
  }

  /** The nodes whose leases run, by id (this one included while its lease runs). */
  async liveNodes(): Promise<ClusterNodeDoc[]> {
    return this.options.nodes.find({ leaseUntil: { $gt: iso(this.clock.now()) } }, { sort: { _id: 1 } });
  }

  /** Called once if another incarnation took this node's id over; the node must stop. */
  onEvicted(listener: () => void): () => void {
    this.evictedListeners.add(listener);
    return () => void this.evictedListeners.delete(listener);
  }

  /** Renews the lease now; false when the store failed (the lease runs on) or the node was evicted. */
  renew(): Promise<boolean> {
    this.renewing ??= this.renewOnce().finally(() => (this.renewing = undefined));
    return this.renewing;
  }

  /**
   * Marks the node as in standby (cut off from the bus: the others leave it out of their shares)
   * or back, stored at once (and at every renewal after).
   */
  async setStandby(standby: boolean): Promise<void> {
    this.standby = standby;
    await this.renewing;
    await this.renew();
  }

  /** Stops renewing and removes the node's document, so the others rebalance at once. */
  async stop(): Promise<void> {
    this.running = false;
    this.timer?.cancel();
    this.validUntil = 0;
    await this.renewing;
    await this.options.nodes.deleteOne({ _id: this.nodeId, incarnation: this.incarnation });
  }

  private doc(sentAt: number): ClusterNodeDoc {
    return {
      _id: this.nodeId,
      incarnation: this.incarnation,
      startedAt: iso(sentAt),
      renewedAt: iso(sentAt),
      leaseUntil: iso(sentAt + this.options.leaseMs),
      shards: this.options.shards,
      meta: this.options.meta ?? {},
    };
  }

  private async register(): Promise<void> {
    const { nodes, leaseMs, marginMs, log } = this.options;
    let seen: string | undefined;
    for (;;) {
      const sentAt = this.clock.now();
      const existing = await nodes.findById(this.nodeId);
      let registered = false;
      if (!existing) {
        try {
          await nodes.insertOne(this.doc(sentAt));
          registered = true;
        } catch (err) {
          if (!(err instanceof DuplicateKeyError)) throw err;
        }
      } else if (existing.leaseUntil <= iso(sentAt)) {
        // The previous process's lease is over: take the id over from exactly that version.
        const r = await nodes.updateOne({ _id: this.nodeId, incarnation: existing.incarnation, leaseUntil: existing.leaseUntil }, { $set: { ...this.doc(sentAt) } });
        registered = r.matched === 1;
      } else {
        if (seen !== undefined && existing.leaseUntil > seen) throw new NodeIdInUseError(this.nodeId, existing.leaseUntil);
        seen = existing.leaseUntil;
        log.warn({ nodeId: this.nodeId, leaseUntil: existing.leaseUntil }, 'this node id is held by an earlier process; waiting for its lease to end');
        await new Promise<void>((resolve) => this.clock.after(Date.parse(existing.leaseUntil) - this.clock.now() + 1, resolve));
      }
      if (registered) {
        this.validUntil = sentAt + leaseMs - marginMs;
        return;
      }
    }
  }

  private async renewOnce(): Promise<boolean> {
    const sentAt = this.clock.now();
    try {
      const r = await this.options.nodes.updateOne(
        { _id: this.nodeId, incarnation: this.incarnation },
        { $set: { renewedAt: iso(sentAt), leaseUntil: iso(sentAt + this.options.leaseMs), standby: this.standby } },
      );
      if (r.matched === 0) {
        this.evicted();
        return false;
      }
      this.validUntil = sentAt + this.options.leaseMs - this.options.marginMs;
      return true;
    } catch (err) {
      this.options.log.warn({ err, nodeId: this.nodeId }, 'renewing the node lease failed; retrying');
      return false;
    }
  }

  private evicted(): void {
    if (!this.running) return;
    this.running = false;
    this.validUntil = 0;
    this.timer?.cancel();
    this.options.log.error({ nodeId: this.nodeId }, 'this node was replaced by a newer process with the same node id; it must stop');
    for (const l of [...this.evictedListeners]) {
      try {
        l();
      } catch (err) {
        this.options.log.error({ err }, 'an eviction listener failed');
      }
    }
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = this.clock.after(Math.floor(this.options.leaseMs / 3), () =>
      this.renew().then(
        () => this.schedule(),
        (err: unknown) => {
          this.options.log.error({ err }, 'node lease renewal failed unexpectedly');
          this.schedule();
        },
      ),
    );
  }
}
