/**
 * The actor host's snapshot collection: the writer that keeps each actor's stored snapshot up to
 * date, and the reads that restore actors from it.
 *
 * Writes are coalesced: a change only marks the actor dirty, and one round per host (on the next
 * turn of the event loop, or within the kind's write delay) writes every dirty actor, up to
 * `BATCH_MAX` per `bulkUpdate`, so a burst of events costs one write per actor. One actor never has
 * two writes in flight: a change during a write is written once more, with the latest snapshot,
 * after it finishes. A snapshot the store refuses fails alone (the rest of the batch is written)
 * and is retried with back-off, unless it is larger than the store's document limit: that one is
 * logged and left until the actor changes again (the store keeps the last snapshot it took).
 *
 * Storage: one collection (default `actor_snapshots`) of
 * `{_id: "<kind>:<id>", kind, actorId, snapshot, status, stateValue, updatedAt}`, where `snapshot`
 * is the JSON text of `actor.getPersistedSnapshot()`: text, because persisted snapshots carry keys
 * with dots and other characters (invoke ids, history keys, context keys) that document stores
 * refuse as field names.
 */
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { BulkUpdateError, DocumentTooLargeError, type BulkUpdateOp, type Collection, type Doc, type Filter, type Store } from '../store/types.js';
import { StaleEpochError, claimDocument, fenceFailures, fencedFilter, fencedOp, fencedUpdate, type Fence } from '../cluster/fence.js';
import { errInfo, snapshotKey, type ActorHostLog, type Entry, type KindState } from './hosted.js';

/** A stored snapshot, or null for none or for a claim's stub (`{_id, fence}`: no snapshot written yet). */
function snapshotOrNull(doc: SnapshotDoc | null): SnapshotDoc | null {
  return doc && typeof doc.snapshot === 'string' ? doc : null;
}

export interface SnapshotDoc extends Doc {
  kind: string;
  actorId: string;
  /** JSON text of `actor.getPersistedSnapshot()`. */
  snapshot: string;
  status: string;
  stateValue: unknown;
  updatedAt: string;
  /** Cluster mode: the actor's shard, and the fence of the owner that last wrote it (src/cluster/fence.ts). */
  shard?: number;
  fence?: Fence;
}

/**
 * Cluster mode: snapshot writes carry the owner's fence, so a node that lost a shard without
 * knowing cannot overwrite what the new owner wrote (src/cluster/fence.ts).
 */
export interface SnapshotFencing {
  /** The fence to write the actor `<kind>:<id>` under; null when its shard is not this node's now. */
  fenceFor(key: string): Fence | null;
  /** A write under this node's epoch was refused: another node owns `shard` now. */
  stale(shard: number): void;
}

/** The writer's counters (part of the host's stats). */
export interface SnapshotStats {
  /** Snapshot documents written (one per actor per write). */
  writes: number;
  /** Store round trips used for those writes (`bulkUpdate` calls). */
  writeBatches: number;
  /** Snapshot documents deleted. */
  deletes: number;
  /** Failed store operations (each retried later). */
  failures: number;
  /**
   * Snapshots the store refused as larger than its document limit. Such a snapshot is not
   * retried; the actor's next change is written again (the store keeps the last one it took).
   */
  tooLarge: number;
}

export interface SnapshotWriterOptions {
  store: Store;
  collection: string;
  /** Create the index on `kind` (see the constructor). */
  indexKind: boolean;
  log: ActorHostLog;
  stats: SnapshotStats;
  /**
   * Called when a store operation of `e` ended and nothing newer is being written for it (or it
   * failed), before its waiters are answered.
   */
  afterStore(e: Entry, ok: boolean): void;
}

type WriteOp = BulkUpdateOp;

const BATCH_MAX = 500;
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 30_000;
const FLUSH_MAX_ROUNDS = 1_000;
/** Event-loop utilisation above which a delayed round waits another window (the loop is serving a burst). */
const BUSY_LOOP_UTILISATION = 0.5;
/** How many windows in a row a delayed round may wait for a saturated loop. */
const MAX_DEFERRALS = 10;

export class SnapshotWriter {
  private readonly col: Collection<SnapshotDoc>;
  private readonly log: ActorHostLog;
  private readonly stats: SnapshotStats;
  private readonly afterStore: (e: Entry, ok: boolean) => void;
  /** Cluster mode: every write and delete is fenced by the owner's epoch. */
  fencing: SnapshotFencing | undefined;
  /** Entries waiting for a store operation (also those whose operation failed, until retried). */
  private readonly dirty = new Set<Entry>();
  /** Store operations in flight; each resolves to whether nothing of it is left to retry (never rejects). */
  private readonly inflight = new Set<Promise<boolean>>();
  private immediate: NodeJS.Immediate | undefined;
  /** A round due later, for kinds with a write delay; its window and the loop's use when armed. */
  private delayed: NodeJS.Timeout | undefined;
  private delayedMs = 0;
  private delayedFrom: EventLoopUtilization | undefined;
  private deferrals = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = RETRY_MIN_MS;
  private stopped = false;
  private readonly runRound = (): void => this.round();
  private readonly runDelayedRound = (): void => this.delayedRound();

  constructor(opts: SnapshotWriterOptions) {
    this.col = opts.store.collection<SnapshotDoc>(opts.collection);
    this.log = opts.log;
    this.stats = opts.stats;
    this.afterStore = opts.afterStore;
    // nedb keeps every document of one index key in one tree node and rewrites that node's array
    // on each update, so a low-cardinality index makes every write O(actors of the kind)
    // (docs/performance.md); the embedded store scans its documents quickly without it.
    if (opts.indexKind) {
      this.col.createIndex({ fields: { kind: 1 }, name: 'kind' }).catch((err: unknown) => {
        this.log.warn({ err: errInfo(err), collection: this.col.name }, 'could not create the actor snapshot index');
      });
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Reads

  async find(k: KindState, id: string): Promise<SnapshotDoc | null> {
    return snapshotOrNull(await this.col.findById(snapshotKey(k, id)));
  }

  /**
   * The snapshot to load an actor from. Cluster mode: a document this node has not stamped under
   * its epoch (one the old owner created or wrote after the shard's takeover stamp, or none yet) is
   * claimed first (fence.ts, `claimDocument`; a missing one gets a stub `{_id, fence}` that every
   * reader skips), so no write of an older owner lands after this node has read it. Throws
   * StaleEpochError when a newer owner has stamped it already.
   */
  async findForLoad(k: KindState, id: string): Promise<SnapshotDoc | null> {
    const key = snapshotKey(k, id);
    const doc = await this.col.findById(key);
    const fence = this.fencing?.fenceFor(key);
    if (!fence || (doc?.fence && doc.fence.epoch >= fence.epoch)) return snapshotOrNull(doc);
    return snapshotOrNull(await claimDocument(this.col, key, fence, { stampMissing: doc === null }));
  }

  /** The stored active snapshots of a kind, each parsed as it is reached (an unreadable one is logged and skipped). */
  async findActive(k: KindState, shard?: number): Promise<Iterable<{ doc: SnapshotDoc; persisted: unknown }>> {
    // Snapshots written before cluster mode carry no shard: the caller checks each id's shard.
    const filter: Filter = shard === undefined ? { kind: k.name } : { kind: k.name, $or: [{ shard }, { shard: { $exists: false } }] };
    return this.parseActive(k, await this.col.find(filter));
  }

  /**
   * A new owner's first step for a shard: stamps the shard's stored snapshots with its fence, so
   * from now on every write of an older owner is refused (one conditional updateMany).
   */
  async stamp(shard: number, fence: Fence): Promise<void> {
    await this.col.updateMany(fencedFilter({ shard }, fence), fencedUpdate({}, fence));
  }

  /** Forgets what is pending for `e` without writing it (its shard is no longer this node's). */
  discard(e: Entry): void {
    if (this.dirty.delete(e) || e.dirty) {
      e.dirty = false;
      if (!e.busy) this.settle(e, false, new Error(`${snapshotKey(e.kind, e.id)}: its shard is no longer this node's; not written`));
    }
    if (!e.busy && e.retired && e.kind.draining.get(e.id) === e) e.kind.draining.delete(e.id);
  }

  private *parseActive(k: KindState, docs: SnapshotDoc[]): Generator<{ doc: SnapshotDoc; persisted: unknown }> {
    for (const doc of docs) {
      if (doc.status !== 'active') continue;
      let persisted: unknown;
      try {
        persisted = JSON.parse(doc.snapshot);
      } catch (err) {
        this.log.error({ kind: k.name, actorId: doc.actorId, err: errInfo(err) }, 'unreadable actor snapshot');
        continue;
      }
      yield { doc, persisted };
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Writes

  /**
   * Wants a store operation for `e`. An entry whose write is in flight is flagged but kept out of
   * the dirty set until that write ends (completed() puts it back), so a round never walks
   * thousands of busy entries.
   */
  markDirty(e: Entry): void {
    if (e.busy) {
      e.dirty = true;
      return;
    }
    if (!e.dirty) {
      e.dirty = true;
      this.dirty.add(e);
      this.schedule(e.retired ? 0 : e.kind.writeDelayMs);
    } else if (e.retired) {
      this.writeSoon(); // already waiting, then retired: written at once, not after its window
    }
  }

  /** A round on the next turn of the event loop, unless a failed write is waiting for its retry. */
  writeSoon(): void {
    if (this.retryTimer === undefined) this.schedule(0);
  }

  /** A round on the next turn of the event loop, or within `delayMs` (one timer for all). */
  schedule(delayMs = 0): void {
    if (this.immediate !== undefined) return;
    if (delayMs === 0) {
      this.immediate = setImmediate(this.runRound);
    } else if (this.delayed === undefined) {
      this.delayedMs = delayMs;
      this.delayedFrom = performance.eventLoopUtilization();
      this.delayed = setTimeout(this.runDelayedRound, delayMs);
      this.delayed.unref(); // stop() flushes whatever is still waiting
    }
  }

  /** Keeps the snapshot as it is now, for a write after the actor is stopped (which turns its own into `stopped`). */
  freeze(e: Entry): void {
    e.frozen = this.persisted(e);
  }

  /** Snapshots waiting to be written or deleted (including failed ones awaiting retry). */
  pending(): number {
    return this.dirty.size + this.inflight.size;
  }

  /** Resolves when nothing is pending for `e`; rejects when its pending operation fails. */
  waitClean(e: Entry): Promise<void> {
    if (!e.dirty && !e.busy) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      (e.waiters ??= []).push({ resolve, reject });
    });
  }

  /** Writes what is pending until nothing is, or a store operation failed (it is retried later). */
  async flush(): Promise<void> {
    for (let i = 0; i < FLUSH_MAX_ROUNDS; i++) {
      this.round();
      if (this.inflight.size === 0) return; // nothing left, or only entries that cannot be written
      const results = await Promise.all([...this.inflight]);
      if (results.includes(false)) return; // failures are logged and retried later
      if (this.dirty.size === 0 && this.inflight.size === 0) return;
    }
  }

  /** The host is stopping: no more retries or deferrals; what is pending is flushed by the host. */
  stop(): void {
    this.stopped = true;
  }

  /** After the last flush: clears the timers, and says what was left unwritten. */
  close(): void {
    if (this.immediate) clearImmediate(this.immediate);
    this.immediate = undefined;
    if (this.delayed) clearTimeout(this.delayed);
    this.delayed = undefined;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.dirty.size > 0) {
      this.log.error({ pending: this.dirty.size }, 'actor host stopped with unwritten snapshots');
    }
  }

  /** The delayed round: waits another window while the loop was saturated during this one. */
  private delayedRound(): void {
    this.delayed = undefined;
    const used = performance.eventLoopUtilization(this.delayedFrom).utilization;
    if (used > BUSY_LOOP_UTILISATION && this.deferrals < MAX_DEFERRALS && !this.stopped) {
      this.deferrals++;
      this.schedule(this.delayedMs);
      return;
    }
    this.deferrals = 0;
    this.round();
  }

  private persisted(e: Entry): unknown {
    return e.frozen ?? e.actor!.getPersistedSnapshot();
  }

  /** Starts one store operation per dirty actor that has none in flight. */
  private round(): void {
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.immediate = undefined;
    if (this.delayed !== undefined) clearTimeout(this.delayed);
    this.delayed = undefined;
    this.deferrals = 0;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.dirty.size === 0) return;
    const now = new Date().toISOString();
    let writes: Entry[] = [];
    let ops: WriteOp[] = [];
    const deletes: Entry[] = [];
    for (const e of this.dirty) {
      this.dirty.delete(e);
      e.dirty = false;
      if (e.deleteOnFlush) {
        e.busy = true;
        deletes.push(e);
        continue;
      }
      let text: string;
      let status: string;
      let stateValue: unknown;
      try {
        const snap = this.persisted(e) as { status?: string; value?: unknown };
        text = JSON.stringify(snap, jsonReplacer);
        status = snap.status ?? 'active';
        stateValue = snap.value === undefined ? null : JSON.parse(JSON.stringify(snap.value));
      } catch (err) {
        // Not serialisable: retrying will not help until the actor changes again.
        this.log.error({ kind: e.kind.name, actorId: e.id, err: errInfo(err) }, 'cannot serialise actor snapshot');
        if (e.retired && e.kind.draining.get(e.id) === e) e.kind.draining.delete(e.id);
        this.settle(e, false, err);
        continue;
      }
      const key = snapshotKey(e.kind, e.id);
      let op: WriteOp = { filter: { _id: key }, update: { $set: { kind: e.kind.name, actorId: e.id, snapshot: text, status, stateValue, updatedAt: now } }, upsert: true };
      if (this.fencing) {
        const fence = this.fencing.fenceFor(key);
        if (!fence) {
          this.unowned(e);
          continue;
        }
        op = fencedOp({ ...op, update: { $set: { ...op.update.$set, shard: fence.shard } } }, fence);
      }
      e.busy = true;
      writes.push(e);
      ops.push(op);
      if (writes.length >= BATCH_MAX) {
        this.track(this.writeBatch(writes, ops));
        writes = [];
        ops = [];
      }
    }
    if (writes.length > 0) this.track(this.writeBatch(writes, ops));
    if (deletes.length > 0) this.track(this.deleteBatch(deletes));
  }

  /** A write wanted for an actor whose shard is no longer this node's: the new owner's word stands. */
  private unowned(e: Entry): void {
    this.log.warn({ kind: e.kind.name, actorId: e.id }, "an actor's shard is no longer this node's; its snapshot is not written");
    if (e.retired && e.kind.draining.get(e.id) === e) e.kind.draining.delete(e.id);
    this.settle(e, false, new Error(`${snapshotKey(e.kind, e.id)}: its shard is no longer this node's; not written`));
  }

  private track(p: Promise<boolean>): void {
    // writeBatch and deleteBatch report failures as false; anything thrown is a defect, logged here.
    const tracked: Promise<boolean> = p.then(
      (ok) => {
        this.inflight.delete(tracked);
        return ok;
      },
      (err: unknown) => {
        this.inflight.delete(tracked);
        this.log.error({ err: errInfo(err) }, 'persisting actor snapshots failed unexpectedly');
        return false;
      },
    );
    this.inflight.add(tracked);
  }

  /**
   * One bulkUpdate for a batch of snapshots. A snapshot the store refuses fails alone (the
   * others are written): one too large for the store is dropped until its actor changes again,
   * any other failure is retried.
   */
  private async writeBatch(entries: Entry[], ops: WriteOp[]): Promise<boolean> {
    let error: unknown;
    let failed: Map<number, unknown> | undefined;
    try {
      await this.col.bulkUpdate(ops);
    } catch (err) {
      if (err instanceof BulkUpdateError) failed = new Map(err.failures.map((f) => [f.index, f.error]));
      else error = err ?? new Error('store write failed');
      if (err instanceof BulkUpdateError && this.fencing) {
        // Each op refused for a higher epoch fails alone: its shard is another node's now.
        try {
          const { stale } = await fenceFailures(this.col, ops, err);
          const shards = new Set<number>();
          for (const s of stale) {
            failed!.set(s.index, s.error);
            shards.add(s.error.fence.shard);
          }
          for (const shard of shards) this.fencing.stale(shard);
        } catch (readErr) {
          this.log.warn({ err: errInfo(readErr) }, 'reading the fences of refused snapshot writes failed; they are retried');
        }
      }
    }
    const written = error !== undefined ? 0 : entries.length - (failed?.size ?? 0);
    this.stats.writes += written;
    if (written > 0) this.stats.writeBatches++;
    if (error !== undefined || failed) {
      this.stats.failures++;
      if (error !== undefined) this.log.error({ err: errInfo(error), actors: entries.length }, 'writing actor snapshots failed; will retry');
      for (const [i, err] of failed ?? []) {
        const e = entries[i]!;
        if (err instanceof StaleEpochError) {
          this.log.warn({ kind: e.kind.name, actorId: e.id, err: err.message }, 'a snapshot write was refused: another node owns the actor now');
        } else if (err instanceof DocumentTooLargeError) {
          this.stats.tooLarge++;
          this.log.error(
            { kind: e.kind.name, actorId: e.id, bytes: err.bytes, err: errInfo(err) },
            'actor snapshot is too large for the store; it keeps the last one written until the actor changes',
          );
        } else {
          this.log.error({ kind: e.kind.name, actorId: e.id, err: errInfo(err) }, 'writing an actor snapshot failed; will retry');
        }
      }
    }
    this.completed(entries, (i) => error ?? failed?.get(i));
    // Whether nothing is left to retry (a snapshot too large, or refused as stale, is not retried).
    return error === undefined && [...(failed?.values() ?? [])].every((err) => err instanceof DocumentTooLargeError || err instanceof StaleEpochError);
  }

  private async deleteBatch(entries: Entry[]): Promise<boolean> {
    let error: unknown;
    try {
      const ids = entries.map((e) => snapshotKey(e.kind, e.id));
      if (this.fencing) {
        // Fenced: a stale owner's delete matches nothing (the new owner's snapshot stays).
        const fencing = this.fencing;
        const filters = ids.map((id) => fencing.fenceFor(id)).map((fence, i) => (fence ? fencedFilter({ _id: ids[i] }, fence) : null)).filter((f): f is Filter => f !== null);
        if (filters.length > 0) await (filters.length === 1 ? this.col.deleteOne(filters[0]!) : this.col.deleteMany({ $or: filters }));
      } else {
        await (ids.length === 1 ? this.col.deleteOne({ _id: ids[0] }) : this.col.deleteMany({ _id: { $in: ids } }));
      }
      this.stats.deletes += entries.length;
    } catch (err) {
      error = err ?? new Error('store delete failed');
      this.stats.failures++;
      this.log.error({ err: errInfo(err), actors: entries.length }, 'deleting actor snapshots failed; will retry');
    }
    this.completed(entries, () => error);
    return error === undefined;
  }

  /** After a batch: `errorAt(i)` is the i-th entry's failure, undefined when it was stored. */
  private completed(entries: Entry[], errorAt: (i: number) => unknown): void {
    let retry = false;
    let again = Infinity; // the shortest write delay among entries that changed during the write
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      const error = errorAt(i);
      e.busy = false;
      if (error instanceof StaleEpochError) {
        // Never retried: the actor is another node's; this node drops it (the shard is relinquished).
        e.dirty = false;
        if (e.retired && e.kind.draining.get(e.id) === e) e.kind.draining.delete(e.id);
        this.settle(e, false, error);
      } else if (error instanceof DocumentTooLargeError && !e.dirty) {
        // Writing it again cannot help: given up until the actor changes (markDirty), or dropped if it is gone.
        const k = e.kind;
        if (e.retired && k.draining.get(e.id) === e) k.draining.delete(e.id);
        this.settle(e, false, error);
      } else if (error !== undefined && !(error instanceof DocumentTooLargeError)) {
        e.dirty = true; // retried later, with whatever is latest by then
        this.dirty.add(e);
        this.settle(e, false, error);
        retry = true;
      } else if (e.dirty) {
        this.dirty.add(e); // changed during the write (or refused as too large and changed since): written once more
        again = Math.min(again, e.retired || e.waiters ? 0 : e.kind.writeDelayMs); // someone waits: now
      } else {
        this.settle(e, true);
      }
    }
    if (retry) this.scheduleRetry();
    else {
      this.retryMs = RETRY_MIN_MS;
      if (again !== Infinity) this.schedule(again);
    }
  }

  /** After a store operation of `e` ended and nothing newer is being written for it (or it failed). */
  private settle(e: Entry, ok: boolean, error?: unknown): void {
    const k = e.kind;
    if (ok && e.retired && k.draining.get(e.id) === e) k.draining.delete(e.id);
    this.afterStore(e, ok);
    const waiters = e.waiters;
    if (waiters) {
      e.waiters = undefined;
      for (const w of waiters) {
        if (ok) w.resolve();
        else w.reject(error);
      }
    }
  }

  private scheduleRetry(): void {
    if (this.retryTimer !== undefined || this.stopped) return;
    this.retryTimer = setTimeout(this.runRound, this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
  }
}

export function jsonReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message };
  return value;
}
