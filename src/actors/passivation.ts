/**
 * Idle passivation: an actor not used for its kind's `idleMs` is stopped and dropped from memory
 * (its stored snapshot stays; the next `get` restores it). No timer per actor: each kind has an
 * `epoch` that one timer advances every quarter of `idleMs` while the kind has live actors, a use
 * stamps the actor with it, and an actor whose stamp is more than four epochs old has been idle for
 * between 1 and 1.25 × `idleMs`. An idle actor with a write pending leaves once it is written.
 */
import type { Entry, KindState } from './hosted.js';
import type { SnapshotWriter } from './persistence.js';
import { hasUnsavedWork } from './xstate-adapter.js';

/** Idle epochs per `idleMs`. */
const IDLE_EPOCHS = 4;

export interface IdleSweepOptions {
  writer: Pick<SnapshotWriter, 'schedule'>;
  /** Stops the actor and drops it from memory (the host's). */
  retire(e: Entry): void;
  stats: { passivations: number };
}

export class IdleSweep {
  private stopped = false;

  constructor(private readonly opts: IdleSweepOptions) {}

  /** A live actor of the kind, new or restored: its idle time starts now. */
  watch(e: Entry): void {
    const k = e.kind;
    if (k.idleMs <= 0) return;
    e.usedEpoch = k.epoch;
    if (!k.sweeper) {
      k.sweeper = setInterval(this.sweep, Math.max(1, k.idleMs / IDLE_EPOCHS), k);
      k.sweeper.unref();
    }
  }

  /** Marks the actor used now: its idle time starts again. */
  touch(e: Entry): void {
    e.passivating = false;
    e.usedEpoch = e.kind.epoch;
  }

  /** A store operation of `e` ended (the writer's `afterStore`): an actor waiting for it to passivate goes now. */
  afterStore(e: Entry, ok: boolean): void {
    if (!e.passivating) return; // (a retired entry never is)
    e.passivating = false;
    if (ok && !this.stopped && !hasUnsavedWork(e.actor!)) this.passivate(e);
    else e.usedEpoch = e.kind.epoch; // try again after another idle period
  }

  /** The host is stopping: no more sweeps. */
  stop(kinds: Iterable<KindState>): void {
    this.stopped = true;
    for (const k of kinds) {
      if (k.sweeper) clearInterval(k.sweeper);
      k.sweeper = undefined;
    }
  }

  /** Advances a kind's idle epoch and lets the actors idle for `idleMs` go. */
  private readonly sweep = (k: KindState): void => {
    k.epoch++;
    if (k.live.size === 0 || this.stopped) {
      clearInterval(k.sweeper);
      k.sweeper = undefined;
      return;
    }
    for (const e of k.live.values()) {
      // An entry already passivating waits for its write (afterStore() finishes the job).
      if (!e.passivating && k.epoch - e.usedEpoch > IDLE_EPOCHS) this.onIdle(e);
    }
  };

  private onIdle(e: Entry): void {
    if (e.retired || this.stopped) return;
    if (hasUnsavedWork(e.actor!)) {
      e.usedEpoch = e.kind.epoch; // delayed events or running children would be lost: another idle period
      return;
    }
    if (e.dirty || e.busy) {
      e.passivating = true;
      this.opts.writer.schedule();
      return;
    }
    this.passivate(e);
  }

  private passivate(e: Entry): void {
    this.opts.retire(e);
    this.opts.stats.passivations++;
  }
}
