/**
 * The other nodes of a cluster as the services see them (the PeerNodes port of
 * src/services/ports.ts): one-way broadcasts to every node, a scatter/gather that asks every
 * other live node and collects what comes back by a deadline, and a hook for what must be re-read
 * after the bus was down (messages sent meanwhile are lost).
 *
 * Broadcasts travel on `bcast.<topic>` (each node hears its own and skips it); gathers are
 * requests on each live node's `node.<id>` subject, sent in parallel. A node that does not answer
 * by the deadline (gone, slow, partitioned) is listed in `missing`: the caller says what that
 * means for its path (docs/cluster.md, "When NATS loses a message").
 *
 * An announcement is a broadcast that is also appended to the store's change log
 * (src/cluster/change-log.ts): a node that missed it on the bus reads it there within a period,
 * so the same handlers may hear it twice and must be idempotent.
 */
import { randomUUID } from 'node:crypto';
import { BusError, type Bus, type BusLog, type BusStatus, type Unsubscribe } from './bus.js';
import { BusRemoteError, call, serve } from './rpc.js';
import type { Subjects } from './subjects.js';
import type { ChangeLog } from './change-log.js';

/** What a gather brings back: the answers that came in time, and the nodes that did not answer. */
export interface Gathered<T> {
  answers: T[];
  missing: string[];
}

/** How a broadcast handler heard the message: on the bus, or from the change log (the bus lost it). */
export type Via = 'bus' | 'log';
type Handler = (data: unknown, via: Via) => unknown;
/** A broadcast on the bus; `id` marks an announcement, whose change-log entry the nodes that heard it skip. */
interface Envelope {
  from: string;
  data: unknown;
  id?: string;
}
/** Announcements heard on the bus are remembered this long to twice this long. */
const HEARD_KEPT_MS = 60_000;

export interface PeersOptions {
  bus: Bus;
  subjects: Subjects;
  /** This node's id and `<id>/<incarnation>` key. */
  nodeId: string;
  nodeKey: string;
  /** The ids of the nodes whose leases run now (this one included), as last read. */
  liveNodeIds(): readonly string[];
  log: BusLog;
  /** The default deadline of a gather. */
  gatherTimeoutMs: number;
}

export class Peers {
  readonly clustered = true;
  private readonly broadcastHandlers = new Map<string, Handler[]>();
  private readonly gatherHandlers = new Map<string, (data: unknown) => unknown>();
  private readonly resync: Array<() => unknown> = [];
  private readonly lost: Array<() => unknown> = [];
  private changes: ChangeLog | undefined;
  private heard = new Set<string>();
  private heardBefore = new Set<string>();
  private heardSince = Date.now();
  private readonly subs: Unsubscribe[] = [];
  private lastStatus: BusStatus;
  private stopStatus: (() => void) | undefined;

  constructor(private readonly o: PeersOptions) {
    this.lastStatus = o.bus.status;
  }

  /** Listens on this node's subject and follows the bus's status (for resync). */
  start(): void {
    const { bus, subjects, log } = this.o;
    this.subs.push(
      serve(
        bus,
        subjects.node(this.o.nodeId),
        async (data) => {
          const { topic, data: payload } = (data ?? {}) as { topic?: string; data?: unknown };
          const handler = topic === undefined ? undefined : this.gatherHandlers.get(topic);
          if (!handler) throw new BusRemoteError('', 'unknown_topic', `no handler for ${String(topic)}`);
          return handler(payload);
        },
        { log, describe: (err) => (err instanceof BusRemoteError ? { code: err.code, message: err.message } : { code: 'internal', message: 'the node failed to answer' }) },
      ),
    );
    this.stopStatus = bus.onStatus((status) => {
      const was = this.lastStatus;
      this.lastStatus = status;
      if (status === 'connected' && was !== 'connected') this.runResync();
    });
  }

  stop(): void {
    for (const unsubscribe of this.subs.splice(0)) unsubscribe();
    this.stopStatus?.();
  }

  /**
   * Sends `data` to every other node's `onBroadcast(topic)` handlers. False when it was not sent
   * (the bus is down): the other nodes then catch up at their resync or periodic refresh.
   */
  broadcast(topic: string, data: unknown): boolean {
    return this.publish(topic, { from: this.o.nodeKey, data });
  }

  private publish(topic: string, envelope: Envelope): boolean {
    try {
      return this.o.bus.publish(this.o.subjects.bcast(topic), envelope);
    } catch (err) {
      this.o.log.error({ err, topic }, 'a broadcast could not be sent');
      return false;
    }
  }

  /** The change log announcements are appended to, and whose entries reach the broadcast handlers. */
  useChangeLog(changes: ChangeLog): void {
    this.changes = changes;
  }

  /**
   * Broadcasts `data` and appends it to the change log (once `stored` settles, when given), which
   * the other nodes read within a period: a node that heard the broadcast skips the entry, one
   * that missed it hears it then.
   */
  announce(topic: string, data: unknown, stored?: Promise<unknown>): void {
    const id = randomUUID();
    this.publish(topic, { from: this.o.nodeKey, data, id });
    const append = () => this.changes?.append(topic, { id, data });
    if (stored) stored.then(append, append);
    else append();
  }

  /** An entry of the change log written by another node: to the broadcast handlers, unless its broadcast was heard. */
  async deliverLogged(topic: string, entry: unknown): Promise<void> {
    const { id, data } = (entry ?? {}) as { id?: string; data?: unknown };
    if (id !== undefined && (this.heard.has(id) || this.heardBefore.has(id))) return;
    await this.deliver(topic, data, 'log');
  }

  private async deliver(topic: string, data: unknown, via: Via): Promise<void> {
    for (const h of this.broadcastHandlers.get(topic) ?? []) {
      try {
        await h(data, via);
      } catch (err) {
        this.o.log.error({ err, topic }, 'a broadcast handler failed');
      }
    }
  }

  /** Remembers an announcement heard on the bus, for HEARD_KEPT_MS to two periods of it (its log entry comes within one poll). */
  private rememberHeard(id: string): void {
    const now = Date.now();
    if (now - this.heardSince >= HEARD_KEPT_MS) {
      this.heardBefore = this.heard;
      this.heard = new Set();
      this.heardSince = now;
    }
    this.heard.add(id);
  }

  /** Runs `fn` when this node missed announcements for good (the change log has a hole): read everything again. */
  onChangesLost(fn: () => unknown): void {
    this.lost.push(fn);
  }

  changesLost(): void {
    this.runEach(this.lost, 'reading everything again after announcements were lost failed');
  }

  onBroadcast(topic: string, handler: Handler): void {
    let list = this.broadcastHandlers.get(topic);
    if (!list) {
      this.broadcastHandlers.set(topic, (list = []));
      this.subs.push(
        this.o.bus.subscribe(this.o.subjects.bcast(topic), async (msg) => {
          const { from, data, id } = (msg.data ?? {}) as Partial<Envelope>;
          if (from === this.o.nodeKey) return;
          if (id !== undefined) this.rememberHeard(id);
          await this.deliver(topic, data, 'bus');
        }),
      );
    }
    list.push(handler);
  }

  /**
   * Asks every other live node's `onGather(topic)` handler, in parallel, and resolves with the
   * answers that came within `deadlineMs` and the nodes that gave none (not answering, failing,
   * or unreachable because the bus is down).
   */
  async gather<T>(topic: string, data: unknown, deadlineMs = this.o.gatherTimeoutMs): Promise<Gathered<T>> {
    const others = this.o.liveNodeIds().filter((id) => id !== this.o.nodeId);
    const answers: T[] = [];
    const missing: string[] = [];
    await Promise.all(
      others.map(async (id) => {
        try {
          answers.push((await call(this.o.bus, this.o.subjects.node(id), { topic, data }, { timeoutMs: deadlineMs })) as T);
        } catch (err) {
          missing.push(id);
          if (!(err instanceof BusError)) throw err;
          this.o.log.warn({ node: id, topic, err: err.message }, 'a node did not answer a gather in time');
        }
      }),
    );
    return { answers, missing };
  }

  onGather(topic: string, handler: (data: unknown) => unknown): void {
    this.gatherHandlers.set(topic, handler);
  }

  /** Runs `fn` each time the bus is back after being down (broadcasts sent meanwhile were lost). */
  onResync(fn: () => unknown): void {
    this.resync.push(fn);
  }

  private runResync(): void {
    // What was announced while the bus was down is in the change log: read it now rather than at the next period.
    void this.changes?.poll();
    this.runEach(this.resync, 'catching up after the bus was down failed');
  }

  private runEach(fns: ReadonlyArray<() => unknown>, failed: string): void {
    for (const fn of fns) {
      Promise.resolve()
        .then(fn)
        .catch((err: unknown) => this.o.log.error({ err }, failed));
    }
  }
}

/** The peers of a single process: there are none; broadcasts and gathers reach nobody. */
export class NoPeers {
  readonly clustered = false;
  broadcast(): boolean {
    return true;
  }
  announce(): void {}
  onBroadcast(): void {}
  onChangesLost(): void {}
  async gather<T>(): Promise<Gathered<T>> {
    return { answers: [], missing: [] };
  }
  onGather(): void {}
  onResync(): void {}
}
