/**
 * What the actor host keeps per kind and per actor, shared by its parts: the host (host.ts), the
 * snapshot writer (persistence.ts) and the idle sweep (passivation.ts). One `Entry` per actor in
 * memory is all the per-actor state there is; each part owns the fields its comments name.
 */
import type { AnyActor, AnyStateMachine } from 'xstate';

export interface ActorHostLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface KindState {
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
  /** The kind's root actor: the parent of all its actors, whose system they share (xstate-adapter.ts). */
  readonly root: AnyActor;
  /** The idle sweep's clock and its one timer for the kind (passivation.ts). */
  epoch: number;
  sweeper: NodeJS.Timeout | undefined;
}

/** Where an entry reports its actor's failure (the host). */
export interface ActorFailureSink {
  actorFailed(e: Entry, err: unknown): void;
}

interface Waiter {
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * One hosted actor. Also the actor's observer, for `error` only: that is how the host learns that
 * the actor failed (a `next` or `complete` method would cost a bound function per actor).
 */
export class Entry {
  actor: AnyActor | undefined = undefined;
  /** The kind's idle epoch when the actor was last used (passivation.ts). */
  usedEpoch = 0;
  /** The last snapshot object seen; XState keeps the same object when an event changes nothing. */
  seen: unknown = undefined;
  /** Persisted snapshot captured before the host stopped the actor (a stopped actor's own snapshot says `stopped`). */
  frozen: unknown = undefined;
  /** Callers waiting for the pending store operation (persistence.ts). */
  waiters: Waiter[] | undefined = undefined;
  /** A store operation is wanted (the entry is in the writer's dirty set unless one is in flight). */
  dirty = false;
  /** A store operation of this actor is in flight. */
  busy = false;
  /** No longer accepts events (done, failed, passivated, removed, host stopped). */
  retired = false;
  /** Being started from a stored snapshot: its start-up snapshot event is not a change. */
  restoring = false;
  /** Found idle while a write was pending: passivate once it is written (passivation.ts). */
  passivating = false;
  /** The next store operation deletes the snapshot instead of writing it. */
  deleteOnFlush = false;
  /** When the actor entered its current state value (ms; for a restored actor, when it was restored). */
  since = Date.now();

  constructor(
    readonly owner: ActorFailureSink,
    readonly kind: KindState,
    readonly id: string,
  ) {}

  error(err: unknown): void {
    this.owner.actorFailed(this, err);
  }
}

/** The stored document's `_id`. */
export function snapshotKey(k: KindState, id: string): string {
  return `${k.name}:${id}`;
}

export function errInfo(err: unknown): unknown {
  return err instanceof Error ? { name: err.name, message: err.message, stack: err.stack } : err;
}
