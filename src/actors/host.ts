/**
 * The actor host: every agent, channel and workflow run is an XState v5 actor that owns its
 * lifecycle, addressed by kind and id. The host creates actors on demand or restores them from
 * their stored snapshots (`get`, `restoreAll`), has their snapshots written after their
 * transitions (persistence.ts), lets idle ones leave memory (passivation.ts), drops those that
 * reach a final state (after one last write, or deleting the snapshot), and lets operators list
 * live actors, inspect one and follow transitions. How it uses XState (one shared actor system per
 * kind) is in xstate-adapter.ts; what it keeps per actor, one `Entry`, in hosted.ts.
 */
import { waitFor } from 'xstate';
import type { ActorRefFrom, AnyActor, AnyStateMachine, EventObject, InputFrom, InspectionEvent } from 'xstate';
import type { Store } from '../store/types.js';
import { Entry, errInfo, type ActorFailureSink, type ActorHostLog, type KindState } from './hosted.js';
import { IdleSweep } from './passivation.js';
import { ActorHistory, type ActorHistoryEntry } from './history.js';
import { SnapshotWriter, jsonReplacer, type SnapshotDoc, type SnapshotStats } from './persistence.js';
import type { Fence } from '../cluster/fence.js';
import { createHosted, createKindRoot, startHosted, stopHosted } from './xstate-adapter.js';

export type { ActorHostLog } from './hosted.js';
export type { SnapshotDoc } from './persistence.js';

export interface ActorKindOptions<M extends AnyStateMachine> {
  machine: M;
  /** Input for a brand-new actor (no snapshot stored). */
  input?: (id: string) => InputFrom<M>;
  /** Passivate (stop and drop from memory, snapshot kept) after this long without events; 0/undefined = never. Overrides the host default. */
  idleMs?: number;
  /** Whether a snapshot in a final state is deleted from the store (default false). */
  deleteWhenDone?: boolean;
  /**
   * Coalesce this kind's snapshot writes for up to this long (default 0: the next turn of the
   * event loop). Transitions within the window cost one write with the latest snapshot. While
   * the event loop is saturated (a burst being served) the write waits further windows, up to
   * ten, so background persistence does not compete with the burst. An actor that finishes, is
   * removed or leaves memory is written at once regardless.
   */
  writeDelayMs?: number;
  /** Keys of context to leave out of inspect() output (secrets). */
  redact?: string[];
}

export interface ActorTransition {
  kind: string;
  actorId: string;
  /** `snapshot.value` after the transition. */
  state: unknown;
  /** Type of the event that caused it (`xstate.init` for a new actor, `xstate.error` when it failed). */
  event: string;
  /** `snapshot.value` before it; absent for a new or restored actor. */
  from?: unknown;
  at: string;
}

export interface ActorHostOptions {
  store: Store;
  /** Default idle time before passivation; 0/undefined = never. */
  idleMs?: number;
  log?: ActorHostLog;
  /** Default `actor_snapshots`. */
  collection?: string;
  /** Create the index on `kind`. Default: on every backend but the embedded one (see SnapshotWriter). */
  indexKind?: boolean;
}

/** Counters for tests and metrics. */
export interface ActorHostStats extends SnapshotStats {
  /** Actors restored from a stored snapshot. */
  restores: number;
  /** Actors created new. */
  creates: number;
  /** Actors passivated after being idle. */
  passivations: number;
}

export interface ActorInspection {
  kind: string;
  id: string;
  state: unknown;
  status: string;
  context: unknown;
  live: boolean;
  /** When it entered its current state (ISO); null for an actor read from its stored snapshot. */
  since: string | null;
  /** Its transitions while it was watched (see history.ts), oldest first. */
  history: ActorHistoryEntry[];
}

/** A live actor in a listing. */
export interface ActorListItem {
  kind: string;
  id: string;
  state: unknown;
  status: string;
  /** When it entered its current state (ISO). */
  since: string;
}

type Live = ActorRefFrom<AnyStateMachine>;

/**
 * Cluster mode: which actors live on this node (those of the shards it owns) and the fences their
 * writes carry (src/cluster/placement.ts). Keys are `<kind>:<id>`.
 */
export interface ActorOwnership {
  isLocal(key: string): boolean;
  shardOf(key: string): number;
  fenceFor(key: string): Fence | null;
  /** A write under this node's epoch was refused: stop acting for the shard. */
  stale(shard: number): void;
}

/** The actor lives on another node (its shard is not this node's): send the command there. */
export class ActorElsewhereError extends Error {
  override name = 'ActorElsewhereError';
  constructor(readonly key: string) {
    super(`actor ${key} lives on another node`);
  }
}

const defaultLog: ActorHostLog = {
  warn: (obj, msg) => console.warn(`[actor-host] ${msg}`, obj),
  error: (obj, msg) => console.error(`[actor-host] ${msg}`, obj),
};

export class ActorHost {
  readonly stats: ActorHostStats = {
    writes: 0,
    writeBatches: 0,
    deletes: 0,
    failures: 0,
    tooLarge: 0,
    restores: 0,
    creates: 0,
    passivations: 0,
  };

  private readonly defaultIdleMs: number;
  private readonly log: ActorHostLog;
  private readonly kinds = new Map<string, KindState>();
  private readonly listeners = new Set<(t: ActorTransition) => void>();
  private readonly history = new ActorHistory();
  private readonly writer: SnapshotWriter;
  private readonly idle: IdleSweep;
  /** What every entry reports its actor's failure to. */
  private readonly failures: ActorFailureSink = { actorFailed: (e, err) => this.onActorError(e, err) };
  private stopped = false;
  private stopping: Promise<void> | undefined;
  /** Cluster mode: only the actors of owned shards live here; undefined in one process. */
  private ownership: ActorOwnership | undefined;

  constructor(opts: ActorHostOptions) {
    this.defaultIdleMs = opts.idleMs ?? 0;
    this.log = opts.log ?? defaultLog;
    this.writer = new SnapshotWriter({
      store: opts.store,
      collection: opts.collection ?? 'actor_snapshots',
      indexKind: opts.indexKind ?? opts.store.kind !== 'embedded',
      log: this.log,
      stats: this.stats,
      afterStore: (e, ok) => this.idle.afterStore(e, ok),
    });
    this.idle = new IdleSweep({ writer: this.writer, retire: (e) => this.retire(e), stats: this.stats });
  }

  // ---------------------------------------------------------------------------------------------
  // Cluster mode: ownership by shard (src/cluster/placement.ts drives these)

  /** From now on only actors of owned shards are spawned or restored, and every write is fenced. */
  useOwnership(ownership: ActorOwnership): void {
    this.ownership = ownership;
    this.writer.fencing = ownership;
  }

  /** Whether the actor lives on this node (always, in one process). */
  isHere(kind: string, id: string): boolean {
    return this.ownership === undefined || this.ownership.isLocal(`${kind}:${id}`);
  }

  /** A shard became this node's under `fence`: leftovers of an earlier ownership go, and its stored actors are stamped. */
  async claimShard(shard: number, fence: Fence): Promise<void> {
    this.dropShard(shard);
    await this.writer.stamp(shard, fence);
  }

  /** A shard is being given up: its actors are written out (their fence still holds) and stopped. */
  async releaseShard(shard: number): Promise<void> {
    if (this.stopped || !this.ownership) return;
    const own = this.ownership;
    const inShard = (k: KindState, id: string) => own.shardOf(`${k.name}:${id}`) === shard;
    const loads: Array<Promise<unknown>> = [];
    for (const k of this.kinds.values()) for (const [id, p] of k.loading) if (inShard(k, id)) loads.push(p.catch(() => undefined));
    await Promise.all(loads);
    const written: Array<Promise<void>> = [];
    for (const k of this.kinds.values()) {
      for (const e of [...k.live.values()]) {
        if (!inShard(k, e.id)) continue;
        if (e.dirty || e.busy) {
          this.writer.freeze(e);
          k.draining.set(e.id, e);
          written.push(this.writer.waitClean(e).catch(() => undefined));
        }
        this.retire(e);
      }
      for (const e of k.draining.values()) if (inShard(k, e.id) && (e.dirty || e.busy)) written.push(this.writer.waitClean(e).catch(() => undefined));
    }
    this.writer.writeSoon();
    await Promise.all(written);
  }

  /** A shard is gone (taken, expired): its actors stop without writing (another node's word stands). */
  dropShard(shard: number): void {
    if (!this.ownership) return;
    const own = this.ownership;
    for (const k of this.kinds.values()) {
      for (const e of [...k.live.values()]) {
        if (own.shardOf(`${k.name}:${e.id}`) !== shard) continue;
        this.retire(e);
        this.writer.discard(e);
      }
      for (const e of [...k.draining.values()]) if (own.shardOf(`${k.name}:${e.id}`) === shard) this.writer.discard(e);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Definition and access

  define<M extends AnyStateMachine>(kind: string, options: ActorKindOptions<M>): void {
    if (!kind || kind.includes(':')) throw new Error(`invalid actor kind ${JSON.stringify(kind)}`);
    if (this.kinds.has(kind)) throw new Error(`actor kind ${kind} is already defined`);
    const idleMs = options.idleMs ?? this.defaultIdleMs;
    if (!Number.isFinite(idleMs) || idleMs < 0) throw new Error(`invalid idleMs for actor kind ${kind}`);
    const writeDelayMs = options.writeDelayMs ?? 0;
    if (!Number.isFinite(writeDelayMs) || writeDelayMs < 0) throw new Error(`invalid writeDelayMs for actor kind ${kind}`);
    const k: KindState = {
      name: kind,
      machine: options.machine,
      input: options.input as ((id: string) => unknown) | undefined,
      idleMs,
      writeDelayMs,
      deleteWhenDone: options.deleteWhenDone ?? false,
      redact: new Set(options.redact ?? []),
      live: new Map(),
      draining: new Map(),
      loading: new Map(),
      root: undefined as unknown as AnyActor, // created below, once k exists
      epoch: 0,
      sweeper: undefined,
    };
    (k as { root: AnyActor }).root = createKindRoot(kind, {
      inspect: (ev) => this.onInspect(k, ev),
      stopFailed: (actor, err) => this.log.warn({ kind, actorId: actor.id, err: errInfo(err) }, 'error while stopping actor'),
    });
    this.kinds.set(kind, k);
  }

  /** Defined kinds. */
  kindNames(): string[] {
    return [...this.kinds.keys()];
  }

  async get(kind: string, id: string): Promise<Live> {
    if (this.stopped) throw new Error('actor host is stopped');
    const k = this.kindOf(kind);
    if (!this.isHere(kind, id)) throw new ActorElsewhereError(`${kind}:${id}`);
    return this.getLive(kind, id) ?? ((await this.load(k, id)) as Live);
  }

  /** The actor when it is in memory (counted as used, as `get` counts it); undefined otherwise: then ask `get`. */
  getLive(kind: string, id: string): Live | undefined {
    if (this.stopped) return undefined;
    const e = this.kinds.get(kind)?.live.get(id);
    if (!e) return undefined;
    this.idle.touch(e);
    return e.actor as Live;
  }

  peek(kind: string, id: string): Live | undefined {
    return this.kinds.get(kind)?.live.get(id)?.actor as Live | undefined;
  }

  async exists(kind: string, id: string): Promise<boolean> {
    const k = this.kindOf(kind);
    if (k.live.has(id)) return true;
    const d = k.draining.get(id);
    if (d) return !d.deleteOnFlush;
    return (await this.writer.find(k, id)) !== null;
  }

  async send(kind: string, id: string, event: EventObject): Promise<void> {
    const actor = await this.get(kind, id);
    actor.send(event as never);
  }

  /** Sends `event`, then resolves with the first snapshot that satisfies `predicate` (xstate's `waitFor`). */
  async sendAndWait(
    kind: string,
    id: string,
    event: EventObject,
    predicate: (snapshot: any) => boolean,
    timeoutMs = 10_000,
  ): Promise<any> {
    const actor = await this.get(kind, id);
    actor.send(event as never);
    // A deadline of our own because waitFor's timeout error does not say which actor it waited for.
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new Error(`timed out after ${timeoutMs} ms waiting for actor ${kind}:${id}`)), timeoutMs);
    try {
      return await waitFor(actor, predicate, { signal: deadline.signal });
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Restores the stored active actors of a kind (those `filter` accepts); in cluster mode only
   * those of owned shards, or of `shard` alone.
   */
  async restoreAll(kind: string, filter?: (persisted: unknown) => boolean, shard?: number): Promise<string[]> {
    if (this.stopped) throw new Error('actor host is stopped');
    const k = this.kindOf(kind);
    const ids: string[] = [];
    const loads: Array<Promise<unknown>> = [];
    for (const { doc, persisted } of await this.writer.findActive(k, this.ownership ? shard : undefined)) {
      if (this.ownership && (!this.ownership.isLocal(doc._id) || (shard !== undefined && this.ownership.shardOf(doc._id) !== shard))) continue;
      if (filter && !filter(persisted)) continue;
      const id = doc.actorId;
      ids.push(id);
      const e = k.live.get(id);
      if (e) this.idle.touch(e);
      else {
        // Not stamped under this node's epoch (written by the old owner after the takeover stamp): claimed and read again.
        const fence = this.ownership?.fenceFor(doc._id);
        const unclaimed = fence !== undefined && fence !== null && !(doc.fence && doc.fence.epoch >= fence.epoch);
        loads.push(unclaimed ? this.load(k, id) : this.load(k, id, doc, persisted));
      }
    }
    await Promise.all(loads);
    return ids;
  }

  /** Live actors, of one kind or all, whose id starts with `prefix` (when given) and that `accept` takes. */
  list(kind?: string, prefix?: string, accept?: (state: unknown) => boolean): ActorListItem[] {
    const out: ActorListItem[] = [];
    const kinds = kind === undefined ? this.kinds.values() : [this.kinds.get(kind)].filter((k) => k !== undefined);
    for (const k of kinds) {
      for (const [id, e] of k.live) {
        if (prefix !== undefined && !id.startsWith(prefix)) continue;
        const snap = e.actor!.getSnapshot() as { value?: unknown; status: string };
        if (accept && !accept(snap.value)) continue;
        out.push({ kind: k.name, id, state: snap.value, status: snap.status, since: new Date(e.since).toISOString() });
      }
    }
    return out;
  }

  /** The kind's machine as XState serialises it (`machine.toJSON()`: states, transitions, initial state); null for an unknown kind. */
  definition(kind: string): unknown {
    const k = this.kinds.get(kind);
    return k ? JSON.parse(JSON.stringify(k.machine.toJSON())) : null;
  }

  /** Keeps the actor's transitions from now on (for a while: see history.ts). */
  watch(kind: string, id: string): void {
    if (this.kinds.has(kind)) this.history.watch(kind, id);
  }

  async inspect(kind: string, id: string): Promise<ActorInspection | null> {
    const k = this.kinds.get(kind);
    if (!k) return null;
    const live = k.live.get(id);
    const e = live ?? k.draining.get(id);
    if (e) {
      if (e.deleteOnFlush || !e.actor) return null;
      const snap = e.actor.getSnapshot() as { value?: unknown; status: string; context?: unknown };
      return {
        kind,
        id,
        state: snap.value,
        status: snap.status,
        context: this.redact(k, jsonCopy(snap.context)),
        live: live !== undefined,
        since: new Date(e.since).toISOString(),
        history: this.history.of(kind, id),
      };
    }
    const doc = await this.writer.find(k, id);
    if (!doc) return null;
    let persisted: { value?: unknown; status?: string; context?: unknown };
    try {
      persisted = JSON.parse(doc.snapshot);
    } catch {
      persisted = {};
    }
    return {
      kind,
      id,
      state: persisted.value ?? doc.stateValue,
      status: persisted.status ?? doc.status,
      context: this.redact(k, persisted.context),
      live: false,
      since: null,
      history: this.history.of(kind, id),
    };
  }

  onTransition(listener: (t: ActorTransition) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  counts(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const k of this.kinds.values()) out[k.name] = k.live.size;
    return out;
  }

  /** Snapshots waiting to be written or deleted (including failed ones awaiting retry). */
  pendingWrites(): number {
    return this.writer.pending();
  }

  /**
   * Writes one actor's pending snapshot now, not after its kind's write delay, and resolves once
   * it is stored (for transitions that must survive a crash, such as an approval).
   */
  async persist(kind: string, id: string): Promise<void> {
    const k = this.kindOf(kind);
    const e = k.live.get(id) ?? k.draining.get(id);
    if (!e || (!e.dirty && !e.busy)) return;
    if (!e.busy) this.writer.writeSoon(); // a busy one is written again at once when its write ends: it has a waiter
    await this.writer.waitClean(e);
  }

  async remove(kind: string, id: string): Promise<void> {
    const k = this.kindOf(kind);
    const loading = k.loading.get(id);
    if (loading) await loading.catch(() => undefined);
    let e = k.live.get(id) ?? k.draining.get(id);
    if (e) {
      if (!e.retired) this.retire(e);
    } else {
      e = new Entry(this.failures, k, id); // tombstone: orders the delete with later restores of this id
      e.retired = true;
    }
    e.deleteOnFlush = true;
    e.frozen = undefined;
    k.draining.set(id, e);
    this.writer.markDirty(e);
    await this.writer.waitClean(e);
  }

  /** Waits for pending writes (returns early when one fails: it is retried later). */
  flush(): Promise<void> {
    return this.writer.flush();
  }

  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    this.stopped = true;
    this.writer.stop();
    this.idle.stop(this.kinds.values());
    // Loads in progress either finish (and are stopped below) or fail on the stopped flag.
    const loads: Array<Promise<unknown>> = [];
    for (const k of this.kinds.values()) for (const p of k.loading.values()) loads.push(p.catch(() => undefined));
    await Promise.all(loads);
    await this.writer.flush();
    for (const k of this.kinds.values()) {
      for (const e of [...k.live.values()]) {
        if (e.dirty || e.busy) {
          this.writer.freeze(e); // changed since the flush: written as it is before stopping turns it into `stopped`
          k.draining.set(e.id, e);
        }
        this.retire(e);
      }
    }
    await this.writer.flush();
    this.writer.close();
  }

  // ---------------------------------------------------------------------------------------------
  // Lifecycle of one actor

  private kindOf(kind: string): KindState {
    const k = this.kinds.get(kind);
    if (!k) throw new Error(`unknown actor kind ${kind}`);
    return k;
  }

  private load(k: KindState, id: string, doc?: SnapshotDoc, persisted?: unknown): Promise<AnyActor> {
    const existing = k.loading.get(id);
    if (existing) return existing;
    const p = this.doLoad(k, id, doc, persisted).finally(() => {
      if (k.loading.get(id) === p) k.loading.delete(id);
    });
    k.loading.set(id, p);
    return p;
  }

  private async doLoad(k: KindState, id: string, doc?: SnapshotDoc, persisted?: unknown): Promise<AnyActor> {
    const d = k.draining.get(id);
    if (d) {
      // Done or failed and not yet written: that actor is the latest word.
      if (!d.deleteOnFlush && d.actor) return d.actor;
      await this.writer.waitClean(d).catch(() => undefined);
      doc = undefined;
      persisted = undefined;
    }
    if (doc === undefined) doc = (await this.writer.findForLoad(k, id)) ?? undefined;
    if (this.stopped) throw new Error('actor host is stopped');
    if (!this.isHere(k.name, id)) throw new ActorElsewhereError(`${k.name}:${id}`); // the shard went while reading
    const already = k.live.get(id);
    if (already) return already.actor!;
    if (doc && persisted === undefined) persisted = JSON.parse(doc.snapshot);

    const e = new Entry(this.failures, k, id);
    const actor = createHosted(k.root, k.machine, id, persisted ? { snapshot: persisted } : { input: k.input?.(id) });
    e.actor = actor;
    e.restoring = persisted !== undefined;
    actor.subscribe(e);
    k.live.set(id, e);
    try {
      startHosted(actor);
    } catch (err) {
      if (k.live.get(id) === e) k.live.delete(id);
      e.retired = true;
      throw err;
    } finally {
      e.restoring = false;
    }
    if (persisted) {
      this.stats.restores++;
      e.seen = actor.getSnapshot();
      if (e.seen && (e.seen as { status: string }).status !== 'active') {
        // A done or failed snapshot: hand out the stopped actor, keep nothing in memory, write nothing.
        e.retired = true;
        if (k.live.get(id) === e) k.live.delete(id);
        return actor;
      }
    } else {
      this.stats.creates++;
      if (!e.retired) this.writer.markDirty(e); // normally marked by the start-up snapshot event already
    }
    if (!e.retired) this.idle.watch(e);
    return actor;
  }

  /** The shared inspection callback: follows root snapshots of hosted actors. */
  private onInspect(k: KindState, ev: InspectionEvent): void {
    if (ev.type !== '@xstate.snapshot') return;
    const ref = ev.actorRef as AnyActor;
    // Only hosted actors themselves: not the kind's root, and not the actors they invoke or spawn,
    // whose changes show in their parent's snapshot.
    const e = k.live.get(ref.id);
    if (!e || e.actor !== ref || e.restoring || e.retired) return;
    const snap = ev.snapshot as { status: string; value?: unknown };
    if (snap === e.seen) return; // the event changed nothing
    const before = (e.seen as { value?: unknown } | undefined)?.value;
    e.seen = snap;
    if (!sameState(before, snap.value)) {
      e.since = Date.now();
      if (this.history.size > 0) this.history.record(k.name, e.id, { from: before ?? null, to: snap.value, event: ev.event.type, at: new Date(e.since).toISOString() });
    }
    if (this.listeners.size > 0) this.emit(k, e.id, snap.value, ev.event.type, before);
    if (snap.status === 'active') this.writer.markDirty(e);
    else if (snap.status === 'done') this.finish(e);
    // 'error' arrives through Entry.error
  }

  private onActorError(e: Entry, err: unknown): void {
    const k = e.kind;
    if (e.restoring) {
      this.log.warn({ kind: k.name, actorId: e.id, err: errInfo(err) }, 'restored actor is in error state');
      return;
    }
    if (e.retired) {
      this.log.warn({ kind: k.name, actorId: e.id, err: errInfo(err) }, 'actor failed while stopping');
      return;
    }
    this.log.error({ kind: k.name, actorId: e.id, err: errInfo(err) }, 'actor failed');
    const snap = e.actor?.getSnapshot() as { value?: unknown } | undefined;
    if (this.listeners.size > 0) this.emit(k, e.id, snap?.value, 'xstate.error');
    this.finish(e);
  }

  /** The actor reached a final state or failed (XState has stopped it): write once more, drop it. */
  private finish(e: Entry): void {
    if (e.retired) return;
    const k = e.kind;
    e.retired = true;
    e.passivating = false;
    if (k.live.get(e.id) === e) k.live.delete(e.id);
    const status = (e.actor?.getSnapshot() as { status?: string } | undefined)?.status;
    if (status === 'done' && k.deleteWhenDone) e.deleteOnFlush = true;
    k.draining.set(e.id, e);
    this.writer.markDirty(e);
  }

  /** Stops an actor the host drops (passivation, remove, host stop); its root logs a failure to stop. */
  private retire(e: Entry): void {
    if (e.retired) return;
    const k = e.kind;
    e.retired = true;
    e.passivating = false;
    if (k.live.get(e.id) === e) k.live.delete(e.id);
    if (e.actor) stopHosted(k.root, e.actor);
  }

  private emit(k: KindState, actorId: string, state: unknown, event: string, from?: unknown): void {
    const t: ActorTransition = { kind: k.name, actorId, state, event, at: new Date().toISOString() };
    if (from !== undefined) t.from = from;
    for (const listener of this.listeners) {
      try {
        listener(t);
      } catch (err) {
        this.log.warn({ err: errInfo(err) }, 'transition listener failed');
      }
    }
  }

  private redact(k: KindState, context: unknown): unknown {
    if (k.redact.size === 0 || !context || typeof context !== 'object' || Array.isArray(context)) return context;
    const out: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(context)) if (!k.redact.has(name)) out[name] = value;
    return out;
  }
}

/** Whether two state values are the same state (a string for a flat machine, nested objects otherwise). */
function sameState(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

function jsonCopy(value: unknown): unknown {
  if (value === undefined) return undefined;
  try {
    return JSON.parse(JSON.stringify(value, jsonReplacer));
  } catch {
    return undefined;
  }
}
