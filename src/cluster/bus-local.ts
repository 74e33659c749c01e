/**
 * The in-process bus: what `npm start` runs on, and the default. Messages are delivered on a
 * microtask after `publish` returns (in publish order), through the same JSON encoding and size
 * limit as NATS, so code written against it behaves the same on a cluster. Several LocalBus
 * instances on one LocalHub act as separate nodes of one process (used by tests).
 */
import {
  BusNoRespondersError,
  BusTimeoutError,
  BusUnavailableError,
  StatusListeners,
  checkSubject,
  decodePayload,
  encodePayload,
  runHandler,
  type Bus,
  type BusHandler,
  type BusLog,
  type BusMessage,
  type BusStatus,
  type RequestOptions,
  type SubscribeOptions,
  type Unsubscribe,
} from './bus.js';

/** NATS's default max_payload. */
export const LOCAL_MAX_PAYLOAD_BYTES = 1024 * 1024;

interface LocalSub {
  subject: string;
  /** Tokens of a wildcard subject; undefined for an exact one. */
  tokens?: string[];
  queue?: string;
  handler: BusHandler;
  bus: LocalBus;
  active: boolean;
}

/** `*` matches one token, a final `>` one or more. */
function matches(pattern: string[], tokens: string[]): boolean {
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    if (p === '>') return tokens.length > i;
    if (i >= tokens.length) return false;
    if (p !== '*' && p !== tokens[i]) return false;
  }
  return pattern.length === tokens.length;
}

/** The message space several LocalBus instances share. */
export class LocalHub {
  private readonly exact = new Map<string, Set<LocalSub>>();
  private readonly wild = new Set<LocalSub>();
  private readonly turns = new Map<string, number>();

  add(sub: LocalSub): void {
    if (sub.tokens) {
      this.wild.add(sub);
      return;
    }
    let set = this.exact.get(sub.subject);
    if (!set) this.exact.set(sub.subject, (set = new Set()));
    set.add(sub);
  }

  remove(sub: LocalSub): void {
    sub.active = false;
    if (sub.tokens) {
      this.wild.delete(sub);
      return;
    }
    const set = this.exact.get(sub.subject);
    if (!set) return;
    set.delete(sub);
    if (set.size === 0) this.exact.delete(sub.subject);
  }

  /** The subscriptions a message on `subject` goes to: every plain one, one per queue group (in turn). */
  route(subject: string): LocalSub[] {
    const out: LocalSub[] = [];
    const groups = new Map<string, LocalSub[]>();
    const take = (sub: LocalSub) => {
      if (sub.queue === undefined) {
        out.push(sub);
        return;
      }
      let g = groups.get(sub.queue);
      if (!g) groups.set(sub.queue, (g = []));
      g.push(sub);
    };
    for (const sub of this.exact.get(subject) ?? []) take(sub);
    if (this.wild.size > 0) {
      const tokens = subject.split('.');
      for (const sub of this.wild) if (matches(sub.tokens!, tokens)) take(sub);
    }
    for (const [queue, members] of groups) {
      const turn = this.turns.get(queue) ?? 0;
      this.turns.set(queue, (turn + 1) % 1_000_000_007);
      out.push(members[turn % members.length]!);
    }
    return out;
  }
}

export interface LocalBusOptions {
  log: BusLog;
  /** Share a hub to have several buses (nodes) in one process; a fresh hub otherwise. */
  hub?: LocalHub;
  maxPayloadBytes?: number;
}

export class LocalBus implements Bus {
  readonly kind = 'local' as const;
  readonly maxPayloadBytes: number;
  private readonly hub: LocalHub;
  private readonly log: BusLog;
  private readonly subs = new Set<LocalSub>();
  private readonly pending = new Set<(err: Error) => void>();
  private readonly listeners: StatusListeners;
  private state: BusStatus = 'connected';
  private closing: Promise<void> | undefined;

  constructor(options: LocalBusOptions) {
    this.hub = options.hub ?? new LocalHub();
    this.log = options.log;
    this.maxPayloadBytes = options.maxPayloadBytes ?? LOCAL_MAX_PAYLOAD_BYTES;
    this.listeners = new StatusListeners(options.log);
  }

  get status(): BusStatus {
    return this.state;
  }

  publish(subject: string, data?: unknown): boolean {
    checkSubject(subject, false);
    const bytes = encodePayload(data, this.maxPayloadBytes);
    if (this.state !== 'connected') return false;
    this.dispatch(subject, bytes, this.hub.route(subject), undefined);
    return true;
  }

  subscribe(subject: string, handler: BusHandler, options: SubscribeOptions = {}): Unsubscribe {
    checkSubject(subject, true);
    if (options.queue !== undefined) checkSubject(options.queue, false);
    if (this.state === 'closed') throw new BusUnavailableError('closed');
    const wild = subject.includes('*') || subject.includes('>');
    const sub: LocalSub = { subject, tokens: wild ? subject.split('.') : undefined, queue: options.queue, handler, bus: this, active: true };
    this.hub.add(sub);
    this.subs.add(sub);
    return () => {
      if (!sub.active) return;
      this.hub.remove(sub);
      this.subs.delete(sub);
    };
  }

  request(subject: string, data: unknown, options: RequestOptions): Promise<unknown> {
    try {
      checkSubject(subject, false);
      const bytes = encodePayload(data, this.maxPayloadBytes);
      if (this.state !== 'connected') throw this.unavailable();
      const targets = this.hub.route(subject);
      if (targets.length === 0) throw new BusNoRespondersError(subject);
      return new Promise<unknown>((resolve, reject) => {
        let done = false;
        const finish = (err: Error | undefined, reply?: unknown) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          this.pending.delete(fail);
          if (err) reject(err);
          else resolve(reply);
        };
        const fail = (err: Error) => finish(err);
        const timer = setTimeout(() => finish(new BusTimeoutError(subject, options.timeoutMs)), options.timeoutMs);
        this.pending.add(fail);
        this.dispatch(subject, bytes, targets, (responder, replyData) => {
          // As on NATS: the reply is encoded (and may be refused) on the responder's side.
          const replyBytes = encodePayload(replyData, responder.maxPayloadBytes);
          if (responder.state !== 'connected') return false;
          queueMicrotask(() => finish(undefined, decodePayload(replyBytes)));
          return true;
        });
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  flush(): Promise<void> {
    return this.state === 'connected' ? Promise.resolve() : Promise.reject(this.unavailable());
  }

  private unavailable(): BusUnavailableError {
    return new BusUnavailableError(this.state === 'closed' ? 'closed' : 'reconnecting');
  }

  onStatus(listener: (status: BusStatus) => void): () => void {
    return this.listeners.add(listener);
  }

  async close(): Promise<void> {
    if (this.closing) return this.closing;
    this.closing = this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    // Messages already dispatched (queued on microtasks) reach their handlers first, as a NATS drain.
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.state = 'closed';
    for (const sub of this.subs) this.hub.remove(sub);
    this.subs.clear();
    for (const fail of [...this.pending]) fail(new BusUnavailableError('closed'));
    this.listeners.emit('closed');
  }

  /** Delivers one copy of the payload to each target on the next microtask. */
  private dispatch(
    subject: string,
    bytes: Uint8Array,
    targets: LocalSub[],
    reply: ((responder: LocalBus, data: unknown) => boolean) | undefined,
  ): void {
    if (targets.length === 0) return;
    queueMicrotask(() => {
      for (const sub of targets) {
        if (!sub.active) continue;
        let data: unknown;
        try {
          data = decodePayload(bytes);
        } catch (err) {
          sub.bus.log.error({ err, subject }, 'a bus message could not be decoded');
          continue;
        }
        const msg: BusMessage = reply ? { subject, data, respond: (d?: unknown) => reply(sub.bus, d) } : { subject, data };
        runHandler(sub.handler, msg, (err) => sub.bus.log.error({ err, subject }, 'a bus handler failed'));
      }
    });
  }
}
