/**
 * Where actors live, and commands to them (the ActorPlacement port of src/services/ports.ts).
 *
 * In a cluster an actor lives on the node that owns its shard (`shardOf("<kind>:<id>")`). A
 * command for it (a registration decision, a channel post, a run's start or cancellation, an
 * inspection) runs there: at once when the shard is this node's, else as a request on
 * `shard.<n>`, which only the owner listens on. While a shard changes hands nobody answers, or the
 * old owner answers `not_owner`; the caller retries until its deadline, then answers 503. A
 * request that times out may have been acted on (504): the caller sees it and may retry; what the
 * command changed is in the store, which the owner reads when it loads the actor.
 *
 * Ownership changes reach the actor host and the services here, in order:
 * - acquired: the host stamps the shard's stored actors with the new epoch (the old owner's writes
 *   fail from then on), the services restore what they run for it (running workflow runs resume),
 *   then the shard's subject is served;
 * - released on purpose (rebalancing, stop): the subject goes first (new commands wait for the
 *   next owner), the services stop their work for the shard, the host writes out and stops the
 *   shard's actors, while the shard is still owned;
 * - lost (taken, expired, evicted): the same without writing (the writes would be refused).
 */
import { AppError } from '../domain/errors.js';
import { BusNoRespondersError, BusTimeoutError, BusUnavailableError, type Bus, type BusLog, type Unsubscribe } from './bus.js';
import { BusRemoteError, call, serve } from './rpc.js';
import type { Fence } from './fence.js';
import type { ShardLossReason, ShardManager } from './shards.js';
import type { Subjects } from './subjects.js';

/** What the actor host does when shards change hands. */
export interface PlacementHost {
  /** The shard is this node's under `fence`: stamp its stored actors so older owners' writes fail. */
  claimShard(shard: number, fence: Fence): Promise<void>;
  /** The shard is being given up: write its actors out and stop them (its fence still holds). */
  releaseShard(shard: number): Promise<void>;
  /** The shard is gone: stop its actors without writing. */
  dropShard(shard: number): void;
}

export interface ShardPlacementOptions {
  bus: Bus;
  subjects: Subjects;
  shards: ShardManager;
  log: BusLog;
  /** Default deadline of a command (retries included). */
  timeoutMs: number;
}

type Hook = (shard: number) => Promise<void> | void;

const NOT_OWNER = 'not_owner';
const APP_ERROR = 'app';

/** An AppError as it crosses the bus, and back. */
export function describeRemote(err: unknown): { code: string; message: string } | undefined {
  if (err instanceof AppError) return { code: APP_ERROR, message: JSON.stringify({ status: err.status, code: err.code, message: err.message, retryAfterSeconds: err.retryAfterSeconds }) };
  if (err instanceof BusRemoteError && err.code === NOT_OWNER) return { code: NOT_OWNER, message: err.message };
  return undefined;
}

export function appErrorOf(err: BusRemoteError): AppError | null {
  if (err.code !== APP_ERROR) return null;
  try {
    const e = JSON.parse(err.message) as { status: number; code: string; message: string; retryAfterSeconds?: number };
    return new AppError(e.status, e.code, e.message, e.retryAfterSeconds);
  } catch {
    return null;
  }
}

/** The AppError a failed bus call answers as: 503 when the bus is down, 504 when no answer came. */
export function busFailure(err: unknown, what: string): AppError | null {
  if (err instanceof BusUnavailableError) return new AppError(503, 'cluster_unavailable', `${what}: this node cannot reach the other nodes now; try again`, 1);
  if (err instanceof BusTimeoutError) return new AppError(504, 'cluster_timeout', `${what}: the node that holds it did not answer in time (it may still have acted)`);
  if (err instanceof BusRemoteError) return appErrorOf(err);
  return null;
}

export class ShardPlacement {
  readonly clustered = true;
  private readonly handlers = new Map<string, (data: unknown) => unknown>();
  private readonly acquiredHooks: Hook[] = [];
  private readonly releasedHooks: Hook[] = [];
  private readonly served = new Map<number, Unsubscribe>();
  /** Shards being given up: no longer local for new commands. */
  private readonly releasing = new Set<number>();
  private host: PlacementHost | undefined;
  /** Shards lost since the last drop pass (dropped together, on the next turn). */
  private lostPending: number[] = [];
  /** Commands running here, per shard: a release waits for them before the shard's actors stop. */
  private readonly running = new Map<number, { count: number; idle: Array<() => void> }>();

  constructor(private readonly o: ShardPlacementOptions) {
    o.shards.on('acquired', (shard, epoch) => this.acquired(shard, epoch));
    o.shards.on('lost', (shard, _epoch, reason) => this.lost(shard, reason));
  }

  /** The actor host, once built (it is told of every change of ownership). */
  attachHost(host: PlacementHost): void {
    this.host = host;
  }

  shardOf(key: string): number {
    return this.o.shards.shardOf(key);
  }

  isLocal(key: string): boolean {
    const shard = this.o.shards.shardOf(key);
    return !this.releasing.has(shard) && this.o.shards.isOwner(shard);
  }

  /** The fence to write the actor `key` under while its shard is this node's (a release writing it out included); null otherwise. */
  fenceFor(key: string): Fence | null {
    return this.o.shards.fence(this.o.shards.shardOf(key));
  }

  /** A write under the shard's epoch was refused: another node holds it; stop acting for it now. */
  stale(shard: number): void {
    this.o.log.warn({ shard }, 'a write under this node\'s epoch was refused: another node owns the shard now');
    this.o.shards.relinquish(shard);
  }

  handle(op: string, fn: (data: unknown) => unknown): void {
    if (this.handlers.has(op)) throw new Error(`command ${op} is already handled`);
    this.handlers.set(op, fn);
  }

  onAcquired(fn: Hook): void {
    this.acquiredHooks.push(fn);
  }

  onReleased(fn: Hook): void {
    this.releasedHooks.push(fn);
  }

  async run<T>(key: string, op: string, data: unknown, timeoutMs = this.o.timeoutMs): Promise<T> {
    const shard = this.o.shards.shardOf(key);
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      if (this.isLocal(key)) return (await this.tracked(shard, () => this.local(op, data))) as T;
      const left = deadline - Date.now();
      try {
        return (await call(this.o.bus, this.o.subjects.shard(shard), { op, key, data }, { timeoutMs: Math.max(1, left) })) as T;
      } catch (err) {
        const moving = err instanceof BusNoRespondersError || (err instanceof BusRemoteError && err.code === NOT_OWNER);
        if (!moving) throw busFailure(err, `${op} for ${key}`) ?? err;
      }
      if (Date.now() >= deadline) {
        throw new AppError(503, 'shard_unavailable', `${op}: the node that holds ${key} is changing; try again`, 1);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(25 * 2 ** attempt, 500, Math.max(1, deadline - Date.now()))));
    }
  }

  /** Runs a command of `shard`, counted so that a release of the shard waits for it. */
  private async tracked(shard: number, fn: () => Promise<unknown>): Promise<unknown> {
    let r = this.running.get(shard);
    if (!r) this.running.set(shard, (r = { count: 0, idle: [] }));
    r.count++;
    try {
      return await fn();
    } finally {
      if (--r.count === 0) {
        this.running.delete(shard);
        for (const resolve of r.idle) resolve();
      }
    }
  }

  /** Resolves once no command of `shard` runs here (or after the command deadline: its actor stops anyway). */
  private async drained(shard: number): Promise<void> {
    const r = this.running.get(shard);
    if (!r) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise<void>((resolve) => r.idle.push(resolve)), new Promise<void>((resolve) => (timer = setTimeout(resolve, this.o.timeoutMs)))]);
    clearTimeout(timer);
  }

  private async local(op: string, data: unknown): Promise<unknown> {
    const fn = this.handlers.get(op);
    if (!fn) throw new Error(`no handler for command ${op}`);
    return fn(data);
  }

  /** Runs before the shard manager gives a shard up on purpose (its `beforeRelease`). */
  async beforeRelease(shard: number): Promise<void> {
    this.releasing.add(shard);
    this.served.get(shard)?.();
    this.served.delete(shard);
    try {
      // Commands already running for the shard's actors finish first (new ones wait for the next owner).
      await this.drained(shard);
      await this.runHooks(this.releasedHooks, shard);
      await this.host?.releaseShard(shard);
    } catch (err) {
      // The shard is kept and tried again later: serve it again meanwhile.
      this.releasing.delete(shard);
      if (this.o.shards.isOwner(shard)) this.serveShard(shard);
      throw err;
    }
  }

  private acquired(shard: number, epoch: number): void {
    this.releasing.delete(shard);
    const work = async () => {
      await this.host?.claimShard(shard, { shard, epoch });
      await this.runHooks(this.acquiredHooks, shard);
      if (this.o.shards.fence(shard)?.epoch === epoch && !this.served.has(shard)) this.serveShard(shard);
    };
    work().catch((err: unknown) => {
      this.o.log.error({ err, shard }, 'taking over a shard failed; giving it up');
      this.o.shards.relinquish(shard);
    });
  }

  private lost(shard: number, reason: ShardLossReason): void {
    this.served.get(shard)?.();
    this.served.delete(shard);
    const graceful = this.releasing.delete(shard) && (reason === 'released' || reason === 'stopped');
    if (graceful) return; // beforeRelease did the rest
    for (const fn of this.releasedHooks) {
      Promise.resolve()
        .then(() => fn(shard))
        .catch((err: unknown) => this.o.log.error({ err, shard }, 'stopping the work of a lost shard failed'));
    }
    this.lostPending.push(shard);
    if (this.lostPending.length === 1) {
      setImmediate(() => {
        const shards = this.lostPending;
        this.lostPending = [];
        for (const s of shards) if (!this.o.shards.isOwner(s)) this.host?.dropShard(s);
      });
    }
  }

  private serveShard(shard: number): void {
    const unsubscribe = serve(
      this.o.bus,
      this.o.subjects.shard(shard),
      async (data) => {
        const { op, key, data: payload } = (data ?? {}) as { op?: string; key?: string; data?: unknown };
        if (typeof op !== 'string' || typeof key !== 'string') throw new BusRemoteError('', 'bad_request', 'a shard command names an op and a key');
        if (!this.isLocal(key)) throw new BusRemoteError('', NOT_OWNER, `shard ${shard} is not this node's`);
        return this.tracked(shard, () => this.local(op, payload));
      },
      { log: this.o.log, describe: (err) => describeRemote(err) ?? { code: 'internal', message: 'the command failed on the node that holds the actor' } },
    );
    this.served.set(shard, unsubscribe);
  }

  private async runHooks(hooks: Hook[], shard: number): Promise<void> {
    for (const fn of hooks) await fn(shard);
  }

  /** Stops serving every shard (at shutdown, before the shards are released). */
  stopServing(): void {
    for (const unsubscribe of this.served.values()) unsubscribe();
    this.served.clear();
  }
}

/** One process: every actor is here, and a command is a call. */
export class LocalPlacement {
  readonly clustered = false;
  private readonly handlers = new Map<string, (data: unknown) => unknown>();

  isLocal(): boolean {
    return true;
  }

  fenceFor(): null {
    return null;
  }

  stale(): void {}

  shardOf(): number {
    return 0;
  }

  handle(op: string, fn: (data: unknown) => unknown): void {
    this.handlers.set(op, fn);
  }

  async run<T>(_key: string, op: string, data: unknown): Promise<T> {
    const fn = this.handlers.get(op);
    if (!fn) throw new Error(`no handler for command ${op}`);
    return (await fn(data)) as T;
  }

  onAcquired(): void {}
  onReleased(): void {}
}
