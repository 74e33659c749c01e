/**
 * Once-only work among the nodes, decided by conditional writes in the store:
 *
 * - FiringClaims: a cron firing `(scheduleId, fireTime)` is run by the one node whose insert of
 *   its claim document succeeds; every other node's insert fails on the `_id`. At most once: a
 *   node that dies between its claim and starting the run loses that firing, as a single node
 *   that is down at a firing does. Claims are kept `keepMs` and then swept.
 * - NamedLease: one holder at a time for a named job (the token roll-up), renewed every third of
 *   the lease, taken over by compare-and-swap once it has run out; the holder counts itself holder
 *   only until its last renewal's send time + lease − margin. `epoch` rises at every change of
 *   holder (a fencing token for what the holder writes). The lease's document also keeps a note
 *   of the holder's work, written only under the epoch held, so a holder that lost the lease
 *   without noticing can no longer change it (the token roll-up journals its batches there).
 * - WorkQueue: items of a collection (e.g. bridge deliveries) claimed one at a time by a
 *   conditional update with a deadline; completed or released by the claim's token, and claimable
 *   again once the deadline passes (a node died, or is too slow): at least once, so the work must
 *   be idempotent or checked (a webhook delivery keeps its body and signature across attempts).
 */
import { nanoid } from 'nanoid';
import { DuplicateKeyError, type Collection, type Doc, type Filter, type SortSpec, type Update } from '../store/types.js';
import { EPOCH_ISO, iso, systemClock, type Clock, type Timer } from './clock.js';
import type { ClusterClaimDoc, FiringClaimDoc, LeaseDoc } from '../store/cluster-docs.js';
import type { ClusterLog } from './membership.js';

// ---------------------------------------------------------------------------------------------
// Cron firings
// ---------------------------------------------------------------------------------------------

export interface FiringClaimsOptions {
  claims: Collection<ClusterClaimDoc>;
  /** Who claims: the node id and its incarnation (a restarted process is another claimer). */
  owner: string;
  clock?: Clock;
  /** How long a claim is kept before `sweep` removes it. Default 7 days. */
  keepMs?: number;
}

export class FiringClaims {
  private readonly clock: Clock;
  private readonly keepMs: number;

  constructor(private readonly options: FiringClaimsOptions) {
    this.clock = options.clock ?? systemClock;
    this.keepMs = options.keepMs ?? 7 * 24 * 3600_000;
  }

  /**
   * True when this node is the one to run the firing of `scheduleId` at `fireTime` (the time the
   * expression named, the same on every node). A retry of a claim whose answer was lost finds
   * its own claim and is true again. Store errors are thrown: nothing was decided.
   */
  async claim(scheduleId: string, fireTime: Date | string): Promise<boolean> {
    const at = typeof fireTime === 'string' ? new Date(fireTime).toISOString() : fireTime.toISOString();
    const id = `fire:${scheduleId}@${at}`;
    const now = this.clock.now();
    const doc: FiringClaimDoc = {
      _id: id,
      kind: 'fire',
      scheduleId,
      fireTime: at,
      owner: this.options.owner,
      claimedAt: iso(now),
      expiresAt: iso(Math.max(now, Date.parse(at)) + this.keepMs),
    };
    try {
      await this.options.claims.insertOne(doc);
      return true;
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err;
      const existing = await this.options.claims.findById(id);
      return existing?.owner === this.options.owner;
    }
  }

  /** Removes claims past their keeping time; returns how many. */
  sweep(): Promise<number> {
    return this.options.claims.deleteMany({ kind: 'fire', expiresAt: { $lte: iso(this.clock.now()) } });
  }
}

// ---------------------------------------------------------------------------------------------
// Named leases
// ---------------------------------------------------------------------------------------------

export type LeaseLossReason = 'released' | 'expired' | 'taken';

export interface NamedLeaseOptions {
  claims: Collection<ClusterClaimDoc>;
  name: string;
  /** Who holds it: the node id and its incarnation. */
  owner: string;
  leaseMs: number;
  /** The holder stops counting itself holder this long before the stored lease ends. */
  marginMs: number;
  log: ClusterLog;
  clock?: Clock;
}

export class NamedLease {
  private readonly clock: Clock;
  private readonly id: string;
  private epoch: number | undefined;
  private validUntil = 0;
  private lapseTimer: Timer | undefined;
  private tickTimer: Timer | undefined;
  private running = false;
  private attempt: Promise<boolean> | undefined;
  private readonly acquiredListeners = new Set<(epoch: number) => void>();
  private readonly lostListeners = new Set<(epoch: number, reason: LeaseLossReason) => void>();

  constructor(private readonly options: NamedLeaseOptions) {
    if (!(options.marginMs >= 0 && options.marginMs * 3 < options.leaseMs)) throw new Error('the lease margin must be below a third of the lease');
    this.clock = options.clock ?? systemClock;
    this.id = `lease:${options.name}`;
  }

  onAcquired(listener: (epoch: number) => void): () => void {
    this.acquiredListeners.add(listener);
    return () => void this.acquiredListeners.delete(listener);
  }

  onLost(listener: (epoch: number, reason: LeaseLossReason) => void): () => void {
    this.lostListeners.add(listener);
    return () => void this.lostListeners.delete(listener);
  }

  /** The epoch of the holding, while this node holds the lease (by its safety deadline); else null. */
  held(): { epoch: number } | null {
    return this.epoch !== undefined && this.clock.now() < this.validUntil ? { epoch: this.epoch } : null;
  }

  /** The note the holders keep in the lease's document (null when none was written). */
  async readNote(): Promise<Record<string, unknown> | null> {
    const doc = (await this.options.claims.findById(this.id)) as LeaseDoc | null;
    return doc?.note ?? null;
  }

  /**
   * Replaces the note, under `epoch` alone: false (and nothing written) once another holding has
   * begun, even when this node has not noticed yet that its lease lapsed.
   */
  async writeNote(epoch: number, note: Record<string, unknown>): Promise<boolean> {
    const r = await this.options.claims.updateOne({ _id: this.id, epoch }, { $set: { note } });
    return r.matched === 1;
  }

  /** Tries now, then every third of the lease: renews while held, takes over once it ran out. */
  async start(): Promise<void> {
    this.running = true;
    await this.tryAcquire();
    this.schedule();
  }

  /** Stops trying and gives the lease up if held. */
  async stop(): Promise<void> {
    this.running = false;
    this.tickTimer?.cancel();
    await this.attempt;
    await this.release();
  }

  /** Renews the lease if held, else takes it if free or run out; true when held afterwards. */
  tryAcquire(): Promise<boolean> {
    this.attempt ??= this.acquireOnce()
      .catch((err: unknown) => {
        this.options.log.warn({ err, lease: this.options.name }, 'a lease attempt failed; retrying');
        return this.held() !== null;
      })
      .finally(() => (this.attempt = undefined));
    return this.attempt;
  }

  /** Gives the lease up (another node may take it at once). */
  async release(): Promise<void> {
    const epoch = this.epoch;
    if (epoch === undefined) return;
    this.lose('released');
    await this.options.claims
      .updateOne({ _id: this.id, owner: this.options.owner, epoch }, { $set: { owner: null, leaseUntil: EPOCH_ISO } })
      .catch((err: unknown) => this.options.log.warn({ err, lease: this.options.name }, 'releasing a lease failed; it will run out instead'));
  }

  private async acquireOnce(): Promise<boolean> {
    const { claims, owner, leaseMs, marginMs } = this.options;
    this.checkLapse();
    const sentAt = this.clock.now();
    const leaseUntil = iso(sentAt + leaseMs);
    if (this.epoch !== undefined) {
      const r = await claims.updateOne({ _id: this.id, owner, epoch: this.epoch }, { $set: { leaseUntil } });
      this.checkLapse();
      if (r.matched === 1 && this.epoch !== undefined) {
        this.hold(this.epoch, sentAt + leaseMs - marginMs);
        return true;
      }
      if (r.matched === 0) this.lose('taken');
    }
    const doc = (await claims.findById(this.id)) as LeaseDoc | null;
    if (!doc) {
      const fresh: LeaseDoc = { _id: this.id, kind: 'lease', owner, epoch: 1, leaseUntil, acquiredAt: iso(sentAt) };
      try {
        await claims.insertOne(fresh);
      } catch (err) {
        if (err instanceof DuplicateKeyError) return false;
        throw err;
      }
      this.take(1, sentAt + leaseMs - marginMs);
      return true;
    }
    // Free, run out, or this node's own from before a lapse: take over exactly the version read.
    if (doc.owner !== null && doc.owner !== owner && doc.leaseUntil > iso(sentAt)) return false;
    const taken = await claims.findOneAndUpdate(
      { _id: this.id, owner: doc.owner, epoch: doc.epoch, leaseUntil: doc.leaseUntil },
      { $set: { owner, leaseUntil, acquiredAt: iso(sentAt) }, $inc: { epoch: 1 } },
    );
    if (!taken) return false;
    this.take((taken as LeaseDoc).epoch, sentAt + leaseMs - marginMs);
    return true;
  }

  private take(epoch: number, validUntil: number): void {
    this.hold(epoch, validUntil);
    for (const l of [...this.acquiredListeners]) this.call(() => l(epoch));
  }

  private hold(epoch: number, validUntil: number): void {
    this.epoch = epoch;
    this.validUntil = validUntil;
    this.lapseTimer?.cancel();
    this.lapseTimer = this.clock.after(validUntil - this.clock.now(), () => this.checkLapse());
  }

  private checkLapse(): void {
    if (this.epoch !== undefined && this.clock.now() >= this.validUntil) {
      this.options.log.warn({ lease: this.options.name }, 'a lease was not renewed in time; this node stops acting as its holder');
      this.lose('expired');
    }
  }

  private lose(reason: LeaseLossReason): void {
    const epoch = this.epoch;
    if (epoch === undefined) return;
    this.epoch = undefined;
    this.validUntil = 0;
    this.lapseTimer?.cancel();
    for (const l of [...this.lostListeners]) this.call(() => l(epoch, reason));
  }

  private call(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.options.log.error({ err, lease: this.options.name }, 'a lease listener failed');
    }
  }

  private schedule(): void {
    if (!this.running) return;
    this.tickTimer = this.clock.after(Math.floor(this.options.leaseMs / 3), () => this.tryAcquire().then(() => this.schedule()));
  }
}

// ---------------------------------------------------------------------------------------------
// Work items
// ---------------------------------------------------------------------------------------------

/** The fields a claimable item carries (absent or null while unclaimed). */
export interface ClaimableDoc extends Doc {
  claimedBy?: string | null;
  claimedUntil?: string | null;
  claimToken?: string | null;
}

/** A held claim on one item: what completes, extends or releases it. */
export interface WorkClaim {
  id: string;
  token: string;
  until: string;
}

export interface WorkQueueOptions<T extends ClaimableDoc> {
  items: Collection<T>;
  /** Who claims: the node id and its incarnation. */
  owner: string;
  /** How long a claim holds before the item may be claimed again. */
  claimMs: number;
  clock?: Clock;
}

export class WorkQueue<T extends ClaimableDoc> {
  private readonly clock: Clock;

  constructor(private readonly options: WorkQueueOptions<T>) {
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Claims the first item matching `filter` (in `sort` order) that is unclaimed or whose claim
   * ran out; null when there is none. One node gets each claim.
   */
  async claim(filter: Filter = {}, sort?: SortSpec): Promise<{ item: T; claim: WorkClaim } | null> {
    const now = this.clock.now();
    const token = nanoid();
    const until = iso(now + this.options.claimMs);
    // `claimedUntil: null` also matches items that never had the field.
    const free: Filter = { $or: [{ claimedUntil: null }, { claimedUntil: { $lte: iso(now) } }] };
    const item = await this.options.items.findOneAndUpdate(
      Object.keys(filter).length === 0 ? free : { $and: [filter, free] },
      { $set: { claimedBy: this.options.owner, claimedUntil: until, claimToken: token } },
      { returnDocument: 'after', ...(sort ? { sort } : {}) },
    );
    return item ? { item, claim: { id: item._id, token, until } } : null;
  }

  /** Pushes the claim's deadline on; false when the claim is no longer held (another node has the item). */
  async extend(claim: WorkClaim): Promise<boolean> {
    const until = iso(this.clock.now() + this.options.claimMs);
    const r = await this.options.items.updateOne({ _id: claim.id, claimToken: claim.token }, { $set: { claimedUntil: until } });
    if (r.matched === 1) claim.until = until;
    return r.matched === 1;
  }

  /** Removes the finished item; false when the claim was no longer held (the item stays for its holder). */
  async complete(claim: WorkClaim): Promise<boolean> {
    return (await this.options.items.deleteOne({ _id: claim.id, claimToken: claim.token })) === 1;
  }

  /**
   * Gives the item back, with `update` applied (e.g. the next attempt's time); false when the
   * claim was no longer held.
   */
  async release(claim: WorkClaim, update: Update = {}): Promise<boolean> {
    const r = await this.options.items.updateOne(
      { _id: claim.id, claimToken: claim.token },
      { ...update, $set: { ...update.$set, claimedBy: null, claimedUntil: null, claimToken: null } },
    );
    return r.matched === 1;
  }
}
