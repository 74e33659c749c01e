/**
 * Virtual shards and their owners. Actors are placed on a fixed number of shards by a stable hash
 * of their id (`shardOf`); each shard is owned by one node at a time, recorded in `cluster_shards`
 * as `{owner, epoch, leaseUntil}`, the way Akka Cluster Sharding places entities and Temporal
 * hands its history shards out under a range id.
 *
 * Ownership:
 * - taken by compare-and-swap: an update whose filter is the exact version read (owner, epoch,
 *   leaseUntil) of a shard that has no owner or whose lease ran out (this node's own too, after a
 *   lapse or a restart: the owner field names a node id, not a process). The new epoch comes
 *   from the cluster-wide counter, so it is higher than every epoch handed out before (the
 *   fencing token of fence.ts);
 * - kept by renewing every owned shard's lease each tick (a third of the lease);
 * - given up before the lease ends: a node counts itself owner only until the last successful
 *   renewal's send time + lease − margin, on the cluster's clock (the store's: store-clock.ts);
 *   then it emits `lost(…, 'expired')` and the others take over once the stored lease has ended;
 * - spread evenly: with N live nodes ranked by id, a node's share is floor(S/N), one more for the
 *   first S mod N, so the shares sum to S and a node never takes what another must give back
 *   (the largest share is ceil(S/N)). A node above its share releases at most `releasePerTick`
 *   shards a tick (after `beforeRelease` has stopped and written out their actors), so a joining
 *   node fills up gradually; shards with no live owner are taken at once;
 * - handed over in standby (a node cut off from the bus): it releases every shard at once and
 *   takes none, and the others leave it out of their shares; unless every live node is in
 *   standby (the bus is down for all), when each keeps what it holds.
 *
 * Events: `acquired(shard, epoch)` once a shard is this node's; `lost(shard, epoch, reason)` once
 * it is not (or may no longer be) — the actor host stops that shard's actors at once.
 */
import { randomInt } from 'node:crypto';
import { BulkUpdateError, DuplicateKeyError, type Collection } from '../store/types.js';
import { EPOCH_ISO, iso, systemClock, type Clock, type Timer } from './clock.js';
import { EPOCH_COUNTER_ID, type ClusterShardDoc, type EpochCounterDoc } from '../store/cluster-docs.js';
import type { Fence } from './fence.js';
import type { ClusterLog, Membership } from './membership.js';

/** The default number of virtual shards (CLUSTER_SHARDS). */
export const DEFAULT_SHARDS = 1024;

/**
 * The shard of an actor id: FNV-1a (32-bit) of its UTF-8 bytes, mixed by murmur3's finaliser so
 * every bit reaches the low bits the modulo keeps. Never change it: stored fences and live
 * ownership assume every node places every id the same way.
 */
export function shardOf(id: string, shards: number): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(id, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) % shards;
}

/** The `_id` of a shard's document. */
export const shardKey = (shard: number): string => `shard:${shard}`;

/** This node's share of `shards` among `liveIds` (sorted, distinct, this node included). */
export function fairShare(shards: number, liveIds: readonly string[], nodeId: string): number {
  const n = liveIds.length;
  const rank = liveIds.indexOf(nodeId);
  if (n === 0 || rank < 0) return 0;
  return Math.floor(shards / n) + (rank < shards % n ? 1 : 0);
}

export type ShardLossReason =
  /** Given back on purpose (rebalancing), after beforeRelease. */
  | 'released'
  /** Not renewed in time: this node stopped acting as owner before its lease ended. */
  | 'expired'
  /** Another node holds it now (found at a renewal). */
  | 'taken'
  /** This node stops (ShardManager.stop). */
  | 'stopped'
  /** Another process took this node's id over. */
  | 'evicted';

export interface ShardEvents {
  acquired: (shard: number, epoch: number) => void;
  lost: (shard: number, epoch: number, reason: ShardLossReason) => void;
}

export interface ShardManagerOptions {
  shards: Collection<ClusterShardDoc | EpochCounterDoc>;
  membership: Membership;
  /** The number of virtual shards (the same on every node). */
  shardCount: number;
  leaseMs: number;
  /** A node stops acting as owner this long before its lease ends. */
  marginMs: number;
  log: ClusterLog;
  clock?: Clock;
  /** Shards released per tick by a node above its share. Default ceil(shardCount / 64). */
  releasePerTick?: number;
  /**
   * Runs before a shard is given up on purpose (rebalancing, stop): stop the shard's actors and
   * write them out. The shard is still owned (fenced writes succeed) until it resolves; a
   * rejection keeps the shard for a later try.
   */
  beforeRelease?: (shard: number, epoch: number) => Promise<void>;
}

/** Concurrent store calls of one batch of takeovers. */
const CAS_CONCURRENCY = 16;

export class ShardManager {
  private readonly clock: Clock;
  private readonly nodeId: string;
  /** Owned shards and their epochs. */
  private readonly owned = new Map<number, number>();
  private validUntil = 0;
  private lapseTimer: Timer | undefined;
  private tickTimer: Timer | undefined;
  private ticking: Promise<void> | undefined;
  private running = false;
  private mismatchLogged = false;
  private standby = false;
  private readonly listeners: { [K in keyof ShardEvents]: Set<ShardEvents[K]> } = { acquired: new Set(), lost: new Set() };
  private readonly releasePerTick: number;

  constructor(private readonly options: ShardManagerOptions) {
    if (!Number.isInteger(options.shardCount) || options.shardCount < 1) throw new Error('shardCount must be a positive integer');
    if (!(options.marginMs >= 0 && options.marginMs * 3 < options.leaseMs)) throw new Error('the lease margin must be below a third of the lease');
    this.clock = options.clock ?? systemClock;
    this.nodeId = options.membership.nodeId;
    this.releasePerTick = options.releasePerTick ?? Math.ceil(options.shardCount / 64);
    options.membership.onEvicted(() => {
      this.running = false;
      this.tickTimer?.cancel();
      this.dropAll('evicted');
    });
  }

  on<K extends keyof ShardEvents>(event: K, listener: ShardEvents[K]): () => void {
    this.listeners[event].add(listener);
    return () => void this.listeners[event].delete(listener);
  }

  /** The shard of an actor id. */
  shardOf(id: string): number {
    return shardOf(id, this.options.shardCount);
  }

  /** Whether this node owns `shard` now (false from its safety deadline on, even before the timer runs). */
  isOwner(shard: number): boolean {
    return this.owned.has(shard) && this.clock.now() < this.validUntil;
  }

  /** The fence to write `shard`'s actors with, or null when this node does not own it now. */
  fence(shard: number): Fence | null {
    const epoch = this.owned.get(shard);
    return epoch !== undefined && this.clock.now() < this.validUntil ? { shard, epoch } : null;
  }

  /** The fence for an actor id (null when its shard is not this node's). */
  fenceFor(id: string): Fence | null {
    return this.fence(this.shardOf(id));
  }

  /**
   * Stops acting as owner of `shard` at once, when a write under its epoch was refused (another
   * node holds it under a higher one): `lost(…, 'taken')`. The next renewal finds the same.
   */
  relinquish(shard: number): void {
    const epoch = this.owned.get(shard);
    if (epoch !== undefined) this.drop(shard, epoch, 'taken');
  }

  /** Owned shards and their epochs (while the ownership is valid). */
  ownedShards(): Map<number, number> {
    return this.clock.now() < this.validUntil ? new Map(this.owned) : new Map();
  }

  /** Standby on: release every shard (when another node can take them) and take none; off: take the share again. */
  setStandby(standby: boolean): Promise<void> {
    this.standby = standby;
    return this.tick();
  }

  get inStandby(): boolean {
    return this.standby;
  }

  /** Creates the shard documents that are missing, takes this node's share, and keeps ticking. */
  async start(): Promise<void> {
    await this.ensureShardDocs();
    this.running = true;
    await this.tick();
    this.schedule();
  }

  /**
   * One round: renew owned shards, then release above this node's share or take up to it. Safe
   * to call at any time (e.g. on a `rebalance` broadcast); concurrent calls share one round.
   */
  tick(): Promise<void> {
    this.ticking ??= this.round()
      .catch((err: unknown) => this.options.log.error({ err }, 'a shard round failed'))
      .finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  /** Releases every owned shard (after beforeRelease for each) and stops ticking. */
  async stop(): Promise<void> {
    this.running = false;
    this.tickTimer?.cancel();
    await this.ticking;
    const shards = [...this.owned.entries()];
    await mapLimit(shards, CAS_CONCURRENCY, async ([shard, epoch]) => {
      try {
        await this.options.beforeRelease?.(shard, epoch);
      } catch (err) {
        this.options.log.error({ err, shard }, 'stopping a shard before release failed; its lease will run out instead');
        return;
      }
      await this.options.shards
        .updateOne({ _id: shardKey(shard), owner: this.nodeId, epoch }, { $set: { owner: null, leaseUntil: EPOCH_ISO } })
        .catch((err: unknown) => this.options.log.warn({ err, shard }, 'releasing a shard failed; its lease will run out instead'));
    });
    this.dropAll('stopped');
    this.lapseTimer?.cancel();
  }

  private schedule(): void {
    if (!this.running) return;
    this.tickTimer = this.clock.after(Math.floor(this.options.leaseMs / 3), () => this.tick().then(() => this.schedule()));
  }

  private async ensureShardDocs(): Promise<void> {
    const { shards: col, shardCount } = this.options;
    if ((await col.count({ shard: { $gte: 0, $lt: shardCount } })) === shardCount) return;
    const ops = Array.from({ length: shardCount }, (_, shard) => ({
      filter: { _id: shardKey(shard) },
      update: { $setOnInsert: { shard, owner: null, epoch: 0, leaseUntil: EPOCH_ISO, acquiredAt: null } },
      upsert: true,
    }));
    try {
      await col.bulkUpdate(ops);
    } catch (err) {
      // Nodes starting together race to insert the same documents: a duplicate is someone else's insert.
      if (!(err instanceof BulkUpdateError) || !err.failures.every((f) => f.error instanceof DuplicateKeyError)) throw err;
    }
  }

  private async round(): Promise<void> {
    this.checkLapse();
    if (!(await this.renew())) return;
    if (!this.running || !this.options.membership.isAlive()) return;
    const live = await this.options.membership.liveNodes();
    const mismatched = live.filter((n) => n.shards !== this.options.shardCount);
    if (mismatched.length > 0) {
      if (!this.mismatchLogged) {
        this.options.log.error(
          { shards: this.options.shardCount, others: mismatched.map((n) => ({ nodeId: n._id, shards: n.shards })) },
          'live nodes run with another shard count; taking no shards until every node has the same CLUSTER_SHARDS',
        );
      }
      this.mismatchLogged = true;
      return;
    }
    this.mismatchLogged = false;
    // Nodes in standby (cut off from the bus) get no share, unless all are (the bus is down for everyone).
    const others = live.filter((n) => n._id !== this.nodeId);
    const active = others.filter((n) => !n.standby);
    const allStandby = this.standby && active.length === 0;
    const ids = [...new Set([...(allStandby ? others : active).map((n) => n._id), ...(this.standby && !allStandby ? [] : [this.nodeId])])].sort();
    const share = fairShare(this.options.shardCount, ids, this.nodeId);
    const handOver = this.standby && !allStandby;
    if (this.owned.size > share) await this.release(handOver ? this.owned.size : Math.min(this.owned.size - share, this.releasePerTick));
    else if (this.owned.size < share) await this.acquire(share - this.owned.size);
  }

  /** Renews the leases of owned shards; false when the store failed. */
  private async renew(): Promise<boolean> {
    const col = this.options.shards;
    const sentAt = this.clock.now();
    if (this.owned.size === 0) return true;
    try {
      // Epochs name this process's holdings (a later process with the same node id has others).
      const held = { owner: this.nodeId, shard: { $in: [...this.owned.keys()] }, epoch: { $in: [...this.owned.values()] } };
      await col.updateMany(held, { $set: { leaseUntil: iso(sentAt + this.options.leaseMs) } });
      const mine = (await col.find(held)) as ClusterShardDoc[];
      const stored = new Map(mine.map((d) => [d.shard, d.epoch]));
      for (const [shard, epoch] of [...this.owned]) {
        if (stored.get(shard) !== epoch) this.drop(shard, epoch, 'taken');
      }
    } catch (err) {
      this.options.log.warn({ err, shards: this.owned.size }, 'renewing shard leases failed; retrying at the next round');
      return false;
    }
    // A renewal that came back after the deadline extends nothing: those shards are dropped here
    // and taken again (under a new epoch) once their stored lease has run out.
    this.checkLapse();
    if (this.owned.size > 0) {
      this.validUntil = sentAt + this.options.leaseMs - this.options.marginMs;
      this.armLapse();
    }
    return true;
  }

  private async release(count: number): Promise<void> {
    const picked = shuffle([...this.owned.entries()]).slice(0, count);
    for (const [shard, epoch] of picked) {
      try {
        await this.options.beforeRelease?.(shard, epoch);
      } catch (err) {
        this.options.log.warn({ err, shard }, 'stopping a shard before release failed; keeping it for now');
        continue;
      }
      if (this.owned.get(shard) !== epoch) continue; // lost meanwhile
      try {
        await this.options.shards.updateOne({ _id: shardKey(shard), owner: this.nodeId, epoch }, { $set: { owner: null, leaseUntil: EPOCH_ISO } });
      } catch (err) {
        // Its actors are stopped already: the lease runs out and another node takes it then.
        this.options.log.warn({ err, shard }, 'releasing a shard failed; its lease will run out instead');
      }
      this.drop(shard, epoch, 'released');
    }
  }

  private async acquire(count: number): Promise<void> {
    const col = this.options.shards;
    const now = iso(this.clock.now());
    const found = (await col.find({
      shard: { $gte: 0, $lt: this.options.shardCount },
      $or: [{ owner: null }, { leaseUntil: { $lte: now } }],
    })) as ClusterShardDoc[];
    const candidates = shuffle(found.filter((d) => !this.owned.has(d.shard))).slice(0, count);
    if (candidates.length === 0) return;
    const last = await this.reserveEpochs(candidates.length);
    const sentAt = this.clock.now();
    const validUntil = sentAt + this.options.leaseMs - this.options.marginMs;
    await mapLimit(candidates.map((d, i) => ({ d, reserved: last - candidates.length + 1 + i })), CAS_CONCURRENCY, async ({ d, reserved }) => {
      // The counter is the source of epochs; should it ever be behind a shard (restored from an old backup), stay above the shard.
      const epoch = Math.max(reserved, d.epoch + 1);
      let taken: ClusterShardDoc | EpochCounterDoc | null;
      try {
        taken = await col.findOneAndUpdate(
          { _id: d._id, owner: d.owner, epoch: d.epoch, leaseUntil: d.leaseUntil },
          { $set: { owner: this.nodeId, epoch, leaseUntil: iso(sentAt + this.options.leaseMs), acquiredAt: iso(sentAt) } },
        );
      } catch (err) {
        this.options.log.warn({ err, shard: d.shard }, 'taking a shard failed');
        return;
      }
      if (!taken) return; // another node was first
      if (!this.running) {
        // Stopping meanwhile: give it back rather than leave it to its lease.
        await col
          .updateOne({ _id: d._id, owner: this.nodeId, epoch }, { $set: { owner: null, leaseUntil: EPOCH_ISO } })
          .catch((err: unknown) => this.options.log.warn({ err, shard: d.shard }, 'giving a shard back failed; its lease will run out instead'));
        return;
      }
      // The earliest deadline of what is owned stays the deadline of all of it.
      this.checkLapse();
      if (this.owned.size === 0) this.validUntil = validUntil;
      this.owned.set(d.shard, epoch);
      this.armLapse();
      // Ownership intervals on the cluster's clock, for checking that no shard ever had two owners.
      this.options.log.debug?.({ shard: d.shard, epoch, from: this.clock.now() }, 'shard acquired');
      this.emit('acquired', d.shard, epoch);
    });
  }

  /** Reserves `count` epochs from the cluster-wide counter; returns the highest. */
  private async reserveEpochs(count: number): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      try {
        const doc = (await this.options.shards.findOneAndUpdate({ _id: EPOCH_COUNTER_ID }, { $inc: { next: count } }, { upsert: true })) as EpochCounterDoc;
        return doc.next;
      } catch (err) {
        // Two first reservations racing to create the counter: the loser increments the winner's.
        if (!(err instanceof DuplicateKeyError) || attempt > 0) throw err;
      }
    }
  }

  /** Stops acting as owner of everything once the validity of the last renewal has passed. */
  private checkLapse(): void {
    if (this.owned.size === 0 || this.clock.now() < this.validUntil) return;
    this.options.log.warn({ shards: this.owned.size }, 'shard leases were not renewed in time; this node stops acting as their owner');
    this.dropAll('expired');
  }

  private armLapse(): void {
    this.lapseTimer?.cancel();
    if (this.owned.size === 0) return;
    this.lapseTimer = this.clock.after(this.validUntil - this.clock.now(), () => this.checkLapse());
  }

  private dropAll(reason: ShardLossReason): void {
    for (const [shard, epoch] of [...this.owned]) this.drop(shard, epoch, reason);
  }

  private drop(shard: number, epoch: number, reason: ShardLossReason): void {
    if (this.owned.get(shard) !== epoch) return;
    this.owned.delete(shard);
    // A holding ends at the deadline at the latest, however late this runs (a paused process).
    const until = Math.min(this.validUntil, this.clock.now());
    this.options.log.debug?.({ shard, epoch, reason, until }, 'shard lost');
    this.emit('lost', shard, epoch, reason);
  }

  private emit<K extends keyof ShardEvents>(event: K, ...args: Parameters<ShardEvents[K]>): void {
    for (const l of [...this.listeners[event]]) {
      try {
        (l as (...a: Parameters<ShardEvents[K]>) => void)(...args);
      } catch (err) {
        this.options.log.error({ err, event }, 'a shard listener failed');
      }
    }
  }
}

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

async function mapLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
