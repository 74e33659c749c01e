/**
 * The actor host: every agent, channel and workflow run is an XState v5 actor that owns its
 * lifecycle. The host
 *
 * - creates actors on demand, or restores them from their persisted snapshot (`get`);
 * - persists an actor's snapshot after its transitions, coalesced: a change only marks the actor
 *   dirty, and one `setImmediate` per host writes every dirty actor in one `bulkUpdate`, so a
 *   burst of events costs one write per actor. One actor never has two writes in flight: a
 *   change during a write is written once more, with the latest snapshot, after it finishes.
 *   A snapshot the store refuses fails alone (the rest of the batch is written): it is retried,
 *   unless it is larger than the store's document limit, which is logged and left until the actor
 *   changes again (the store keeps the last snapshot it took);
 * - passivates idle actors (stops them and drops them from memory; the snapshot stays);
 * - drops actors that reach a final state (after one last write, or deleting the snapshot);
 * - lets operators list live actors, inspect one actor, and follow transitions.
 *
 * Storage: one collection (default `actor_snapshots`) of
 * `{_id: "<kind>:<id>", kind, actorId, snapshot, status, stateValue, updatedAt}`, where `snapshot`
 * is the JSON text of `actor.getPersistedSnapshot()`. It is stored as text because persisted
 * snapshots carry keys with dots and other characters (invoke ids such as `0.machine.state`,
 * history keys, arbitrary context keys) that document stores refuse as field names.
 *
 * Per-actor memory is kept small: one `Entry` object (which doubles as the actor's error
 * observer; idle time is an epoch stamp on it, swept by one timer per kind, not a timer per
 * actor), and one XState actor system per kind.
 * XState gives every root actor a system of its own (a scheduler, registries and about twenty
 * closures: 2.7 KB, nearly half of a small actor), so the host starts one inert root actor per
 * kind and creates that kind's actors as its children: they share its system, and with it the one
 * inspection callback of the kind. Such children are stopped the way XState stops an actor's
 * children (`stopHosted`), since XState refuses `stop()` on an actor that has a parent.
 */
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { createActor, fromTransition } from 'xstate';
import type { ActorRefFrom, AnyActor, AnyStateMachine, EventObject, InputFrom, InspectionEvent } from 'xstate';
import { BulkUpdateError, DocumentTooLargeError, type Collection, type Doc, type Store } from '../store/types.js';

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
  at: string;
}

export interface ActorHostLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface ActorHostOptions {
  store: Store;
  /** Default idle time before passivation; 0/undefined = never. */
  idleMs?: number;
  log?: ActorHostLog;
  /** Default `actor_snapshots`. */
  collection?: string;
  /** Create the index on `kind`. Default: on every backend but the embedded one (see the constructor). */
  indexKind?: boolean;
}

/** Counters for tests and metrics. */
export interface ActorHostStats {
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
  /** Actors restored from a stored snapshot. */
  restores: number;
  /** Actors created new. */
  creates: number;
  /** Actors passivated after being idle. */
  passivations: number;
}

export interface SnapshotDoc extends Doc {
  kind: string;
  actorId: string;
  /** JSON text of `actor.getPersistedSnapshot()`. */
  snapshot: string;
  status: string;
  stateValue: unknown;
  updatedAt: string;
}

export interface ActorInspection {
  kind: string;
  id: string;
  state: unknown;
  status: string;
  context: unknown;
  live: boolean;
}

type Live = ActorRefFrom<AnyStateMachine>;

interface KindState {
  readonly name: string;
  readonly machine: AnyStateMachine;
  readonly input: ((id: string) => unknown) | undefined;
  readonly idleMs: number;
  readonly writeDelayMs: number;
  readonly deleteWhenDone: boolean;
  readonly redact: ReadonlySet<string>;
  /** Actors in memory that accept events. */
  readonly live: Map<string, Entry>;
  /** Actors out of memory (done, failed, removed, stopped) whose last store operation is pending. */
  readonly draining: Map<string, Entry>;
  /** Restores in progress, shared by concurrent get() calls. */
  readonly loading: Map<string, Promise<AnyActor>>;
  /**
   * The inert root actor whose system every actor of this kind shares (their parent). It ignores
   * the done and error events XState relays to a parent; its system carries the kind's one
   * inspection callback.
   */
  readonly root: AnyActor;
  /**
   * Idle tracking without a timer per actor: `epoch` advances every quarter of `idleMs` (while the
   * kind has live actors), a use stamps the actor with it, and an actor whose stamp is more than
   * four epochs old has been idle for between 1 and 1.25 × `idleMs`.
   */
  epoch: number;
  sweeper: NodeJS.Timeout | undefined;
}

interface Waiter {
  resolve(): void;
  reject(err: unknown): void;
}

const BATCH_MAX = 500;
/**
 * What a hosted actor keeps as its options once started. XState copies the options it is given
 * with an object spread, and on Node 20's V8 each such copy gets a hidden class of its own (about
 * 240 bytes, one per actor, measured in heap snapshots of 18,000 agents). A started actor reads
 * none of them again (XState reads `input` and `devTools` in `start()` only), so the host drops
 * the copy for this one object, shared by all.
 */
const STARTED_OPTIONS = Object.freeze({});
/** Idle epochs per `idleMs` (see KindState.epoch). */
const IDLE_EPOCHS = 4;
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 30_000;
const FLUSH_MAX_ROUNDS = 1_000;
/** Event-loop utilisation above which a delayed round waits another window (the loop is serving a burst). */
const BUSY_LOOP_UTILISATION = 0.5;
/** How many windows in a row a delayed round may wait for a saturated loop. */
const MAX_DEFERRALS = 10;

/**
 * One hosted actor. Also the actor's observer (only `error`): XState reports a failing root actor
 * with no error observer as an uncaught exception, which would crash the process.
 */
class Entry {
  actor: AnyActor | undefined = undefined;
  /** The kind's idle epoch when the actor was last used (see KindState.epoch). */
  usedEpoch = 0;
  /** The last snapshot object seen; XState keeps the same object when an event changes nothing. */
  seen: unknown = undefined;
  /** Persisted snapshot captured before the host stopped the actor (a stopped actor's own snapshot says `stopped`). */
  frozen: unknown = undefined;
  waiters: Waiter[] | undefined = undefined;
  /** A store operation is wanted (the entry is in the host's dirty set unless one is in flight). */
  dirty = false;
  /** A store operation of this actor is in flight. */
  busy = false;
  /** No longer accepts events (done, failed, passivated, removed, host stopped). */
  retired = false;
  /** Being started from a stored snapshot: its start-up snapshot event is not a change. */
  restoring = false;
  /** Found idle while a write was pending: passivate once it is written. */
  passivating = false;
  /** The next store operation deletes the snapshot instead of writing it. */
  deleteOnFlush = false;

  constructor(
    readonly host: ActorHost,
    readonly kind: KindState,
    readonly id: string,
  ) {}

  error(err: unknown): void {
    this.host['onActorError'](this, err);
  }
}

const defaultLog: ActorHostLog = {
  warn: (obj, msg) => console.warn(`[actor-host] ${msg}`, obj),
  error: (obj, msg) => console.error(`[actor-host] ${msg}`, obj),
};

function jsonReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message };
  return value;
}

function errInfo(err: unknown): unknown {
  return err instanceof Error ? { name: err.name, message: err.message, stack: err.stack } : err;
}

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

  private readonly col: Collection<SnapshotDoc>;
  private readonly defaultIdleMs: number;
  private readonly log: ActorHostLog;
  private readonly kinds = new Map<string, KindState>();
  private readonly listeners = new Set<(t: ActorTransition) => void>();
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
  private readonly runDelayedRound = (): void => this.delayedRound();
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = RETRY_MIN_MS;
  private stopped = false;
  private stopping: Promise<void> | undefined;
  private readonly runRound = (): void => this.round();

  constructor(opts: ActorHostOptions) {
    this.col = opts.store.collection<SnapshotDoc>(opts.collection ?? 'actor_snapshots');
    this.defaultIdleMs = opts.idleMs ?? 0;
    this.log = opts.log ?? defaultLog;
    // nedb keeps every document of one index key in one tree node and rewrites that node's array on
    // each update, so a low-cardinality index like `kind` makes every snapshot write O(actors of the
    // kind): with 18,000 agents, writing all of them took 33 s instead of 3 s. The embedded store
    // scans its in-memory documents quickly without it, so the index is made for MongoDB only.
    if (opts.indexKind ?? opts.store.kind !== 'embedded') {
      this.col.createIndex({ fields: { kind: 1 }, name: 'kind' }).catch((err: unknown) => {
        this.log.warn({ err: errInfo(err), collection: this.col.name }, 'could not create the actor snapshot index');
      });
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
    const root = createActor(fromTransition((state: null) => state, null), {
      id: `${kind}-host`,
      inspect: (ev: InspectionEvent) => this.onInspect(k, ev),
    });
    (k as { root: AnyActor }).root = root;
    root.start();
    this.kinds.set(kind, k);
  }

  /** Defined kinds. */
  kindNames(): string[] {
    return [...this.kinds.keys()];
  }

  async get(kind: string, id: string): Promise<Live> {
    if (this.stopped) throw new Error('actor host is stopped');
    const k = this.kindOf(kind);
    return this.getLive(kind, id) ?? ((await this.load(k, id)) as Live);
  }

  /** The actor when it is in memory (counted as used, as `get` counts it); undefined otherwise: then ask `get`. */
  getLive(kind: string, id: string): Live | undefined {
    if (this.stopped) return undefined;
    const e = this.kinds.get(kind)?.live.get(id);
    if (!e) return undefined;
    this.touch(e);
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
    return (await this.col.findById(key(k, id))) !== null;
  }

  async send(kind: string, id: string, event: EventObject): Promise<void> {
    const actor = await this.get(kind, id);
    actor.send(event as never);
  }

  async sendAndWait(
    kind: string,
    id: string,
    event: EventObject,
    predicate: (snapshot: any) => boolean,
    timeoutMs = 10_000,
  ): Promise<any> {
    const actor = (await this.get(kind, id)) as unknown as AnyActor;
    return new Promise((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      let sub: { unsubscribe(): void } | undefined;
      const settle = (ok: boolean, value: unknown): void => {
        if (settled) return;
        settled = true;
        if (timer) clearTimeout(timer);
        sub?.unsubscribe();
        if (ok) resolve(value);
        else reject(value);
      };
      const check = (snapshot: unknown): boolean => {
        try {
          if (predicate(snapshot)) {
            settle(true, snapshot);
            return true;
          }
        } catch (err) {
          settle(false, err);
          return true;
        }
        return false;
      };
      sub = actor.subscribe({
        next: (snapshot: unknown) => {
          if (!settled) check(snapshot);
        },
        error: (err: unknown) => settle(false, err),
        complete: () => {
          if (settled) return;
          if (!check(actor.getSnapshot())) {
            settle(false, new Error(`actor ${kind}:${id} stopped before the awaited state`));
          }
        },
      });
      if (settled) {
        sub.unsubscribe();
        return;
      }
      timer = setTimeout(
        () => settle(false, new Error(`timed out after ${timeoutMs} ms waiting for actor ${kind}:${id}`)),
        timeoutMs,
      );
      actor.send(event);
    });
  }

  async restoreAll(kind: string, filter?: (persisted: unknown) => boolean): Promise<string[]> {
    if (this.stopped) throw new Error('actor host is stopped');
    const k = this.kindOf(kind);
    const docs = await this.col.find({ kind: k.name });
    const ids: string[] = [];
    const loads: Array<Promise<unknown>> = [];
    for (const doc of docs) {
      if (doc.status !== 'active') continue;
      const id = doc.actorId;
      let persisted: unknown;
      try {
        persisted = JSON.parse(doc.snapshot);
      } catch (err) {
        this.log.error({ kind, actorId: id, err: errInfo(err) }, 'unreadable actor snapshot');
        continue;
      }
      if (filter && !filter(persisted)) continue;
      ids.push(id);
      const e = k.live.get(id);
      if (e) this.touch(e);
      else loads.push(this.load(k, id, doc, persisted));
    }
    await Promise.all(loads);
    return ids;
  }

  list(kind?: string): Array<{ kind: string; id: string; state: unknown; status: string }> {
    const out: Array<{ kind: string; id: string; state: unknown; status: string }> = [];
    const kinds = kind === undefined ? this.kinds.values() : [this.kinds.get(kind)].filter((k) => k !== undefined);
    for (const k of kinds) {
      for (const [id, e] of k.live) {
        const snap = e.actor!.getSnapshot() as { value?: unknown; status: string };
        out.push({ kind: k.name, id, state: snap.value, status: snap.status });
      }
    }
    return out;
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
      };
    }
    const doc = await this.col.findById(key(k, id));
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
    return this.dirty.size + this.inflight.size;
  }

  /**
   * Writes one actor's pending snapshot now, not after its kind's write delay, and resolves once
   * it is stored (for transitions that must survive a crash, such as an approval).
   */
  async persist(kind: string, id: string): Promise<void> {
    const k = this.kindOf(kind);
    const e = k.live.get(id) ?? k.draining.get(id);
    if (!e || (!e.dirty && !e.busy)) return;
    if (!e.busy) this.writeSoon(); // a busy one is written again at once when its write ends: it has a waiter
    await this.waitClean(e);
  }

  async remove(kind: string, id: string): Promise<void> {
    const k = this.kindOf(kind);
    const loading = k.loading.get(id);
    if (loading) await loading.catch(() => undefined);
    let e = k.live.get(id) ?? k.draining.get(id);
    if (e) {
      if (!e.retired) this.retire(e);
    } else {
      e = new Entry(this, k, id); // tombstone: orders the delete with later restores of this id
      e.retired = true;
    }
    e.deleteOnFlush = true;
    e.frozen = undefined;
    k.draining.set(id, e);
    this.markDirty(e);
    await this.waitClean(e);
  }

  async flush(): Promise<void> {
    for (let i = 0; i < FLUSH_MAX_ROUNDS; i++) {
      this.round();
      if (this.inflight.size === 0) return; // nothing left, or only entries that cannot be written
      const results = await Promise.all([...this.inflight]);
      if (results.includes(false)) return; // failures are logged and retried later
      if (this.dirty.size === 0 && this.inflight.size === 0) return;
    }
  }

  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    this.stopped = true;
    // Loads in progress either finish (and are stopped below) or fail on the stopped flag.
    const loads: Array<Promise<unknown>> = [];
    for (const k of this.kinds.values()) for (const p of k.loading.values()) loads.push(p.catch(() => undefined));
    await Promise.all(loads);
    await this.flush();
    for (const k of this.kinds.values()) {
      for (const e of [...k.live.values()]) {
        if (e.dirty || e.busy) {
          // Changed since the flush: keep the snapshot as it is before stopping turns it into `stopped`.
          e.frozen = this.persisted(e);
          k.draining.set(e.id, e);
        }
        this.retire(e);
      }
    }
    await this.flush();
    for (const k of this.kinds.values()) {
      if (k.sweeper) clearInterval(k.sweeper);
      k.sweeper = undefined;
    }
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
      await this.waitClean(d).catch(() => undefined);
      doc = undefined;
      persisted = undefined;
    }
    if (doc === undefined) doc = (await this.col.findById(key(k, id))) ?? undefined;
    if (this.stopped) throw new Error('actor host is stopped');
    const already = k.live.get(id);
    if (already) return already.actor!;
    if (doc && persisted === undefined) persisted = JSON.parse(doc.snapshot);

    const e = new Entry(this, k, id);
    const actor = persisted
      ? createActor(k.machine, { id, snapshot: persisted as never, parent: k.root })
      : createActor(k.machine, { id, input: k.input?.(id) as never, parent: k.root });
    e.actor = actor;
    e.restoring = persisted !== undefined;
    actor.subscribe(e);
    k.live.set(id, e);
    try {
      actor.start();
      (actor as unknown as { options: object }).options = STARTED_OPTIONS;
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
      if (!e.retired) this.markDirty(e); // normally marked by the start-up snapshot event already
    }
    if (!e.retired && k.idleMs > 0) {
      e.usedEpoch = k.epoch;
      if (!k.sweeper) {
        k.sweeper = setInterval(this.sweep, Math.max(1, k.idleMs / IDLE_EPOCHS), k);
        k.sweeper.unref();
      }
    }
    return actor;
  }

  /** Marks the actor used now: its idle time starts again. */
  private touch(e: Entry): void {
    e.passivating = false;
    e.usedEpoch = e.kind.epoch;
  }

  /** Advances a kind's idle epoch and lets the actors idle for `idleMs` go (see KindState.epoch). */
  private readonly sweep = (k: KindState): void => {
    k.epoch++;
    if (k.live.size === 0 || this.stopped) {
      clearInterval(k.sweeper);
      k.sweeper = undefined;
      return;
    }
    for (const e of k.live.values()) {
      // An entry already passivating waits for its write (settle() finishes the job).
      if (!e.passivating && k.epoch - e.usedEpoch > IDLE_EPOCHS) this.onIdle(e);
    }
  };

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
    e.seen = snap;
    if (this.listeners.size > 0) this.emit(k, e.id, snap.value, ev.event.type);
    if (snap.status === 'active') this.markDirty(e);
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
    this.markDirty(e);
  }

  /** Stops an actor the host drops (passivation, remove, host stop). */
  private retire(e: Entry): void {
    if (e.retired) return;
    const k = e.kind;
    e.retired = true;
    e.passivating = false;
    if (k.live.get(e.id) === e) k.live.delete(e.id);
    try {
      if (e.actor) stopHosted(e.actor);
    } catch (err) {
      this.log.warn({ kind: k.name, actorId: e.id, err: errInfo(err) }, 'error while stopping actor');
    }
  }

  private onIdle(e: Entry): void {
    if (e.retired || this.stopped) return;
    if (this.isBusy(e.actor!)) {
      e.usedEpoch = e.kind.epoch; // delayed events or running children would be lost: another idle period
      return;
    }
    if (e.dirty || e.busy) {
      e.passivating = true;
      this.schedule();
      return;
    }
    this.passivate(e);
  }

  private passivate(e: Entry): void {
    this.retire(e);
    this.stats.passivations++;
  }

  /** Whether stopping the actor now would lose work that is not in its persisted snapshot. */
  private isBusy(actor: AnyActor): boolean {
    // The system is the kind's, shared: only this actor's own delayed events count (its children's
    // are covered by the children check below).
    const scheduled = actor.system.getSnapshot()._scheduledEvents as Record<string, { source?: unknown }>;
    for (const id in scheduled) if (scheduled[id]!.source === actor) return true;
    const children = (actor.getSnapshot() as { children?: Record<string, AnyActor | undefined> }).children;
    if (children) {
      for (const id in children) {
        if ((children[id]?.getSnapshot() as { status?: string } | undefined)?.status === 'active') return true;
      }
    }
    return false;
  }

  private emit(k: KindState, actorId: string, state: unknown, event: string): void {
    const t: ActorTransition = { kind: k.name, actorId, state, event, at: new Date().toISOString() };
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

  // ---------------------------------------------------------------------------------------------
  // Persistence

  /**
   * An entry whose write is in flight is flagged but kept out of the dirty set until that write
   * ends (completed() puts it back), so a round never walks thousands of busy entries.
   */
  private markDirty(e: Entry): void {
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
  private writeSoon(): void {
    if (this.retryTimer === undefined) this.schedule(0);
  }

  /** A round on the next turn of the event loop, or within `delayMs` (one timer for all). */
  private schedule(delayMs = 0): void {
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
    let ops: Array<{ filter: { _id: string }; update: { $set: Omit<SnapshotDoc, '_id'> }; upsert: true }> = [];
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
      e.busy = true;
      writes.push(e);
      ops.push({
        filter: { _id: key(e.kind, e.id) },
        update: { $set: { kind: e.kind.name, actorId: e.id, snapshot: text, status, stateValue, updatedAt: now } },
        upsert: true,
      });
      if (writes.length >= BATCH_MAX) {
        this.track(this.writeBatch(writes, ops));
        writes = [];
        ops = [];
      }
    }
    if (writes.length > 0) this.track(this.writeBatch(writes, ops));
    if (deletes.length > 0) this.track(this.deleteBatch(deletes));
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
  private async writeBatch(entries: Entry[], ops: Parameters<Collection<SnapshotDoc>['bulkUpdate']>[0]): Promise<boolean> {
    let error: unknown;
    let failed: Map<number, unknown> | undefined;
    try {
      await this.col.bulkUpdate(ops);
    } catch (err) {
      if (err instanceof BulkUpdateError) failed = new Map(err.failures.map((f) => [f.index, f.error]));
      else error = err ?? new Error('store write failed');
    }
    const written = error !== undefined ? 0 : entries.length - (failed?.size ?? 0);
    this.stats.writes += written;
    if (written > 0) this.stats.writeBatches++;
    if (error !== undefined || failed) {
      this.stats.failures++;
      if (error !== undefined) this.log.error({ err: errInfo(error), actors: entries.length }, 'writing actor snapshots failed; will retry');
      for (const [i, err] of failed ?? []) {
        const e = entries[i]!;
        if (err instanceof DocumentTooLargeError) {
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
    // Whether nothing is left to retry (a snapshot too large is not retried).
    return error === undefined && [...(failed?.values() ?? [])].every((err) => err instanceof DocumentTooLargeError);
  }

  private async deleteBatch(entries: Entry[]): Promise<boolean> {
    let error: unknown;
    try {
      const ids = entries.map((e) => key(e.kind, e.id));
      await (ids.length === 1 ? this.col.deleteOne({ _id: ids[0] }) : this.col.deleteMany({ _id: { $in: ids } }));
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
      if (error instanceof DocumentTooLargeError && !e.dirty) {
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
    if (ok) {
      if (e.retired && k.draining.get(e.id) === e) k.draining.delete(e.id);
      if (e.passivating && !e.retired) {
        e.passivating = false;
        if (!this.stopped && !this.isBusy(e.actor!)) this.passivate(e);
        else e.usedEpoch = k.epoch;
      }
    } else if (e.passivating) {
      e.passivating = false;
      e.usedEpoch = k.epoch; // try again after another idle period
    }
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

  /** Resolves when nothing is pending for `e`; rejects when its pending operation fails. */
  private waitClean(e: Entry): Promise<void> {
    if (!e.dirty && !e.busy) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      (e.waiters ??= []).push({ resolve, reject });
    });
  }
}

/**
 * Stops a hosted actor. It has a parent (its kind's root), and XState's `stop()` refuses actors
 * with a parent; a parent stops its children through `_stop()`, which is what this calls. The
 * check at start-up below fails loudly if an XState upgrade renames it.
 */
function stopHosted(actor: AnyActor): void {
  (actor as unknown as { _stop(): void })._stop();
}
{
  const probe = createActor(fromTransition((state: null) => state, null)) as unknown as { _stop?: unknown };
  if (typeof probe._stop !== 'function') throw new Error('this XState version has no Actor._stop: the actor host cannot stop its actors');
}

function key(k: KindState, id: string): string {
  return `${k.name}:${id}`;
}

function jsonCopy(value: unknown): unknown {
  if (value === undefined) return undefined;
  try {
    return JSON.parse(JSON.stringify(value, jsonReplacer));
  } catch {
    return undefined;
  }
}
